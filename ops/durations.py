"""The one parser of durations: ISO 8601's ``PnDTnHnMnS`` (the form ARM, Bicep and
infra/messaging.json use, ``parse_iso8601_duration``), and what an operator types
(``parse_duration``: ``7d``, ``12h``, ``1d12h``, ``30m``, ``45s``, or ISO 8601). Pure; used by
the tool, by the stand-ins reading infra/messaging.json (``ops.messaging``) and by the tests of
infra/."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

_SHORT = re.compile(
    r"^(?:(?P<days>\d+)d)?(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?(?:(?P<seconds>\d+)s)?$"
)
_ISO = re.compile(
    r"^P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_iso8601_duration(text: str) -> timedelta:
    """Parse the PnDTnHnMnS subset of ISO-8601 that ARM/Bicep uses for queue properties.

    Hand-rolled so that reading infra/messaging.json needs no extra dependency; years, months
    and weeks are rejected because their length is ambiguous and Service Bus never uses them.
    """
    text = text.strip()
    match = _ISO.match(text)
    if match is None or text == "P" or text.endswith("T"):  # the regex allows empty parts
        raise ValueError(f"unsupported ISO-8601 duration: {text!r} (expected PnDTnHnMnS)")
    parts = match.groupdict()
    return timedelta(
        days=int(parts["days"] or 0),
        hours=int(parts["hours"] or 0),
        minutes=int(parts["minutes"] or 0),
        seconds=float(parts["seconds"] or 0),
    )


def parse_duration(text: str) -> timedelta:
    """An operator's duration (``argparse`` type): the short form or ISO 8601."""
    short = _SHORT.match(text)
    if short is not None and any(short.groupdict().values()):
        return timedelta(**{k: float(v) for k, v in short.groupdict().items() if v})
    try:
        return parse_iso8601_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, P1D)") from None

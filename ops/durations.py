"""Durations an operator types: ``7d``, ``12h``, ``1d12h``, ``30m``, ``45s`` or ISO 8601
(``P1D``, ``PT6H``, ``PT1M30S``), the form ARM and infra/messaging.json use."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

_SHORT = re.compile(
    r"^(?:(?P<days>\d+)d)?(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?(?:(?P<seconds>\d+)s)?$"
)
_ISO = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    match = _SHORT.match(text) or _ISO.match(text)
    if match is None or not any(match.groupdict().values()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, P1D)")
    return timedelta(**{k: float(v) for k, v in match.groupdict().items() if v})

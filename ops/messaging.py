"""infra/messaging.json, read once: the queue's and the topic's semantics as the Bicep deploys
them (``loadJsonContent``), for the tool's fallback duplicate-detection window
(``ops.window``) and for the local stand-ins (``local.standins.broker``, ``local.standins.topic``),
so that local runs cannot drift from Azure. The one reader of that file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ops.durations import parse_iso8601_duration

MESSAGING_FILE = Path(__file__).resolve().parent.parent / "infra" / "messaging.json"


@dataclass(frozen=True)
class Messaging:
    """What the app's behaviour depends on, of infra/messaging.json."""

    queue_name: str
    topic_name: str | None  # None in a file for a queue alone (tests)
    lock_duration: timedelta
    max_delivery_count: int
    duplicate_detection_window: timedelta  # the Standard tier's (and the stand-in's)


def read_messaging(path: Path | None = None) -> Messaging:
    raw = json.loads((path or MESSAGING_FILE).read_text(encoding="utf-8"))
    return Messaging(
        queue_name=str(raw["queueName"]),
        topic_name=str(raw["topicName"]) if "topicName" in raw else None,
        lock_duration=parse_iso8601_duration(raw["lockDuration"]),
        max_delivery_count=int(raw["maxDeliveryCount"]),
        duplicate_detection_window=parse_iso8601_duration(
            str(raw["duplicateDetectionHistoryTimeWindow"])
        ),
    )

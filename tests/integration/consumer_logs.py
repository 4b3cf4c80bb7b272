"""The consumer's log records, read from its own logger (``orders.consumer``), not through
pytest's root-logger capture: a run that turned the logger's propagation off (the demo does, for
its console) must not make an assertion on the records pass or fail by accident."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from shared.telemetry.names import LOGGER_NAME


class _Records(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self._records = records

    def emit(self, record: logging.LogRecord) -> None:
        self._records.append(record)


@contextmanager
def consumer_records() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    handler = _Records(records)
    logger = logging.getLogger(LOGGER_NAME)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def retried_attempts(records: list[logging.LogRecord]) -> list[str]:
    """What each attempt the delivery retried met, from its retry log record."""
    return [str(record.attempt_outcome) for record in records if hasattr(record, "attempt_outcome")]

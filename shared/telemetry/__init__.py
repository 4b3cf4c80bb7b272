"""Telemetry: OpenTelemetry spans, metrics and logs, the cores' observer ports implemented.

- ``names``: every name exported (spans, attributes, metrics, loggers, the values operators
  filter on): the contract with the queries, alerts and workbook in infra/ and with
  docs/operations.md (``tests/telemetry/test_envelopes.py`` holds it to the exporter's output);
- ``exporters``: the Azure Monitor distro configured once per worker process, and which log
  records are exported;
- ``spans``: W3C trace context (producer links, traceparents) and a failed span's error type;
- ``consumer``: ``ConsumerTelemetry``, the ``shared.kit.service.ConsumerObserver``;
- ``relay``: ``RelayTelemetry``, the relay's and the watchdog's observers;
- ``edge``: ``EdgeTelemetry``, the orders API's observer (``shared.edge.observer``).

Imports the cores, the adapters and OpenTelemetry; never ``shared.bootstrap`` (``make lint``).
The cores never import it: they see only their observer ports and traceparent strings. A new
name goes into ``names`` (and infra/ when a query reads it).
"""

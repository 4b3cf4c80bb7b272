"""Span handling for a consumer's instrumentation (and an app's other spans): W3C trace
context (the producer links of a received message or a stored event, the traceparent of a span)
and the error type set on a failed span, with a kept copy (the Azure Monitor exporter drops
``error.type`` from ``customDimensions``). OpenTelemetry API only; the kit's core never sees a
span, only the traceparent strings this module makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

ATTR_ERROR_TYPE = "error.type"

_propagator = TraceContextTextMapPropagator()


def producer_links(properties: Mapping[str, Any]) -> list[Link]:
    """A link to the producer's span when the message carries W3C trace context: a
    ``traceparent`` application property, or the Service Bus SDKs' ``Diagnostic-Id`` (which
    holds a traceparent value). The first valid one wins; an invalid value yields no link."""
    for key in ("traceparent", "Diagnostic-Id"):
        value = properties.get(key)
        if not isinstance(value, str) or not value:
            continue
        carrier = {"traceparent": value}
        state = properties.get("tracestate")
        if isinstance(state, str) and state:
            carrier["tracestate"] = state
        context = trace.get_current_span(_propagator.extract(carrier)).get_span_context()
        if context.is_valid:
            return [Link(context)]
    return []


def traceparent_of(span: Span) -> str | None:
    """The W3C traceparent of ``span``; None when tracing is off (a non-recording span)."""
    if not span.get_span_context().is_valid:
        return None  # what the propagator would inject: nothing (tracing off)
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def set_error_type(span: Span, error_type: str, kept_attribute: str) -> None:
    """``error.type``, and its copy under ``kept_attribute`` (``<namespace>.error_type``)."""
    span.set_attribute(ATTR_ERROR_TYPE, error_type)
    span.set_attribute(kept_attribute, error_type)


def qualified_name(kind: type[BaseException]) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"

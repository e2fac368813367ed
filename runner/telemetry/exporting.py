"""The OpenTelemetry providers of a running agent: OTLP over HTTP (protobuf), configured by the
standard ``OTEL_*`` variables and the manifest's ``telemetry`` block.

Variables read here (from the agent's environment): ``OTEL_EXPORTER_OTLP_ENDPOINT`` and the
per-signal ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS`` (and per signal), ``OTEL_EXPORTER_OTLP_PROTOCOL`` (only
``http/protobuf`` is exported), ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``. The SDK
itself reads ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` and
``OTEL_METRIC_EXPORT_INTERVAL`` from the process environment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import unquote

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from runner.manifest import Manifest
from runner.telemetry.recorder import Recorder

logger = logging.getLogger(__name__)
AttributeValue = str | int | float | bool

DEFAULT_ENDPOINT = "http://localhost:4318"
PROTOCOL = "http/protobuf"
EXPORT_TIMEOUT = 2.0  # seconds one export may take: the flush at exit is bounded by it
SPAN_DELAY_MS = 1000  # spans are sent in batches at most this long after they end


def start_recorder(manifest: Manifest, environ: Mapping[str, str]) -> Recorder:
    """Providers exporting to the configured endpoint, and the recorder writing through them."""
    protocol = _setting(environ, "PROTOCOL", "TRACES") or PROTOCOL
    if protocol != PROTOCOL:
        logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: mcp-run exports %s only", protocol, PROTOCOL)
    resource = Resource.create(resource_attributes(manifest, environ))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    spans = OTLPSpanExporter(endpoint=endpoint(environ, "traces"), headers=headers(environ, "TRACES"),
                             timeout=EXPORT_TIMEOUT)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans, schedule_delay_millis=SPAN_DELAY_MS,
                                                          export_timeout_millis=EXPORT_TIMEOUT * 1000))
    metrics = OTLPMetricExporter(endpoint=endpoint(environ, "metrics"), headers=headers(environ, "METRICS"),
                                 timeout=EXPORT_TIMEOUT)
    reader = PeriodicExportingMetricReader(metrics, export_timeout_millis=EXPORT_TIMEOUT * 1000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    return Recorder(tracer_provider, meter_provider, agent=manifest.name,
                    capture_content=manifest.telemetry.capture_content)


def endpoint(environ: Mapping[str, str], signal: str) -> str:
    """The URL a signal (``traces``, ``metrics``) is posted to, as the OTLP exporter spec says:
    the per-signal variable as it is, else the base endpoint with ``/v1/<signal>``."""
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
    return f"{base.rstrip('/')}/v1/{signal}"


def headers(environ: Mapping[str, str], signal: str) -> dict[str, str]:
    """``key=value,key2=value2`` (URL-encoded values) of the headers variable of the signal."""
    return _pairs(_setting(environ, "HEADERS", signal) or "")


def resource_attributes(manifest: Manifest, environ: Mapping[str, str]) -> dict[str, AttributeValue]:
    """``OTEL_RESOURCE_ATTRIBUTES``, then the manifest's; the service name is the manifest's, else
    ``OTEL_SERVICE_NAME``, else the agent's name."""
    spec = manifest.telemetry
    attributes: dict[str, AttributeValue] = dict(_pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", "")))
    attributes.update(spec.resource_attributes)
    service = spec.service_name or environ.get("OTEL_SERVICE_NAME") or attributes.get("service.name")
    attributes["service.name"] = service or manifest.name
    attributes["gen_ai.agent.name"] = manifest.name
    return attributes


def _setting(environ: Mapping[str, str], name: str, signal: str) -> str | None:
    return environ.get(f"OTEL_EXPORTER_OTLP_{signal}_{name}") or environ.get(f"OTEL_EXPORTER_OTLP_{name}")


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if equals and key.strip():
            pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs

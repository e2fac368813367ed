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
from pathlib import Path
from urllib.parse import unquote, urlsplit

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from runner.manifest import Manifest
from runner.redaction import redact_url, redact_urls
from runner.store.private import private_opener
from runner.telemetry import ENDPOINT_VARIABLES
from runner.telemetry.recorder import Recorder

logger = logging.getLogger(__name__)
AttributeValue = str | int | float | bool

DEFAULT_ENDPOINT = "http://localhost:4318"
PROTOCOL = "http/protobuf"
SIGNALS = ("traces", "metrics")
EXPORT_TIMEOUT = 2.0  # seconds one export may take: the flush at exit is bounded by it
SPAN_DELAY_MS = 1000  # spans are sent in batches at most this long after they end


def start_recorder(manifest: Manifest, environ: Mapping[str, str], log_path: Path | None = None) -> Recorder:
    """Providers exporting to the configured endpoints, and the recorder writing through them.

    The SDK's own log lines (every failed export, retried or not) go to ``log_path``, never to
    the terminal: the first failed export earns one warning naming the endpoint.
    """
    route_sdk_logs(log_path, [endpoint(environ, signal) for signal in SIGNALS])
    protocol = _setting(environ, "PROTOCOL", "TRACES") or PROTOCOL
    if protocol != PROTOCOL:
        logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: mcp-run exports %s only", protocol, PROTOCOL)
    _warn_malformed_headers(environ)
    resource = Resource.create(resource_attributes(manifest, environ))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    readers: list[PeriodicExportingMetricReader] = []
    traces_url = usable_endpoint(environ, "traces")
    if traces_url is not None:
        spans = OTLPSpanExporter(endpoint=traces_url, headers=headers(environ, "TRACES"),
                                 timeout=EXPORT_TIMEOUT)
        tracer_provider.add_span_processor(BatchSpanProcessor(
            spans, schedule_delay_millis=SPAN_DELAY_MS, export_timeout_millis=EXPORT_TIMEOUT * 1000))
    metrics_url = usable_endpoint(environ, "metrics")
    if metrics_url is not None:
        metrics = OTLPMetricExporter(endpoint=metrics_url, headers=headers(environ, "METRICS"),
                                     timeout=EXPORT_TIMEOUT)
        readers.append(PeriodicExportingMetricReader(metrics, export_timeout_millis=EXPORT_TIMEOUT * 1000))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    return Recorder(tracer_provider, meter_provider, agent=manifest.name,
                    capture_content=manifest.telemetry.capture_content)


def endpoint(environ: Mapping[str, str], signal: str) -> str | None:
    """The URL a signal (``traces``, ``metrics``) is posted to, as the OTLP exporter spec says:
    the per-signal variable as it is, else the base endpoint with ``/v1/<signal>``. With no
    endpoint variable at all, the SDK's default (``http://localhost:4318``); with only the other
    signal's variable set, None: that signal is not exported."""
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not base:
        if any(environ.get(name) for name in ENDPOINT_VARIABLES):
            return None
        base = DEFAULT_ENDPOINT
    return f"{base.rstrip('/')}/v1/{signal}"


def usable_endpoint(environ: Mapping[str, str], signal: str) -> str | None:
    """:func:`endpoint` when it is an http(s) URL; a warning, and None, when it is not."""
    url = endpoint(environ, signal)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return url
    specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"
    name = specific if environ.get(specific) else "OTEL_EXPORTER_OTLP_ENDPOINT"
    logger.warning("%s=%s is not an http:// or https:// URL: no %s are exported",
                   name, redact_url(environ.get(name, "")), signal)
    return None


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


def _warn_malformed_headers(environ: Mapping[str, str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                 "OTEL_EXPORTER_OTLP_METRICS_HEADERS"):
        items = [item for item in environ.get(name, "").split(",") if item.strip()]
        bad = sum(1 for item in items if not item.partition("=")[0].strip() or "=" not in item)
        if bad:  # never quote the value: it usually holds an API key
            logger.warning("%s has %d item(s) that are not key=value: they are left out", name, bad)


class _ExportTrouble(logging.Handler):
    """The SDK's log records: into the log file, plus one warning (per process) when the first
    export fails."""

    def __init__(self, log_path: Path | None, endpoints: list[str | None]) -> None:
        super().__init__(logging.DEBUG)
        self.point_at(log_path, endpoints)
        self.warned = False

    def point_at(self, log_path: Path | None, endpoints: list[str | None]) -> None:
        """Write to ``log_path`` from now on, and name ``endpoints`` in the warning."""
        self.log_path = log_path
        self.endpoints = ", ".join(dict.fromkeys(redact_url(url) for url in endpoints if url))

    def emit(self, record: logging.LogRecord) -> None:
        if self.log_path is not None:
            try:
                with open(self.log_path, "a", encoding="utf-8", opener=private_opener) as log:
                    log.write(redact_urls(f"{record.levelname} {record.name}: {record.getMessage()}\n"))
            except OSError:
                self.log_path = None
        failed_export = record.name.startswith("opentelemetry.exporter") or "export" in record.getMessage()
        if record.levelno >= logging.WARNING and failed_export and not self.warned:
            self.warned = True
            where = f" (details in {self.log_path})" if self.log_path is not None else ""
            logger.warning("telemetry: cannot export to %s%s; later export errors are not shown",
                           self.endpoints, where)


def route_sdk_logs(log_path: Path | None, endpoints: list[str | None]) -> None:
    """The ``opentelemetry`` loggers write to ``log_path`` instead of the terminal (once per process:
    a later call only points them at the new file)."""
    sdk = logging.getLogger("opentelemetry")
    sdk.propagate = False
    sdk.setLevel(logging.DEBUG if log_path is not None else logging.WARNING)
    for handler in sdk.handlers:
        if isinstance(handler, _ExportTrouble):
            handler.point_at(log_path, endpoints)
            return
    sdk.addHandler(_ExportTrouble(log_path, endpoints))


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if equals and key.strip():
            pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs

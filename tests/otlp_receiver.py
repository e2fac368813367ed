"""A real OTLP/HTTP receiver on loopback for the telemetry tests: it decodes the protobuf bodies
posted to ``/v1/traces`` and ``/v1/metrics`` (ExportTraceServiceRequest /
ExportMetricsServiceRequest) and keeps them, and the raw bodies, for the test to read.

    with OtlpReceiver() as receiver:
        environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        ...
        spans = receiver.spans()          # flat, with parents and attributes
        counts = receiver.metric_sums()   # counter totals by name and attribute set
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    kind: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    events: list[str]
    resource: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id) of each linked span


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: value_of(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


class OtlpReceiver:
    """Accepts OTLP/HTTP protobuf exports until closed; ``received`` wakes on every request."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.received = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    request, answer = ExportTraceServiceRequest(), ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    request, answer = ExportMetricsServiceRequest(), ExportMetricsServiceResponse()
                else:
                    self.send_error(404)
                    return
                request.ParseFromString(body)
                with receiver.received:
                    receiver.bodies.append(body)
                    receiver.headers.append(dict(self.headers))
                    (receiver.traces if self.path == "/v1/traces" else receiver.metrics).append(request)
                    receiver.received.notify_all()
                payload = answer.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def wait_for_span(self, name: str, timeout: float = 10.0) -> ReceivedSpan:
        """The first span named ``name``, waiting for it (bounded)."""
        with self.received:
            found = self.received.wait_for(lambda: any(s.name == name for s in self.spans()), timeout)
        assert found, f"no span {name!r} arrived; got {sorted({s.name for s in self.spans()})}"
        return next(s for s in self.spans() if s.name == name)

    def spans(self) -> list[ReceivedSpan]:
        found = []
        for request in list(self.traces):
            for resource_spans in request.resource_spans:
                resource = attributes_of(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        found.append(ReceivedSpan(
                            span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                            span.kind, attributes_of(span.attributes), span.status.code,
                            [event.name for event in span.events], resource,
                            [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                        ))
        return found

    def metric_points(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Every data point of the last export of each metric: (attributes, point)."""
        points: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        for request in list(self.metrics):
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        data = getattr(metric, metric.WhichOneof("data"))
                        points[metric.name] = [(attributes_of(p.attributes), p) for p in data.data_points]
        return points

    def metric_total(self, name: str, match: dict[str, Any] | None = None) -> float:
        """The sum (counters) or count (histograms) of ``name`` over points whose attributes match."""
        total = 0.0
        for attributes, point in self.metric_points().get(name, []):
            if all(attributes.get(key) == value for key, value in (match or {}).items()):
                total += point.count if hasattr(point, "bucket_counts") else point.as_int or point.as_double
        return total

"""A stand-in OpenTelemetry collector on loopback: takes OTLP/HTTP trace exports
(``POST /v1/traces``, protobuf) and keeps the spans it was sent, decoded."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["Collector"]


class Collector:
    def __init__(self, status: int = 200):
        self.status = status
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.trace_pb2.Span, in the order received
        self.resources: list[dict[str, str]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces" and collector.status == 200:
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        collector.resources.append({a.key: a.value.string_value for a in resource.resource.attributes})
                        for scope in resource.scope_spans:
                            collector.spans += scope.spans
                self.send_response(collector.status if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

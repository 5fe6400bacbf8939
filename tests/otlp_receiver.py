#!/usr/bin/env python3
"""A tiny OTLP/HTTP trace receiver for tests/it/tracing.rs and the tracing bench.

Why: the tests must see what a real collector would receive, decoded by the
OpenTelemetry project's own protobuf definitions (PyPI `opentelemetry-proto`,
installed by scripts/test-tools.sh otlp-receiver), not by stockd's code.

Listens on 127.0.0.1:<port> (0: any free port), answers POST /v1/traces with an
empty ExportTraceServiceResponse, and appends one JSON line per span to <out>:
trace_id, span_id, parent_span_id (hex), name, kind, attributes, links,
service. Prints "listening <port>" once bound. With <out> = "-" spans are
counted, not written (the bench's sink); `GET /count` answers the count.

Usage: otlp_receiver.py <port> <out>
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[2]
COUNT = [0]


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attrs(key_values):
    return {kv.key: value_of(kv.value) for kv in key_values}


def lines_of(request):
    for resource_spans in request.resource_spans:
        service = attrs(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield json.dumps({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "attributes": attrs(span.attributes),
                    "links": [
                        {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                        for l in span.links
                    ],
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                    "service": service,
                })


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest.FromString(body)
        lines = list(lines_of(request))
        COUNT[0] += len(lines)
        if OUT != "-":
            with open(OUT, "a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
        self.answer(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        self.answer(str(COUNT[0]).encode(), "text/plain")

    def answer(self, payload, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

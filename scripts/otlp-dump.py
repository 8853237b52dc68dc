#!/usr/bin/env python3
"""A throwaway OTLP/gRPC trace receiver that prints span trees, for reading traces where no
collector or tracing backend runs (a laptop, a debugging session).

    python3 -m venv .venv && .venv/bin/pip install opentelemetry-proto grpcio
    .venv/bin/python scripts/otlp-dump.py --listen 127.0.0.1:4317 [--seconds 60]
    thinkus --set telemetry.otlp_endpoint=http://127.0.0.1:4317 all

Spans are grouped by trace id and printed as a tree (service, span name, duration, status,
attributes) when no new span of the trace arrived for --quiet seconds, or at exit. Traces
without a served RPC (background polls, health checks) are left out unless --all.
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

SHOWN = ("rpc.method", "thinkus.service", "backend.system", "backend.operation", "otel.status_code", "error")


def value(any_value) -> str:
    kind = any_value.WhichOneof("value")
    return str(getattr(any_value, kind)) if kind else ""


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, everything: bool) -> None:
        self.everything = everything
        self.lock = threading.Lock()
        self.traces: dict[bytes, list[dict]] = collections.defaultdict(list)
        self.last_seen: dict[bytes, float] = {}

    def Export(self, request, context):  # noqa: N802 (gRPC method name)
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                service = resource.get("service.name", "?")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        attrs = {a.key: value(a.value) for a in span.attributes}
                        self.traces[span.trace_id].append(
                            {
                                "id": span.span_id,
                                "parent": span.parent_span_id,
                                "name": span.name,
                                "service": service,
                                "start": span.start_time_unix_nano,
                                "ms": (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
                                "status": span.status.code,
                                "attrs": attrs,
                            }
                        )
                        self.last_seen[span.trace_id] = time.monotonic()
        return trace_service_pb2.ExportTraceServiceResponse()

    def flush(self, quiet: float) -> None:
        now = time.monotonic()
        with self.lock:
            done = [t for t, seen in self.last_seen.items() if now - seen >= quiet]
            for trace_id in done:
                spans = self.traces.pop(trace_id)
                if self.everything or any(is_rpc(s) for s in spans):
                    print_trace(trace_id, spans)
                del self.last_seen[trace_id]


def is_rpc(span: dict) -> bool:
    """A served RPC other than a health check."""
    return "rpc.method" in span["attrs"] and not span["name"].startswith("grpc.health.")


def print_trace(trace_id: bytes, spans: list[dict]) -> None:
    ids = {s["id"] for s in spans}
    children = collections.defaultdict(list)
    roots = []
    for span in sorted(spans, key=lambda s: s["start"]):
        if span["parent"] and span["parent"] in ids:
            children[span["parent"]].append(span)
        else:
            roots.append(span)
    services = sorted({s["service"] for s in spans})
    print(f"trace {trace_id.hex()}  {len(spans)} spans  services: {', '.join(services)}")

    def show(span: dict, depth: int) -> None:
        status = {0: "", 1: " OK", 2: " ERROR"}.get(span["status"], "")
        attrs = " ".join(f"{k}={v}" for k, v in span["attrs"].items() if k in SHOWN)
        remote = " (remote parent)" if span["parent"] and depth == 0 else ""
        print(f"  {'  ' * depth}{span['service']}: {span['name']}  {span['ms']:.1f} ms{status}  {attrs}{remote}")
        for child in children[span["id"]]:
            show(child, depth + 1)

    for root in roots:
        show(root, 0)
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:4317")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: until Ctrl-C)")
    parser.add_argument("--quiet", type=float, default=3.0, help="print a trace after this long without new spans")
    parser.add_argument("--all", action="store_true",
                        help="also print traces without an RPC (background polls, health checks)")
    args = parser.parse_args()
    receiver = Receiver(args.all)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    server.add_insecure_port(args.listen)
    server.start()
    print(f"otlp-dump: listening on {args.listen}", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.5)
            receiver.flush(args.quiet)
    except KeyboardInterrupt:
        pass
    server.stop(grace=1)
    receiver.flush(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

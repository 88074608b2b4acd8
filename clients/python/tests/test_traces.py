"""Traces: with `opentelemetry-api` installed, the client sends the current span's W3C context,
and ctxd's BuildContext span is that span's child. A real ctxd (CTXD_BIN, started here with
OTEL_EXPORTER_OTLP_ENDPOINT) exports over OTLP/gRPC to a real receiver started here from the
`opentelemetry-proto` service definitions."""

import os
import socket
import subprocess
import time
from concurrent import futures

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider

import ctxd


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list = []

    def Export(self, request, context):  # noqa: N802 - the OTLP service's name
        for resource_spans in request.resource_spans:
            for scope in resource_spans.scope_spans:
                self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def traced_ctxd():
    binary = os.environ.get("CTXD_BIN")
    if not binary:
        pytest.skip("CTXD_BIN (a built ctxd) is not set; clients/python/ci.sh sets it in CI")
    receiver = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    otlp = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port = free_port()
    env = {
        **os.environ,
        "CTXD_LISTEN": f"127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    env.pop("DATABASE_URL", None)
    process = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"127.0.0.1:{port}", receiver
    finally:
        process.terminate()
        process.wait(10)
        server.stop(0)


def test_the_callers_span_is_the_parent_of_build_context(traced_ctxd, conv_id):
    target, receiver = traced_ctxd
    tracer = TracerProvider().get_tracer("agent")
    with ctxd.Client(target, tenant="pytest", timeout=20.0) as client:
        with tracer.start_as_current_span("agent step") as step:
            client.append_message(conv_id, [{"role": "user", "content": "hello"}])
            client.build_context(conv_id, max_tokens=1000)
    caller = step.get_span_context()
    for _ in range(200):
        built = [s for s in receiver.spans if s.name == "ctxd.v1.ContextService/BuildContext"]
        if built:
            break
        time.sleep(0.05)
    assert built, [s.name for s in receiver.spans]
    span = built[0]
    assert span.trace_id == caller.trace_id.to_bytes(16, "big")
    assert span.parent_span_id == caller.span_id.to_bytes(8, "big")
    # A call outside any span starts a trace of its own.
    with ctxd.Client(target, tenant="pytest", timeout=20.0) as client:
        client.build_context(conv_id, max_tokens=1000)
    time.sleep(0.5)
    roots = [s for s in receiver.spans if s.name.endswith("/BuildContext") and not s.parent_span_id]
    assert roots, "an untraced call is a root span"
    assert trace.get_current_span().get_span_context().is_valid is False

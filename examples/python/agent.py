"""A minimal agent loop against ctxd, the way a Python backend uses it.

    python examples/python/agent.py [host:port]

Generates the gRPC stubs from proto/ at start (grpcio-tools), then: appends the user's turn,
builds the context, lets a (fake) LLM answer with a tool call, runs the tool, appends the result,
and builds the context again for the final answer.
"""
import json
import os
import pathlib
import sys
import tempfile
import uuid

from grpc_tools import protoc
import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = tempfile.mkdtemp(prefix="ctxd-stubs-")
protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
include = pathlib.Path(protoc.__file__).parent / "_proto"
if protoc.main(["protoc", f"-I{ROOT / 'proto'}", f"-I{include}", f"--python_out={OUT}", f"--grpc_python_out={OUT}", *protos]):
    sys.exit("stub generation failed")
sys.path.insert(0, OUT)

from ctxd.v1 import context_pb2, context_service_pb2, context_service_pb2_grpc, messages_pb2  # noqa: E402


def fake_llm(messages):
    """Stands in for the backend's own LLM call: asks for the weather tool, then answers."""
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": f"It is {messages[-1]['content']} in Paris."}
    return {"role": "assistant", "tool_calls": [{"id": "call_" + uuid.uuid4().hex[:8], "name": "weather",
                                                 "arguments": json.dumps({"city": "Paris"})}]}


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CTXD_ADDR", "localhost:50051")
    ctxd = context_service_pb2_grpc.ContextServiceStub(grpc.insecure_channel(addr))
    conv = f"examples/python/{uuid.uuid4().hex[:8]}"
    budget = context_pb2.Budget(max_tokens=4000, reserve_output_tokens=500)

    ctxd.AppendMessage(context_service_pb2.AppendMessageRequest(
        conversation_id=conv, idempotency_key="turn-1",
        messages=[messages_pb2.Message(role=messages_pb2.ROLE_USER, content="What is the weather in Paris?")]))
    pack = ctxd.BuildContext(context_pb2.BuildContextRequest(
        conversation_id=conv, budget=budget, system_prompt="You are a travel assistant."))
    reply = fake_llm(json.loads(pack.rendered))

    call = reply["tool_calls"][0]
    ctxd.AppendMessage(context_service_pb2.AppendMessageRequest(conversation_id=conv, messages=[
        messages_pb2.Message(role=messages_pb2.ROLE_ASSISTANT, tool_calls=[
            messages_pb2.ToolCall(id=call["id"], name=call["name"], arguments=call["arguments"])]),
        messages_pb2.Message(role=messages_pb2.ROLE_TOOL, tool_call_id=call["id"], content="18C and sunny"),
    ]))
    pack = ctxd.BuildContext(context_pb2.BuildContextRequest(
        conversation_id=conv, budget=budget, system_prompt="You are a travel assistant."))
    rendered = json.loads(pack.rendered)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "tool"], rendered
    assert rendered[2]["tool_calls"][0]["id"] == rendered[3]["tool_call_id"]
    final = fake_llm(rendered)
    ctxd.AppendMessage(context_service_pb2.AppendMessageRequest(conversation_id=conv, messages=[
        messages_pb2.Message(role=messages_pb2.ROLE_ASSISTANT, content=final["content"])]))
    print(f"python agent OK: {final['content']} ({pack.stats.total_tokens} tokens in the last pack)")
    ctxd.DeleteConversation(context_service_pb2.DeleteConversationRequest(conversation_id=conv))


if __name__ == "__main__":
    main()

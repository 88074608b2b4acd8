"""A minimal agent loop against ctxd, the way a Python backend uses it.

    python examples/python/agent.py [host:port]

Generates the gRPC stubs from proto/ at start (grpcio-tools), then: appends the user's turn,
builds the context, lets a (fake) LLM answer with a tool call, runs the tool, appends the result,
and builds the context again for the final answer. Then it titles and labels the conversation,
forks it before the final answer (an "edit and regenerate" branch) and lists the conversations it
created, newest activity first, by their label.
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

from google.protobuf import field_mask_pb2  # noqa: E402

from ctxd.v1 import (  # noqa: E402
    context_pb2, context_service_pb2, context_service_pb2_grpc, conversations_pb2, messages_pb2)


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
    run = conv.rsplit("/", 1)[1]
    ctxd.UpdateConversation(conversations_pb2.UpdateConversationRequest(
        conversation=conversations_pb2.Conversation(
            conversation_id=conv, title="Weather in Paris", labels={"run": run},
            status=conversations_pb2.CONVERSATION_STATUS_AWAITING_ANSWER),
        update_mask=field_mask_pb2.FieldMask(paths=["title", "labels", "status"])))
    fork = ctxd.ForkConversation(conversations_pb2.ForkConversationRequest(
        conversation_id=conv, through_sequence=3, new_conversation_id=conv + "/retry")).conversation
    assert fork.forked_from.sequence == 3 and fork.labels["run"] == run, fork
    listed = ctxd.ListConversations(conversations_pb2.ListConversationsRequest(labels={"run": run}))
    ids = [c.conversation_id for c in listed.conversations]
    assert ids == [conv + "/retry", conv], ids
    for c in listed.conversations:
        print(f"  {c.conversation_id}: {c.title!r}, {c.last_sequence} messages, "
              f"{conversations_pb2.ConversationStatus.Name(c.status)}")
    print(f"python agent OK: {final['content']} ({pack.stats.total_tokens} tokens in the last pack)")
    for c in ids:
        ctxd.DeleteConversation(context_service_pb2.DeleteConversationRequest(conversation_id=c))


if __name__ == "__main__":
    main()

"""A minimal agent loop against ctxd, the way a Python backend uses it.

    pip install ./clients/python
    python examples/python/agent.py [host:port]

With the `ctxd` client (clients/python; no stubs to generate): appends the user's turn, builds
the context, lets a (fake) LLM answer with a tool call, runs the tool, appends the result, and
builds the context again for the final answer. Then it titles and labels the conversation, forks
it before the final answer (an "edit and regenerate" branch) and lists the conversations it
created, newest activity first, by their label.
"""
import json
import os
import sys
import uuid

import ctxd
from ctxd.v1 import conversations_pb2


def fake_llm(messages):
    """Stands in for the backend's own LLM call: asks for the weather tool, then answers."""
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": f"It is {messages[-1]['content']} in Paris."}
    return {"role": "assistant", "tool_calls": [{"id": "call_" + uuid.uuid4().hex[:8], "name": "weather",
                                                 "arguments": json.dumps({"city": "Paris"})}]}


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CTXD_ADDR", "localhost:50051")
    client = ctxd.Client(addr)
    conv = f"examples/python/{uuid.uuid4().hex[:8]}"
    budget = {"max_tokens": 4000, "reserve_output_tokens": 500}
    system = "You are a travel assistant."

    client.append_message(conv, [{"role": "user", "content": "What is the weather in Paris?"}])
    pack = client.build_context(conv, budget=budget, system_prompt=system)
    reply = fake_llm(json.loads(pack.rendered))

    call = reply["tool_calls"][0]
    client.append_message(conv, [
        {"role": "assistant", "toolCalls": [call]},
        {"role": "tool", "toolCallId": call["id"], "content": "18C and sunny"},
    ])
    pack = client.build_context(conv, budget=budget, system_prompt=system)
    rendered = json.loads(pack.rendered)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "tool"], rendered
    assert rendered[2]["tool_calls"][0]["id"] == rendered[3]["tool_call_id"]
    final = fake_llm(rendered)
    client.append_message(conv, [{"role": "assistant", "content": final["content"]}])
    run = conv.rsplit("/", 1)[1]
    client.update_conversation(conv, title="Weather in Paris", labels={"run": run},
                               status="CONVERSATION_STATUS_AWAITING_ANSWER")
    fork = client.fork_conversation(conv, through_sequence=3, new_conversation_id=conv + "/retry").conversation
    assert fork.forked_from.sequence == 3 and fork.labels["run"] == run, fork
    listed = client.list_conversations(labels={"run": run})
    ids = [c.conversation_id for c in listed.conversations]
    assert ids == [conv + "/retry", conv], ids
    for c in listed.conversations:
        print(f"  {c.conversation_id}: {c.title!r}, {c.last_sequence} messages, "
              f"{conversations_pb2.ConversationStatus.Name(c.status)}")
    print(f"python agent OK: {final['content']} ({pack.stats.total_tokens} tokens in the last pack)")
    for c in ids:
        client.delete_conversation(c)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The LangChain baseline of the benchmark suite: a Python backend that keeps the conversation in
memory and trims it before every LLM call with langchain-core's `trim_messages` and a tiktoken
token counter, the setup the product contract's performance targets compares BuildContext with.

    scripts/langchain_trim.py BPE_OPENAI_DATA_DIR CONVERSATION_JSON MAX_TOKENS

CONVERSATION_JSON is the conversation the Rust bench exported (OpenAI chat messages). Prints one
JSON line: the median time of one trim over at least 3 runs (more while under 30 s).
"""
import json, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiktoken_oracle import load  # noqa: E402  (offline tiktoken encodings)

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages


def to_langchain(m):
    if m["role"] == "user":
        return HumanMessage(m["content"])
    if m["role"] == "system":
        return SystemMessage(m["content"])
    if m["role"] == "tool":
        return ToolMessage(m["content"], tool_call_id=m["tool_call_id"])
    calls = [{"id": c["id"], "name": c["name"], "args": json.loads(c["arguments"])} for c in m["tool_calls"]]
    return AIMessage(m["content"], tool_calls=calls)


def main():
    data_dir, conversation, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    enc = load(data_dir)["o200k_base"]
    messages = [to_langchain(m) for m in json.loads(Path(conversation).read_text())]

    def count(msgs):
        # The chat framing ctxd counts too: 3 tokens per message, plus content and tool calls.
        total = 0
        for m in msgs:
            total += 3 + len(enc.encode(m.content))
            for c in getattr(m, "tool_calls", None) or []:
                total += len(enc.encode(c["name"])) + len(enc.encode(json.dumps(c["args"])))
        return total

    samples, kept = [], 0
    started = time.perf_counter()
    while len(samples) < 3 or (time.perf_counter() - started < 30 and len(samples) < 20):
        t = time.perf_counter()
        trimmed = trim_messages(
            messages, max_tokens=max_tokens, token_counter=count, strategy="last",
            start_on="human", include_system=True, allow_partial=False,
        )
        samples.append(time.perf_counter() - t)
        kept = len(trimmed)
    print(json.dumps({
        "bench": "langchain_trim", "messages": len(messages), "kept": kept, "runs": len(samples),
        "p50_ms": statistics.median(samples) * 1e3,
    }))


if __name__ == "__main__":
    main()

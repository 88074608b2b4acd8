#!/usr/bin/env python3
"""Checks rendered BuildContext packs against the providers' official SDK request types and
against the API rules of DESIGN.md 2.2.1, which the types alone do not express.

    python scripts/conformance.py packs.jsonl   # one {"format": ..., "rendered": ...} per line
    python scripts/conformance.py --self-test   # the checker rejects deliberately broken packs

Needs the `openai` and `anthropic` packages (PyPI). Exit status 1 on any violation.
"""
import json
import sys

from pydantic import TypeAdapter, ValidationError

ANTHROPIC_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def materialize(value):
    """pydantic validates `Iterable[...]` fields lazily: walk the result so every block is
    actually validated."""
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    try:
        return [materialize(v) for v in value]
    except TypeError:
        return value


def sdk_types():
    from anthropic.types import MessageParam, TextBlockParam
    from openai.types.chat import ChatCompletionMessageParam

    return {
        "openai_chat": TypeAdapter(list[ChatCompletionMessageParam]),
        "anthropic_messages": TypeAdapter(list[MessageParam]),
        "anthropic_system": TypeAdapter(str | list[TextBlockParam]),
    }


def check_types(adapters, fmt, pack):
    problems = []
    try:
        if fmt == "openai_chat":
            materialize(adapters["openai_chat"].validate_python(pack, strict=True))
        else:
            materialize(adapters["anthropic_messages"].validate_python(pack.get("messages"), strict=True))
            if "system" in pack:
                materialize(adapters["anthropic_system"].validate_python(pack["system"], strict=True))
    except ValidationError as e:
        problems.append(f"SDK types: {str(e).splitlines()[0]}")
    return problems


def json_object(text):
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


def openai_rules(pack):
    problems = []
    waiting = set()
    seen_ids = set()
    for i, m in enumerate(pack):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in waiting:
                problems.append(f"[{i}] tool message answers no pending call")
            waiting.discard(m.get("tool_call_id"))
            continue
        if waiting:
            problems.append(f"[{i}] {role} message before calls {sorted(waiting)} were answered")
            waiting = set()
        if role == "assistant":
            calls = m.get("tool_calls") or []
            waiting = {c["id"] for c in calls}
            for c in calls:
                if c["id"] in seen_ids:
                    problems.append(f"[{i}] call id {c['id']!r} used twice")
                seen_ids.add(c["id"])
                # Client libraries and OpenAI-compatible servers parse the arguments as JSON.
                if not json_object(c["function"]["arguments"]):
                    problems.append(f"[{i}] arguments of {c['id']!r} are not a JSON object")
    if waiting:
        problems.append(f"calls {sorted(waiting)} are never answered")
    return problems


def blank(text):
    return not isinstance(text, str) or text.strip() == ""


def anthropic_rules(pack):
    problems = []
    messages = pack.get("messages") or []
    if not messages:
        return ["messages is empty"]
    if messages[0].get("role") != "user":
        problems.append("the first message is not user")
    system = pack.get("system")
    if system is not None and isinstance(system, str) and blank(system):
        problems.append("system is empty or whitespace-only")
    if isinstance(system, list) and (not system or any(blank(b.get("text")) for b in system)):
        problems.append("system has no block or an empty or whitespace-only text block")
    # Prompt caching: at most 4 breakpoints per request (tools, system and messages together).
    marks = [b for b in (system if isinstance(system, list) else [])] + [
        b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]
    marks = [b["cache_control"] for b in marks if "cache_control" in b]
    if len(marks) > 4:
        problems.append(f"{len(marks)} cache_control breakpoints; the API allows 4")
    if any(mark != {"type": "ephemeral"} for mark in marks):
        problems.append("a cache_control breakpoint that is not {\"type\": \"ephemeral\"}")
    tool_use_ids = set()
    previous_calls = set()
    for i, (a, b) in enumerate(zip(messages, messages[1:])):
        if a.get("role") == b.get("role"):
            problems.append(f"[{i + 1}] roles do not alternate")
    for i, m in enumerate(messages):
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if not blocks:
            problems.append(f"[{i}] empty content")
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and blank(block.get("text")):
                problems.append(f"[{i}] empty or whitespace-only text block")
            if kind == "tool_use":
                if block.get("id") in tool_use_ids:
                    problems.append(f"[{i}] tool_use id {block.get('id')!r} used twice")
                tool_use_ids.add(block.get("id"))
            if kind == "tool_result":
                if block.get("tool_use_id") not in previous_calls:
                    problems.append(f"[{i}] tool_result {block.get('tool_use_id')!r} answers no tool_use of the previous message")
                if "content" in block and isinstance(block["content"], str) and blank(block["content"]):
                    problems.append(f"[{i}] whitespace-only tool_result content")
            if kind == "image" and block.get("source", {}).get("type") == "base64":
                if block["source"].get("media_type") not in ANTHROPIC_IMAGE_TYPES:
                    problems.append(f"[{i}] image of type {block['source'].get('media_type')}")
        previous_calls = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        if m.get("role") == "assistant":
            calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if calls:
                if nxt is None or not isinstance(nxt.get("content"), list):
                    problems.append(f"[{i}] tool_use {calls} not answered in the next message")
                    continue
                kinds = [b.get("type") for b in nxt["content"]]
                results = [b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"]
                if set(results) != set(calls):
                    problems.append(f"[{i}] tool_use {calls} answered by {results}")
                first = kinds[: len(results)]
                if first != ["tool_result"] * len(results):
                    problems.append(f"[{i + 1}] tool_result blocks do not come first")
    last = messages[-1]
    if last.get("role") == "assistant":
        content = last.get("content")
        tail = content if isinstance(content, str) else (content or [{}])[-1].get("text", "x")
        if isinstance(tail, str) and tail != tail.rstrip():
            problems.append("the final assistant message ends in whitespace")
    return problems


def check(adapters, fmt, rendered):
    if fmt not in ("openai_chat", "anthropic_messages"):
        return [f"unknown format {fmt!r}"]
    pack = json.loads(rendered)
    rules = openai_rules if fmt == "openai_chat" else anthropic_rules
    return check_types(adapters, fmt, pack) + rules(pack)


BROKEN = [
    ("openai_chat", [{"role": "tool", "tool_call_id": "a", "content": "x"}]),
    ("openai_chat", [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "hurry"}]),
    ("openai_chat", [{"role": "wizard", "content": "x"}]),
    ("anthropic_messages", {"messages": [{"role": "assistant", "content": "hi"}]}),
    ("anthropic_messages", {"messages": []}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": [{"type": "text", "text": " "}]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": "q"},
                                         {"role": "assistant", "content": [{"type": "text", "text": "a "}]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/svg+xml", "data": "AA=="}}]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": {}}]}, {"role": "user", "content": "no result"}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": [{"type": "texx", "text": "q"}]}]}),
    ("openai_chat", [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}]),
    ("anthropic_messages", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "orphan"}]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": {}}]}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "  "}]}]}),
    ("anthropic_messages", {"system": " ", "messages": [{"role": "user", "content": "q"}]}),
    ("anthropic_messages", {"system": [{"type": "text", "text": " "}], "messages": [{"role": "user", "content": "q"}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": f"q{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": []}]}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "r"}]}]}),
    ("anthropic_messages", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": {}}]}, {"role": "user", "content": [
        {"type": "text", "text": "hurry"}, {"type": "tool_result", "tool_use_id": "a", "content": "r"}]}]}),
]

VALID = [
    ("openai_chat", [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "a", "content": "r"}, {"role": "assistant", "content": "done"}]),
    ("anthropic_messages", {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
                            "messages": [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"},
                                     {"type": "text", "text": "thanks"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]}),
]


def main():
    adapters = sdk_types()
    if sys.argv[1:] == ["--self-test"]:
        accepted = [(f, p) for f, p in BROKEN if not check(adapters, f, json.dumps(p))]
        for fmt, pack in accepted:
            print(f"checker accepted a broken {fmt} pack: {json.dumps(pack)}")
        rejected = [(f, check(adapters, f, json.dumps(p))) for f, p in VALID]
        rejected = [(f, problems) for f, problems in rejected if problems]
        for fmt, problems in rejected:
            print(f"checker rejected a valid {fmt} pack: {problems}")
        print(f"self-test: {len(BROKEN) - len(accepted)} of {len(BROKEN)} broken packs rejected, "
              f"{len(VALID) - len(rejected)} of {len(VALID)} valid packs accepted")
        return 1 if accepted or rejected else 0
    failures = total = 0
    for line in open(sys.argv[1]):
        record = json.loads(line)
        total += 1
        problems = check(adapters, record["format"], record["rendered"])
        if problems:
            failures += 1
            if failures <= 20:
                print(f"{record.get('case', total)} {record['format']}: {'; '.join(problems)}")
    print(f"{total} packs checked, {failures} with violations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

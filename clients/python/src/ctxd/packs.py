"""A pack (BuildContextResponse, ListMessagesResponse with `format`, its `rendered` text, or that
text parsed) as the keyword arguments of the provider SDK call:

    client.chat.completions.create(model=..., **openai_chat_kwargs(pack))
    client.responses.create(model=..., **openai_responses_kwargs(pack))
    client.messages.create(model=..., max_tokens=..., **anthropic_kwargs(pack))
    client.models.generate_content(model=..., **gemini_kwargs(pack))

The pack must have been built in the matching format. google-genai takes the REST (camelCase)
dicts as they are: its types validate by alias and decode base64 `thoughtSignature`s to bytes.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["rendered", "openai_chat_kwargs", "openai_responses_kwargs", "anthropic_kwargs", "gemini_kwargs"]


def rendered(pack: Any) -> Any:
    """The parsed `rendered` JSON of a pack (a response message, JSON text, or parsed data)."""
    if hasattr(pack, "rendered"):
        pack = pack.rendered
    if isinstance(pack, (bytes, bytearray)):
        pack = pack.decode()
    if isinstance(pack, str):
        if not pack:
            raise ValueError("the pack has no rendering (ListMessages without format?)")
        return json.loads(pack)
    return pack


def _expect(value: Any, kind: type, what: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"not a {what} pack: rendered is a {type(value).__name__}")
    return value


def openai_chat_kwargs(pack: Any) -> dict[str, Any]:
    """`{"messages": [...]}` for Chat Completions (a FORMAT_OPENAI_CHAT pack)."""
    return {"messages": _expect(rendered(pack), list, "FORMAT_OPENAI_CHAT")}


def openai_responses_kwargs(pack: Any) -> dict[str, Any]:
    """`{"input": [...]}` for the Responses API (a FORMAT_OPENAI_RESPONSES pack)."""
    return {"input": _expect(rendered(pack), list, "FORMAT_OPENAI_RESPONSES")}


def anthropic_kwargs(pack: Any) -> dict[str, Any]:
    """`{"system": ..., "messages": [...]}` for Anthropic Messages (system left out when the
    pack has none)."""
    body = _expect(rendered(pack), dict, "FORMAT_ANTHROPIC_MESSAGES")
    if "messages" not in body:
        raise ValueError("not a FORMAT_ANTHROPIC_MESSAGES pack: no `messages`")
    out: dict[str, Any] = {}
    if body.get("system"):
        out["system"] = body["system"]
    out["messages"] = body["messages"]
    return out


def gemini_kwargs(pack: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """`{"contents": [...], "config": {"system_instruction": ...}}` for google-genai
    `generate_content` (config left out when there is no system instruction and no `config`).
    `config` entries are merged in (e.g. tools, temperature)."""
    body = _expect(rendered(pack), dict, "FORMAT_GEMINI")
    if "contents" not in body:
        raise ValueError("not a FORMAT_GEMINI pack: no `contents`")
    out: dict[str, Any] = {"contents": body["contents"]}
    merged = dict(config or {})
    if body.get("systemInstruction"):
        merged["system_instruction"] = body["systemInstruction"]
    if merged:
        out["config"] = merged
    return out

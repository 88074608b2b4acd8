"""LangChain and LangGraph backed by ctxd (`pip install ctxd[langchain]`).

    from langchain.agents import create_agent
    from ctxd.langchain import CtxdContextMiddleware

    agent = create_agent(model, tools, checkpointer=saver, middleware=[
        CtxdContextMiddleware(ctxd.Client("localhost:50051"), budget_tokens=32_000, format="openai_chat"),
    ])
    agent.invoke({"messages": [{"role": "user", "content": "Hi"}]}, {"configurable": {"thread_id": "user-42"}})

Follows langchain 1.5 (`langchain.agents.middleware.AgentMiddleware`), langchain-core 1.8 and
langgraph 1.2, the versions the tests pin (requirements-test.txt).

`CtxdContextMiddleware` is an agent middleware for `create_agent`:

- *Before each model call* (`before_model`) it appends to the ctxd log what the agent's state
  holds that the log does not yet: the user's message, the previous reply with its tool calls
  and usage, the tool results. The conversation is `conversation_id`, or the thread's id
  (`thread_id_prefix` + `thread_id`): a resumed thread continues the same conversation. Each
  append carries an idempotency key made of the messages' ids, so the append of a step that
  crashed before its checkpoint is stored once when the step runs again.
- *The model call* (`wrap_model_call`, sync and async) gets BuildContext's pack instead of the
  whole state: `budget_tokens` (less `reserve_output_tokens`), the tokenizer, the summary and
  working memory, `recall`, `clear_tool_results`, the cache-stable `history_policy`, and the
  provider rules of `format` (the model's provider: `openai_chat`, `openai_responses`,
  `anthropic`, `gemini`). The agent's system prompt is counted in the budget and stays the
  request's system message, followed by the pack's summary, memory and truncation notice. The
  pack never splits a tool call from its result.
- *After the agent* (`after_agent`) it appends the final reply.

The graph's own state is not rewritten: checkpointers, interrupts and human-in-the-loop work as
without the middleware, and the state keeps every message while the model sees the pack. This
replaces `SummarizationMiddleware` (which rewrites the state with a summary computed by another
model call, counting tokens approximately) and `ContextEditingMiddleware` (which clears old
tool results once a token count is passed): ctxd counts exactly with the model's tokenizer,
keeps the whole log, summarizes in the background or with your model (`Summarize`), clears
old tool results in a cache-stable way, and recalls what the pack left out.

`CtxdChatMessageHistory` is a `BaseChatMessageHistory` over the log, for
`RunnableWithMessageHistory` and older code.

Messages map both ways losslessly (`to_ctxd`, `from_ctxd`): text, name and id; an AI message's
tool calls (arguments as JSON), invalid tool calls, usage (ctxd `Message.usage`, and the full
`usage_metadata`), response metadata and additional kwargs; a tool message's call id, status and
artifact (when JSON); multimodal content (images as ctxd attachments, the content list kept as
it was). What ctxd has no field for goes in the message's metadata under `langchain.*` keys.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_config
from typing_extensions import NotRequired

from . import errors
from .client import AsyncClient, Client
from .v1 import context_pb2, messages_pb2

__all__ = [
    "CtxdChatMessageHistory",
    "CtxdContextMiddleware",
    "CtxdState",
    "from_ctxd",
    "pack_messages",
    "to_ctxd",
]

logger = logging.getLogger(__name__)

_META = "langchain."
_ROLE = {
    messages_pb2.ROLE_USER: "user",
    messages_pb2.ROLE_ASSISTANT: "assistant",
    messages_pb2.ROLE_SYSTEM: "system",
    messages_pb2.ROLE_TOOL: "tool",
}


# -- mapping -------------------------------------------------------------------------------------


def _json(value: Any) -> str | None:
    """`value` as JSON, or None when it has no JSON form."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a content list."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _attachments_of(content: Any) -> list[dict[str, Any]]:
    """Images of a content list as ctxd attachments (URLs as `uri`, base64 as `data`)."""
    out: list[dict[str, Any]] = []
    if isinstance(content, str):
        return out
    for block in content or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        url = None
        mime = block.get("mime_type") or "image/png"
        if kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
        elif kind == "image":
            url = block.get("url")
            if block.get("base64"):
                out.append({"mimeType": mime, "data": block["base64"]})
                continue
        if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
            head, data = url.split(";base64,", 1)
            out.append({"mimeType": head[len("data:"):] or mime, "data": data})
        elif isinstance(url, str) and url:
            out.append({"mimeType": mime, "uri": url})
    return out


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    if not usage:
        return None
    details_in = usage.get("input_token_details") or {}
    details_out = usage.get("output_token_details") or {}
    return {
        "inputTokens": int(usage.get("input_tokens") or 0),
        "outputTokens": int(usage.get("output_tokens") or 0),
        "cachedInputTokens": int(details_in.get("cache_read") or 0),
        "reasoningTokens": int(details_out.get("reasoning") or 0),
    }


def to_ctxd(message: BaseMessage) -> dict[str, Any]:
    """`message` as a ctxd message (its proto3 JSON form, as `Client.append_message` takes it)."""
    meta: dict[str, str] = {}
    out: dict[str, Any] = {"content": _text_of(message.content)}
    if message.id:
        meta[_META + "id"] = str(message.id)
    if message.name:
        out["name"] = message.name
    if not isinstance(message.content, str):
        meta[_META + "content"] = _json(message.content) or "[]"
        attachments = _attachments_of(message.content)
        if attachments:
            out["attachments"] = attachments
    if message.additional_kwargs:
        value = _json(message.additional_kwargs)
        if value is not None:
            meta[_META + "additional_kwargs"] = value
    if message.response_metadata:
        value = _json(message.response_metadata)
        if value is not None:
            meta[_META + "response_metadata"] = value
    if isinstance(message, AIMessage):
        out["role"] = "assistant"
        out["toolCalls"] = [
            {"id": call.get("id") or "", "name": call["name"], "arguments": json.dumps(call.get("args") or {})}
            for call in message.tool_calls
        ]
        if message.invalid_tool_calls:
            meta[_META + "invalid_tool_calls"] = _json(list(message.invalid_tool_calls)) or "[]"
        usage = _usage(message.usage_metadata)
        if usage:
            out["usage"] = usage
            meta[_META + "usage_metadata"] = _json(dict(message.usage_metadata or {})) or "{}"
    elif isinstance(message, ToolMessage):
        out["role"] = "tool"
        out["toolCallId"] = message.tool_call_id
        if message.status != "success":
            meta[_META + "status"] = message.status
        if message.artifact is not None:
            value = _json(message.artifact)
            if value is not None:
                meta[_META + "artifact"] = value
    elif isinstance(message, SystemMessage):
        out["role"] = "system"
    else:
        out["role"] = "user"
        if not isinstance(message, HumanMessage):
            meta[_META + "type"] = message.type
    if out["role"] == "assistant" and not out["content"].strip() and not out["toolCalls"]:
        # An empty reply is still a reply: ctxd needs content, calls or an error.
        meta[_META + "text"] = _json(out["content"]) or '""'
        out["content"] = "(empty reply)"
    if meta:
        out["metadata"] = meta
    return out


def _loads(meta: Mapping[str, str], key: str, default: Any) -> Any:
    raw = meta.get(_META + key)
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except ValueError:
        return default


def _content_of(message: Any, meta: Mapping[str, str]) -> Any:
    """The message's LangChain content: the stored content list, or its text and images."""
    if _META + "content" in meta:
        return _loads(meta, "content", message.content)
    if _META + "text" in meta:
        return _loads(meta, "text", message.content)
    if not message.attachments:
        return message.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    for a in message.attachments:
        if a.WhichOneof("source") == "uri":
            blocks.append({"type": "image", "url": a.uri})
        else:
            blocks.append({"type": "image", "base64": base64.b64encode(a.data).decode(), "mime_type": a.mime_type})
    return blocks


def from_ctxd(message: Any) -> BaseMessage:
    """A ctxd message (a stored `Message` or a pack's `ContextMessage`) as a LangChain message:
    the inverse of `to_ctxd`."""
    meta = dict(message.metadata) if hasattr(message, "metadata") else {}
    common: dict[str, Any] = {"content": _content_of(message, meta)}
    if _META + "id" in meta:
        common["id"] = meta[_META + "id"]
    if message.name:
        common["name"] = message.name
    extra = _loads(meta, "additional_kwargs", None)
    if extra:
        common["additional_kwargs"] = extra
    response = _loads(meta, "response_metadata", None)
    if response:
        common["response_metadata"] = response
    role = message.role
    if role == messages_pb2.ROLE_ASSISTANT:
        calls = []
        for call in message.tool_calls:
            try:
                args = json.loads(call.arguments) if call.arguments else {}
            except ValueError:
                args = {"raw": call.arguments}
            calls.append({"name": call.name, "args": args, "id": call.id, "type": "tool_call"})
        usage = _loads(meta, "usage_metadata", None)
        if usage is None and "usage" in message.DESCRIPTOR.fields_by_name and message.HasField("usage"):
            u = message.usage
            usage = {
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "total_tokens": u.input_tokens + u.output_tokens,
            }
        return AIMessage(
            **common,
            tool_calls=calls,
            invalid_tool_calls=_loads(meta, "invalid_tool_calls", []),
            usage_metadata=usage,
        )
    if role == messages_pb2.ROLE_TOOL:
        return ToolMessage(
            **common,
            tool_call_id=message.tool_call_id,
            status=meta.get(_META + "status", "success"),
            artifact=_loads(meta, "artifact", None),
        )
    if role == messages_pb2.ROLE_SYSTEM:
        return SystemMessage(**common)
    return HumanMessage(**common)


def pack_messages(pack: context_pb2.BuildContextResponse) -> tuple[list[str], list[BaseMessage]]:
    """A pack as LangChain messages: the system parts that open it (system prompt, summary,
    working memory, truncation notice) as texts, then the rest in order."""
    system: list[str] = []
    messages: list[BaseMessage] = []
    for m in pack.messages:
        if m.role == messages_pb2.ROLE_SYSTEM and not messages:
            system.append(m.content)
            continue
        messages.append(from_ctxd(m))
    return system, messages


# -- the middleware ------------------------------------------------------------------------------


class CtxdState(AgentState):
    """The agent's state with what the middleware keeps: the id of the newest state message the
    ctxd log holds, and how many state messages that is."""

    ctxd_synced_id: NotRequired[str]
    ctxd_synced: NotRequired[int]


def _unsynced(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The state's messages after the newest one the log holds (by id; by count when an earlier
    middleware rewrote the list)."""
    messages = list(state.get("messages") or [])
    last = state.get("ctxd_synced_id")
    if last:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].id == last:
                return messages[i + 1:]
    return messages[int(state.get("ctxd_synced") or 0):]


def _batch_key(conversation: str, batch: Sequence[BaseMessage]) -> str:
    """An idempotency key for appending `batch`: the same messages give the same key."""
    ids = "\0".join(str(m.id or "") for m in batch)
    digest = hashlib.sha256(f"{conversation}\0{ids}".encode()).hexdigest()[:32]
    return f"langchain-{digest}"


class CtxdContextMiddleware(AgentMiddleware[CtxdState, Any, Any]):
    """Hands the model BuildContext's pack instead of the whole history, and keeps the log
    (module docstring)."""

    state_schema = CtxdState

    def __init__(
        self,
        client: Client,
        *,
        async_client: AsyncClient | None = None,
        conversation_id: str | None = None,
        thread_id_prefix: str = "",
        budget_tokens: int = 32_000,
        reserve_output_tokens: int = 0,
        format: Any = "openai_chat",
        tokenizer: Any = None,
        recall: Any = None,
        clear_tool_results: Any = None,
        history_policy: Any = None,
        omit_working_memory: bool = False,
        on_pack: Callable[[context_pb2.BuildContextResponse], None] | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.async_client = async_client
        self.conversation_id = conversation_id
        self.thread_id_prefix = thread_id_prefix
        self.budget_tokens = budget_tokens
        self.reserve_output_tokens = reserve_output_tokens
        self.format = format
        self.tokenizer = tokenizer
        self.recall = recall
        self.clear_tool_results = clear_tool_results
        self.history_policy = history_policy
        self.omit_working_memory = omit_working_memory
        self.on_pack = on_pack

    # -- which conversation

    def conversation(self) -> str:
        """The ctxd conversation of the run under way: `conversation_id`, or the thread's."""
        if self.conversation_id:
            return self.conversation_id
        thread = get_config().get("configurable", {}).get("thread_id")
        if not thread:
            raise ValueError(
                "CtxdContextMiddleware needs conversation_id=..., or a thread_id in the run's "
                "config ({'configurable': {'thread_id': ...}}, with a checkpointer)"
            )
        return f"{self.thread_id_prefix}{thread}"

    # -- keeping the log

    def _synced(self, state: Mapping[str, Any], batch: list[BaseMessage]) -> dict[str, Any]:
        return {"ctxd_synced_id": batch[-1].id or "", "ctxd_synced": len(state.get("messages") or [])}

    def sync(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """Appends the state's messages the log does not hold yet; the state update saying so."""
        batch = _unsynced(state)
        if not batch:
            return None
        conversation = self.conversation()
        for chunk in _chunks(batch):
            key = _batch_key(conversation, chunk)
            self.client.append_message(conversation, [to_ctxd(m) for m in chunk], idempotency_key=key)
        return self._synced(state, batch)

    async def async_sync(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        batch = _unsynced(state)
        if not batch:
            return None
        conversation = self.conversation()
        for chunk in _chunks(batch):
            key = _batch_key(conversation, chunk)
            messages = [to_ctxd(m) for m in chunk]
            if self.async_client is not None:
                await self.async_client.append_message(conversation, messages, idempotency_key=key)
            else:
                await asyncio.to_thread(self.client.append_message, conversation, messages, idempotency_key=key)
        return self._synced(state, batch)

    def before_model(self, state: CtxdState, runtime: Any) -> dict[str, Any] | None:
        return self.sync(state)

    async def abefore_model(self, state: CtxdState, runtime: Any) -> dict[str, Any] | None:
        return await self.async_sync(state)

    def after_agent(self, state: CtxdState, runtime: Any) -> dict[str, Any] | None:
        return self.sync(state)

    async def aafter_agent(self, state: CtxdState, runtime: Any) -> dict[str, Any] | None:
        return await self.async_sync(state)

    # -- the pack

    def _pack_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        return {
            "max_tokens": self.budget_tokens,
            "reserve_output_tokens": self.reserve_output_tokens,
            "format": self.format,
            "tokenizer": self.tokenizer,
            "system_prompt": request.system_prompt or "",
            "recall": self.recall,
            "clear_tool_results": self.clear_tool_results,
            "history_policy": self.history_policy,
            "omit_working_memory": self.omit_working_memory,
        }

    def _packed(self, request: ModelRequest, pack: context_pb2.BuildContextResponse) -> ModelRequest:
        if self.on_pack is not None:
            self.on_pack(pack)
        system, messages = pack_messages(pack)
        system_message = SystemMessage("\n\n".join(system)) if system else None
        return request.override(messages=messages, system_message=system_message)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        pack = self.client.build_context(self.conversation(), **self._pack_kwargs(request))
        return handler(self._packed(request, pack))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        conversation, kwargs = self.conversation(), self._pack_kwargs(request)
        if self.async_client is not None:
            pack = await self.async_client.build_context(conversation, **kwargs)
        else:
            pack = await asyncio.to_thread(lambda: self.client.build_context(conversation, **kwargs))
        return await handler(self._packed(request, pack))


def _chunks(batch: list[BaseMessage], size: int = 100) -> Iterable[list[BaseMessage]]:
    """`batch` in appends of at most `size` messages (ctxd's per-request default). A call and
    its result may land in different appends: ctxd keeps the call open until then."""
    for start in range(0, len(batch), size):
        yield batch[start:start + size]


# -- chat message history ------------------------------------------------------------------------


class CtxdChatMessageHistory(BaseChatMessageHistory):
    """The ctxd log of `conversation_id` as a LangChain chat history: `messages` reads it whole
    (ListMessages), `add_messages` appends, `clear` deletes the conversation."""

    def __init__(self, client: Client, conversation_id: str, *, async_client: AsyncClient | None = None) -> None:
        self.client = client
        self.async_client = async_client
        self.conversation_id = conversation_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        try:
            return [from_ctxd(m) for m in self.client.iter_messages(self.conversation_id)]
        except errors.NotFound:
            return []

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await asyncio.to_thread(lambda: self.messages)
        try:
            return [from_ctxd(m) async for m in self.async_client.iter_messages(self.conversation_id)]
        except errors.NotFound:
            return []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for start in range(0, len(messages), 100):
            chunk = [to_ctxd(m) for m in messages[start:start + 100]]
            self.client.append_message(self.conversation_id, chunk)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            await asyncio.to_thread(self.add_messages, messages)
            return
        for start in range(0, len(messages), 100):
            chunk = [to_ctxd(m) for m in messages[start:start + 100]]
            await self.async_client.append_message(self.conversation_id, chunk)

    def clear(self) -> None:
        try:
            self.client.delete_conversation(self.conversation_id)
        except errors.NotFound:
            pass

    async def aclear(self) -> None:
        if self.async_client is None:
            await asyncio.to_thread(self.clear)
            return
        try:
            await self.async_client.delete_conversation(self.conversation_id)
        except errors.NotFound:
            pass

"""Request builders shared by Client and AsyncClient: Pythonic keyword arguments to the request
messages of package ctxd.v1, one builder per RPC, named after the client method that sends it.

The builders take every argument explicitly (no defaults): the defaults are the public methods',
so a method that forgets to pass one is a type error. The clients only send what is built here."""

from __future__ import annotations

import datetime as _dt
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import field_mask_pb2, json_format, timestamp_pb2

from .native import parse_format, to_native_items
from .v1 import context_pb2, context_service_pb2, conversations_pb2, memory_pb2, messages_pb2

_ROLES = {
    "system": messages_pb2.ROLE_SYSTEM,
    "developer": messages_pb2.ROLE_SYSTEM,
    "user": messages_pb2.ROLE_USER,
    "assistant": messages_pb2.ROLE_ASSISTANT,
    "tool": messages_pb2.ROLE_TOOL,
}

MessageLike = messages_pb2.Message | Mapping[str, Any]


def id_part(text: str) -> str:
    """`text` as one part of a conversation id built from a framework's keys: percent-encoded
    (ids are printable ASCII, and `/` separates the parts)."""
    return urllib.parse.quote(text, safe="._-:")


def new_idempotency_key() -> str:
    return "py-" + uuid.uuid4().hex


def _enum(value: Any, wrapper: Any, prefix: str) -> int:
    """An enum value from an int, its full name, or its name without the prefix (any case)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    name = str(value).upper()
    if not name.startswith(prefix):
        name = prefix + name
    return wrapper.Value(name)


def message(value: MessageLike) -> messages_pb2.Message:
    """A `Message` from a Message or a dict in its proto3 JSON form, where `role` may also be
    `"user"`, `"assistant"`, `"system"` or `"tool"` and `tool_calls` a list of dicts."""
    if isinstance(value, messages_pb2.Message):
        return value
    data = dict(value)
    role = data.get("role")
    if isinstance(role, str) and role.lower() in _ROLES:
        data["role"] = _ROLES[role.lower()]
    out = messages_pb2.Message()
    json_format.ParseDict(data, out)
    return out


def messages(values: Iterable[MessageLike]) -> list[messages_pb2.Message]:
    return [message(v) for v in values]


def append_message(
    conversation_id: str,
    msgs: Iterable[MessageLike] | None,
    *,
    native: Any,
    format: Any,
    idempotency_key: str | None,
    expected_last_sequence: int | None,
) -> context_service_pb2.AppendMessageRequest:
    req = context_service_pb2.AppendMessageRequest(
        conversation_id=conversation_id,
        idempotency_key=idempotency_key or new_idempotency_key(),
    )
    if (msgs is None) == (native is None):
        raise ValueError("pass exactly one of messages and native")
    if msgs is not None:
        req.messages.extend(messages(msgs))
    else:
        req.native.CopyFrom(
            native if isinstance(native, messages_pb2.NativeItems) else to_native_items(native, format)
        )
    if expected_last_sequence is not None:
        req.expected_last_sequence = expected_last_sequence
    return req


def build_context(
    conversation_id: str,
    *,
    max_tokens: int | None,
    budget: context_pb2.Budget | Mapping[str, Any] | None,
    reserve_output_tokens: int,
    max_messages: int,
    max_turns: int,
    format: Any,
    tokenizer: Any,
    system_prompt: str,
    pending_messages: Iterable[MessageLike],
    omit_summary: bool,
    omit_working_memory: bool,
    tool_output_max_tokens: int,
    history_policy: Any,
    reasoning: Any,
    final_assistant: Any,
    omit_messages: bool,
    clear_tool_results: context_pb2.ClearToolResults | Mapping[str, Any] | None = None,
    recall: context_pb2.Recall | Mapping[str, Any] | bool | None = None,
) -> context_pb2.BuildContextRequest:
    if budget is None:
        if not max_tokens:
            raise ValueError("max_tokens (or budget) is required")
        budget = context_pb2.Budget(
            max_tokens=max_tokens,
            reserve_output_tokens=reserve_output_tokens,
            max_messages=max_messages,
            max_turns=max_turns,
        )
    elif not isinstance(budget, context_pb2.Budget):
        budget = context_pb2.Budget(**dict(budget))
    req = context_pb2.BuildContextRequest(
        conversation_id=conversation_id,
        budget=budget,
        tokenizer=_enum(tokenizer, messages_pb2.Tokenizer, "TOKENIZER_"),
        system_prompt=system_prompt,
        pending_messages=messages(pending_messages),
        omit_summary=omit_summary,
        omit_working_memory=omit_working_memory,
        tool_output_max_tokens=tool_output_max_tokens,
        format=parse_format(format) if format is not None else 0,
        history_policy=_enum(history_policy, context_pb2.HistoryPolicy, "HISTORY_POLICY_"),
        reasoning=_enum(reasoning, context_pb2.ReasoningPolicy, "REASONING_POLICY_"),
        final_assistant=_enum(final_assistant, context_pb2.FinalAssistant, "FINAL_ASSISTANT_"),
        omit_messages=omit_messages,
    )
    if clear_tool_results is not None:
        req.clear_tool_results.CopyFrom(_message(clear_tool_results, context_pb2.ClearToolResults))
    if recall is True:
        req.recall.SetInParent()
    elif recall not in (None, False):
        req.recall.CopyFrom(_message(recall, context_pb2.Recall))
    return req


def _message(value: Any, kind: Any) -> Any:
    """`value` as a `kind` message: one already, or its fields as a mapping."""
    return value if isinstance(value, kind) else kind(**dict(value))


def search_messages(
    conversation_id: str,
    query: str,
    *,
    page_size: int,
    roles: Iterable[Any],
    tool_names: Iterable[str],
    page_token: str,
) -> context_service_pb2.SearchMessagesRequest:
    return context_service_pb2.SearchMessagesRequest(
        conversation_id=conversation_id,
        query=query,
        page_size=page_size,
        roles=[_ROLES[r] if isinstance(r, str) and r in _ROLES else _enum(r, messages_pb2.Role, "ROLE_") for r in roles],
        tool_names=list(tool_names),
        page_token=page_token,
    )


def count_tokens(text: str, *, tokenizer: Any) -> context_service_pb2.CountTokensRequest:
    return context_service_pb2.CountTokensRequest(
        text=text, tokenizer=_enum(tokenizer, messages_pb2.Tokenizer, "TOKENIZER_")
    )


def summarize(
    conversation_id: str,
    *,
    mode: Any,
    keep_recent_tokens: int,
    tokenizer: Any,
    summary_text: str,
    through_sequence: int,
    expected_through_sequence: int | None,
    expected_log_changes: int | None,
    max_summary_tokens: int,
) -> context_pb2.SummarizeRequest:
    req = context_pb2.SummarizeRequest(
        conversation_id=conversation_id,
        keep_recent_tokens=keep_recent_tokens,
        tokenizer=_enum(tokenizer, messages_pb2.Tokenizer, "TOKENIZER_"),
        mode=_enum(mode, context_pb2.SummarizeMode, "SUMMARIZE_MODE_"),
        summary_text=summary_text,
        through_sequence=through_sequence,
        max_summary_tokens=max_summary_tokens,
    )
    if expected_through_sequence is not None:
        req.expected_through_sequence = expected_through_sequence
    if expected_log_changes is not None:
        req.expected_log_changes = expected_log_changes
    return req


def list_messages(
    conversation_id: str, *, after_sequence: int, page_size: int, format: Any
) -> context_service_pb2.ListMessagesRequest:
    req = context_service_pb2.ListMessagesRequest(
        conversation_id=conversation_id, after_sequence=after_sequence, page_size=page_size
    )
    if format is not None:
        req.format = parse_format(format)
    return req


def get_working_memory(conversation_id: str, *, refresh: bool, prepare: bool) -> memory_pb2.GetWorkingMemoryRequest:
    return memory_pb2.GetWorkingMemoryRequest(conversation_id=conversation_id, refresh=refresh, prepare=prepare)


def working_memory(value: memory_pb2.WorkingMemory | Mapping[str, Any]) -> memory_pb2.WorkingMemory:
    if isinstance(value, memory_pb2.WorkingMemory):
        return value
    out = memory_pb2.WorkingMemory()
    json_format.ParseDict(dict(value), out)
    return out


def update_working_memory(
    conversation_id: str, memory: Any, *, expected_version: int | None, expected_log_changes: int | None
) -> memory_pb2.UpdateWorkingMemoryRequest:
    req = memory_pb2.UpdateWorkingMemoryRequest(conversation_id=conversation_id, memory=working_memory(memory))
    if expected_version is not None:
        req.expected_version = expected_version
    if expected_log_changes is not None:
        req.expected_log_changes = expected_log_changes
    return req


def get_conversation(conversation_id: str) -> conversations_pb2.GetConversationRequest:
    return conversations_pb2.GetConversationRequest(conversation_id=conversation_id)


def _timestamp(value: Any) -> timestamp_pb2.Timestamp:
    if isinstance(value, timestamp_pb2.Timestamp):
        return value
    if isinstance(value, _dt.datetime):
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc))
        return ts
    raise TypeError("expire_time must be a datetime or a Timestamp")


_UNSET: Any = object()


def update_conversation(
    conversation_id: str,
    *,
    title: str | None,
    status: Any,
    labels: Mapping[str, str] | None,
    expire_time: Any,
    allow_missing: bool,
) -> conversations_pb2.UpdateConversationRequest:
    conv = conversations_pb2.Conversation(conversation_id=conversation_id)
    paths = []
    if title is not None:
        conv.title = title
        paths.append("title")
    if status is not None:
        conv.status = _enum(status, conversations_pb2.ConversationStatus, "CONVERSATION_STATUS_")
        paths.append("status")
    if labels is not None:
        conv.labels.update(labels)
        paths.append("labels")
    if expire_time is not _UNSET:
        if expire_time is not None:
            conv.expire_time.CopyFrom(_timestamp(expire_time))
        paths.append("expire_time")
    return conversations_pb2.UpdateConversationRequest(
        conversation=conv, update_mask=field_mask_pb2.FieldMask(paths=paths), allow_missing=allow_missing
    )


def list_conversations(
    *, page_size: int, page_token: str, labels: Mapping[str, str] | None, status: Any
) -> conversations_pb2.ListConversationsRequest:
    return conversations_pb2.ListConversationsRequest(
        page_size=page_size,
        page_token=page_token,
        labels=dict(labels or {}),
        status=_enum(status, conversations_pb2.ConversationStatus, "CONVERSATION_STATUS_"),
    )


def delete_conversation(conversation_id: str) -> context_service_pb2.DeleteConversationRequest:
    return context_service_pb2.DeleteConversationRequest(conversation_id=conversation_id)


def fork_conversation(
    conversation_id: str, *, through_sequence: int, new_conversation_id: str
) -> conversations_pb2.ForkConversationRequest:
    return conversations_pb2.ForkConversationRequest(
        conversation_id=conversation_id, through_sequence=through_sequence, new_conversation_id=new_conversation_id
    )


def redact_message(conversation_id: str, sequence: int) -> conversations_pb2.RedactMessageRequest:
    return conversations_pb2.RedactMessageRequest(conversation_id=conversation_id, sequence=sequence)


def rewind_conversation(
    conversation_id: str, *, after_sequence: int, expected_last_sequence: int | None
) -> conversations_pb2.RewindConversationRequest:
    req = conversations_pb2.RewindConversationRequest(conversation_id=conversation_id, after_sequence=after_sequence)
    if expected_last_sequence is not None:
        req.expected_last_sequence = expected_last_sequence
    return req

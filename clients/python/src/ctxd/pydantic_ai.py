"""Pydantic AI conversation store backed by ctxd (`pip install ctxd[pydantic-ai]`).

    from pydantic_ai.conversation import Conversation
    from ctxd.pydantic_ai import CtxdConversationStore

    store = CtxdConversationStore(ctxd.AsyncClient("localhost:50051"), budget_tokens=32_000)
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run("Hi", conversation=conversation)
    await store.save(result)

`CtxdConversationStore` is a `pydantic_ai.conversation_store.ConversationStore`: it implements the
five storage primitives (`read_record`, `read_records`, `write_record`, `delete_record`,
`read_entry`) and overrides `read_history`, so `load`, `load_entries`, `save`, `branch`, `fork`,
`list_conversations` and `delete` work as the base class defines them; `load` is overridden too,
for packs (`budget_tokens`).

How a conversation is kept (the pydantic-ai conversation id is the ctxd conversation id):

- Each `ModelMessage` becomes one or more ctxd messages, so ctxd sees the conversation as it is
  (BuildContext packs of it in any provider format, summaries, search): system and user prompt
  parts as system and user messages, a response's text and tool calls as one assistant message
  (its `ThinkingPart`s as `reasoning` where ctxd models the provider's type, its usage as
  `Message.usage`), each tool return or retry as a tool message answering its call. The call ids
  ctxd shows are `<tool_call_id>~<sequence>` (unique within the conversation, as ctxd requires;
  the scripted models reuse ids across turns). A message with nothing ctxd models (e.g. only
  built-in tool parts) becomes a UI-only message (`exclude_from_context`).
- Losslessly: the first ctxd message of each entry carries the message as
  `ModelMessagesTypeAdapter` JSON in `metadata["pydantic_ai.message"]`, and every one carries the
  entry id in `metadata["pydantic_ai.entry"]`; `load` returns messages equal (`==`) to those
  saved. JSON writes a datetime in a field typed `Any` (`provider_details["timestamp"]`) as a
  string and reads a string back: the paths of such datetimes go in
  `metadata["pydantic_ai.datetimes"]` and `load` puts datetimes back there. (Other Python
  objects in `Any` fields come back in their JSON form, as with `ModelMessagesTypeAdapter`.)
  The last message of each save carries the record (`usage`, `deferred_tool_requests`) in
  `metadata["pydantic_ai.record"]`.
- Packs: with `budget_tokens` (on the store or per `load`), `load` is BuildContext in the
  store's `format`: a `ModelRequest` of `SystemPromptPart`s with the summary, working memory or
  truncation notice the pack holds, then the stored messages from the oldest one the pack keeps,
  whole. When the pack leaves out history no summary covers, ctxd Summarize runs first. The
  loaded conversation is marked stored up to its last message, so `save` appends only what the
  run added.
- The revision is `"<last sequence>:<head entry id>"`: a save appends with
  `expected_last_sequence` set to the sequence it was loaded at, so a concurrent save is ABORTED
  by ctxd and raised as `ConversationConflict`.
- `branch` (and a save of a rewritten history) keeps the history it leaves as a ctxd fork
  labelled `pydantic-ai.branch-of=<conversation id>`, then rewinds the conversation
  (RewindConversation, guarded) and appends the new branch. `fork` is ctxd ForkConversation
  (summary and memory included), or a copy when the fork point is inside a tool-call group.
- `scope` is the label `pydantic-ai.scope`; `list_conversations` is ListConversations by labels.
- `delete` erases the conversation and the branches it left (DeleteConversation): nothing stays.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import pydantic
from pydantic_ai import messages as _messages
from pydantic_ai._conversation_marks import mark_stored
from pydantic_ai._deferred import DeferredToolRequests
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.usage import RequestUsage, RunUsage

from . import errors
from .client import AsyncClient, Client
from .v1 import context_pb2, messages_pb2

__all__ = ["CtxdConversationStore", "ConversationConflict"]

ENTRY = "pydantic_ai.entry"
MESSAGE = "pydantic_ai.message"
RECORD = "pydantic_ai.record"
DATETIMES = "pydantic_ai.datetimes"
LABEL_STORE = "pydantic-ai.store"
LABEL_SCOPE = "pydantic-ai.scope"
LABEL_BRANCH_OF = "pydantic-ai.branch-of"
LABEL_TIP = "pydantic-ai.tip"
LABEL_FORKED_FROM = "pydantic-ai.forked-from"
LABEL_FORKED_AT = "pydantic-ai.forked-at"
_CHUNK = 100  # ctxd's default CTXD_MAX_MESSAGES_PER_REQUEST
# What a pack holds besides history, given to the model as system prompt parts.
_NOTES = (
    context_pb2.CONTEXT_SOURCE_SUMMARY,
    context_pb2.CONTEXT_SOURCE_WORKING_MEMORY,
    context_pb2.CONTEXT_SOURCE_TRUNCATION_NOTICE,
)

_Usage = pydantic.TypeAdapter(RunUsage)
_Deferred = pydantic.TypeAdapter(DeferredToolRequests | None)
_Messages = _messages.ModelMessagesTypeAdapter
_ModelMessage = _messages.ModelMessage  # for annotations in the store, which has a `_messages` method


def _dump_message(message: _messages.ModelMessage) -> tuple[str, str | None]:
    """The message as `ModelMessagesTypeAdapter` JSON, and the paths of the datetimes JSON does
    not give back as datetimes (JSON text of a list of paths, or None when there are none)."""
    text = _Messages.dump_json([message]).decode()[1:-1]
    # Datetimes in fields typed `Any` (`provider_details["timestamp"]`, which the OpenAI, Google,
    # Mistral and Hugging Face models set, or a part's `provider_details`) are written as ISO
    # strings and read back as strings: note where they are, so a load puts datetimes back.
    paths = list(_datetime_paths(_Messages.dump_python([message])[0]))
    if not paths:
        return text, None
    loaded = _Messages.dump_python([_load_message(text)])[0]
    lost = [path for path in paths if isinstance(_at(loaded, path), str)]
    return text, (json.dumps(lost, separators=(",", ":")) if lost else None)


def _load_message(text: str, datetimes: str | None = None) -> _messages.ModelMessage:
    message = _Messages.validate_json(f"[{text}]")[0]
    for path in json.loads(datetimes) if datetimes else ():
        *parents, last = path
        try:
            container = message
            for key in parents:
                container = _step(container, key)
            value = _step(container, last)
            if isinstance(value, str):
                parsed = _Datetime.validate_python(value)
                if isinstance(container, dict | list):
                    container[last] = parsed
                else:
                    setattr(container, last, parsed)
        except (LookupError, AttributeError, TypeError, pydantic.ValidationError):
            continue  # not where it was (a message another version wrote): leave it as read
    return message


_Datetime = pydantic.TypeAdapter(datetime)


def _datetime_paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[list[str | int]]:
    """Paths of the datetimes in a `dump_python` tree (dicts and lists)."""
    if isinstance(value, datetime):
        yield list(path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield from _datetime_paths(item, (*path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _datetime_paths(item, (*path, index))


def _step(value: Any, key: str | int) -> Any:
    """One step down a path: a dict key, a list index, or an attribute (dataclass field)."""
    if isinstance(value, dict | list):
        return value[key]  # type: ignore[index]
    if not isinstance(key, str):
        raise TypeError(key)
    return getattr(value, key)


def _at(tree: Any, path: list[str | int]) -> Any:
    try:
        for key in path:
            tree = _step(tree, key)
    except (LookupError, AttributeError, TypeError):
        return None
    return tree


@dataclasses.dataclass
class _Stored:
    """One entry as ctxd holds it: its messages and the sequences they occupy."""

    entry: ConversationEntry
    first: int
    last: int
    record: dict[str, Any] | None


@dataclasses.dataclass
class _State:
    """What a ctxd conversation holds for the store."""

    conversation_id: str
    last: int
    labels: dict[str, str]
    updated_at: datetime
    tail: _Stored | None  # the head entry (None when empty)

    @property
    def head(self) -> str | None:
        return self.tail.entry.id if self.tail else None

    @property
    def revision(self) -> str:
        return f"{self.last}:{self.head or ''}"


class _Unset:
    """The default of `load(budget_tokens=...)`: the store's budget."""


_UNSET = _Unset()


class CtxdConversationStore(ConversationStore):
    """A Pydantic AI ConversationStore keeping each conversation in ctxd.

    Args:
        client: A `ctxd.AsyncClient` (or a blocking `ctxd.Client`).
        branch_prefix: Prefix of the ctxd conversation ids that keep branches a conversation
            left (`<prefix><tip entry id>`).
        budget_tokens: When set, `load` returns a pack rather than the whole history: the
            newest messages that fit this many tokens (less `reserve_tokens`), after the
            summary, working memory or truncation notice (as a system prompt), the way
            BuildContext packs them. None (the default): `load` returns every message.
        reserve_tokens: Part of the budget left for what the run adds (the new prompt, tool
            calls and returns, the reply). Default a quarter of the budget.
        format: The provider format the pack is counted and cut for (`"chat"`, the default;
            `"responses"`, `"anthropic"`, `"gemini"`): use your model's.
        tokenizer: The model's tokenizer (default the server's).
        working_memory: Put the conversation's working memory in the pack (default True).
        history_policy: `"cache_stable"` (default) or `"newest"`, as BuildContext takes it.
        summarize: When the pack leaves out history no summary covers (`needs_summary`), run
            ctxd Summarize (the server's summarizer) before packing (default True).
        keep_recent_tokens: Summarize's verbatim window. Default half of what the pack holds.
        max_summary_tokens: Summarize's bound on the summary. Default an eighth of what the
            pack holds.
    """

    def __init__(
        self,
        client: AsyncClient | Client,
        *,
        branch_prefix: str = "pydantic-ai-branch/",
        budget_tokens: int | None = None,
        reserve_tokens: int | None = None,
        format: Any = None,
        tokenizer: Any = None,
        working_memory: bool = True,
        history_policy: Any = None,
        summarize: bool = True,
        keep_recent_tokens: int | None = None,
        max_summary_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.branch_prefix = branch_prefix
        self.budget_tokens = budget_tokens
        self.reserve_tokens = reserve_tokens
        self.format = format
        self.tokenizer = tokenizer
        self.working_memory = working_memory
        self.history_policy = history_policy
        self.summarize = summarize
        self.keep_recent_tokens = keep_recent_tokens
        self.max_summary_tokens = max_summary_tokens
        self.last_pack: context_pb2.BuildContextResponse | None = None
        """The pack the last budgeted `load` was made from (`stats`, `needs_summary`)."""
        # Entry id -> the ctxd conversation whose history ends at it (heads and branch tips seen
        # by read_record), for read_history, which is handed only the entry id.
        self._where: dict[str, str] = {}

    async def _rpc(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, name)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    # -- reading ctxd --------------------------------------------------------------------------

    async def _get(self, conversation_id: str) -> Any | None:
        try:
            return (await self._rpc("get_conversation", conversation_id)).conversation
        except errors.NotFound:
            return None

    async def _messages(self, conversation_id: str, after: int = 0) -> list[messages_pb2.Message]:
        out: list[messages_pb2.Message] = []
        while True:
            page = await self._rpc("list_messages", conversation_id, after_sequence=after, page_size=1000)
            out.extend(page.messages)
            if not page.next_after_sequence:
                return out
            after = page.next_after_sequence

    def _group(self, conversation_id: str, msgs: Sequence[messages_pb2.Message]) -> list[_Stored]:
        """ctxd messages to entries; a leading partial entry (its first message not in `msgs`)
        is left out."""
        stored: list[_Stored] = []
        for m in msgs:
            entry_id = m.metadata.get(ENTRY)
            if entry_id is None:  # appended by another client: one message, converted
                entry = ConversationEntry(
                    id=f"ctxd:{conversation_id}:{m.sequence}", parent_id=None, message=_from_ctxd(m)
                )
                stored.append(_Stored(entry, m.sequence, m.sequence, None))
            elif MESSAGE in m.metadata:
                message = _load_message(m.metadata[MESSAGE], m.metadata.get(DATETIMES))
                entry = ConversationEntry(id=entry_id, parent_id=None, message=message)
                stored.append(_Stored(entry, m.sequence, m.sequence, None))
            elif stored and stored[-1].entry.id == entry_id:
                stored[-1].last = m.sequence
            else:
                continue
            if RECORD in m.metadata:
                stored[-1].record = json.loads(m.metadata[RECORD])
        for prev, cur in zip(stored, stored[1:], strict=False):
            cur.entry = dataclasses.replace(cur.entry, parent_id=prev.entry.id)
        return stored

    async def _tail(self, conversation_id: str, last: int, count: int | None) -> list[_Stored]:
        """The last `count` entries (all when None) of a conversation whose last sequence is
        `last`, each linked to the entry before it."""
        if count is None:
            return self._group(conversation_id, await self._messages(conversation_id))
        if count <= 0:
            return []
        window = count + 1
        while True:
            # One entry more than asked for, so the first one returned knows its parent.
            start = max(0, last - window)
            stored = self._group(conversation_id, await self._messages(conversation_id, start))
            if len(stored) > count or start == 0:
                return stored[-count:]
            window *= 2

    async def _state(self, conversation_id: str) -> _State | None:
        conv = await self._get(conversation_id)
        if conv is None:
            return None
        tail = None
        if conv.last_sequence:
            stored = await self._tail(conversation_id, conv.last_sequence, 1)
            tail = stored[-1] if stored else None
            if tail is not None and tail.record is None:
                # A save cut short (by a crash between chunks) left no record on its last message.
                for s in reversed(await self._tail(conversation_id, conv.last_sequence, None)):
                    if s.record is not None:
                        tail.record = s.record
                        break
        return _State(
            conversation_id=conversation_id,
            last=conv.last_sequence,
            labels=dict(conv.labels),
            updated_at=conv.updated_at.ToDatetime(tzinfo=timezone.utc),
            tail=tail,
        )

    async def _branches(self, conversation_id: str) -> list[tuple[str, str]]:
        """(tip entry id, ctxd conversation id) of the branches a conversation left, oldest first."""
        found: list[tuple[str, str]] = []
        token = ""
        while True:
            page = await self._rpc(
                "list_conversations", labels={LABEL_BRANCH_OF: conversation_id}, page_size=1000, page_token=token
            )
            found.extend((c.labels.get(LABEL_TIP, ""), c.conversation_id) for c in page.conversations)
            token = page.next_page_token
            if not token:
                break
        found.reverse()  # ListConversations is newest activity first
        return found

    def _record(self, state: _State, branches: list[tuple[str, str]]) -> ConversationRecord:
        data = (state.tail.record if state.tail else None) or {}
        labels = state.labels
        return ConversationRecord(
            conversation_id=state.conversation_id,
            head_id=state.head,
            usage=_Usage.validate_python(data["usage"]) if "usage" in data else RunUsage(),
            deferred_tool_requests=_Deferred.validate_python(data.get("deferred_tool_requests")),
            scope=labels.get(LABEL_SCOPE),
            forked_from=labels.get(LABEL_FORKED_FROM),
            forked_at=labels.get(LABEL_FORKED_AT),
            branches=[tip for tip, _ in branches],
            revision=state.revision,
            updated_at=state.updated_at,
        )

    # -- packing -------------------------------------------------------------------------------

    async def load(
        self,
        conversation_id: str,
        *,
        limit: int | None = None,
        scope: str | None = None,
        budget_tokens: int | None | _Unset = _UNSET,
    ) -> Conversation | None:
        """Load a conversation, or `None` if the store doesn't have it.

        With a budget (`budget_tokens`, default the store's), the messages are a pack: a
        `ModelRequest` of `SystemPromptPart`s holding the summary, working memory or truncation
        notice, when the pack has them, then the stored messages from the oldest one the pack
        keeps (whole messages; the pack never splits a tool call from its return). Saving the
        run's result appends only what the run added, as after any load. `limit` (a number of
        messages) loads the base class's window instead, unbudgeted."""
        budget = self.budget_tokens if isinstance(budget_tokens, _Unset) else budget_tokens
        if budget is None or limit is not None:
            return await super().load(conversation_id, limit=limit, scope=scope)
        if budget <= 0:
            raise ValueError("budget_tokens must be positive")
        for _ in range(8):
            record = await self.read_record(conversation_id)
            if record is None or (scope is not None and record.scope != scope):
                return None
            messages = await self._packed(record, budget)
            if messages is not None:
                break  # else the conversation changed while it was packed: read it again
        else:
            raise ConversationConflict(conversation_id)  # it kept changing
        conversation = Conversation(
            messages=messages,
            usage=record.usage,
            conversation_id=record.conversation_id,
            deferred_tool_requests=record.deferred_tool_requests,
            revision=record.revision,
        )
        mark_stored(conversation, conversation.messages)
        return conversation

    async def _pack(self, conversation_id: str, budget: int) -> context_pb2.BuildContextResponse:
        return await self._rpc(
            "build_context",
            conversation_id,
            max_tokens=budget,
            reserve_output_tokens=self._reserve(budget),
            format=self.format,
            tokenizer=self.tokenizer,
            omit_working_memory=not self.working_memory,
            history_policy=self.history_policy,
        )

    def _reserve(self, budget: int) -> int:
        reserve = budget // 4 if self.reserve_tokens is None else self.reserve_tokens
        if not 0 <= reserve < budget:
            raise ValueError("reserve_tokens must be at least 0 and less than budget_tokens")
        return reserve

    async def _packed(self, record: ConversationRecord, budget: int) -> list[_ModelMessage] | None:
        """The messages of `record`'s pack, or None when the conversation moved meanwhile."""
        cid = record.conversation_id
        last = int(record.revision.split(":", 1)[0])
        try:
            pack = await self._pack(cid, budget)
            if pack.needs_summary and self.summarize:
                room = budget - self._reserve(budget)
                await self._rpc(
                    "summarize",
                    cid,
                    keep_recent_tokens=room // 2 if self.keep_recent_tokens is None else self.keep_recent_tokens,
                    max_summary_tokens=max(1, room // 8) if self.max_summary_tokens is None else self.max_summary_tokens,
                    tokenizer=self.tokenizer,
                )
                pack = await self._pack(cid, budget)
        except errors.NotFound:
            return None  # deleted meanwhile: the record, read again, says so
        if pack.stats.log_last_sequence != last:
            return None
        self.last_pack = pack
        history = [m.sequence for m in pack.messages if m.source == context_pb2.CONTEXT_SOURCE_HISTORY and m.sequence]
        notes = [m.content for m in pack.messages if m.source in _NOTES and m.content]
        out: list[_ModelMessage] = []
        if notes:
            out.append(_messages.ModelRequest(parts=[_messages.SystemPromptPart(text) for text in notes]))
        if history:
            stored = await self._entries_from(cid, min(history), last)
            if not stored or stored[-1].entry.id != record.head_id:
                return None
            out.extend(s.entry.message for s in stored)
        return out

    async def _entries_from(self, conversation_id: str, oldest: int, last: int) -> list[_Stored]:
        """The entries of sequences `oldest`..=`last`, the one `oldest` is in included whole."""
        window = 8
        while True:
            start = max(0, oldest - 1 - window)
            msgs = [m for m in await self._messages(conversation_id, start) if m.sequence <= last]
            stored = self._group(conversation_id, msgs)
            if start == 0 or (stored and stored[0].first <= oldest):
                return [s for s in stored if s.last >= oldest]
            window *= 4

    # -- ConversationStore primitives ----------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        state = await self._state(conversation_id)
        if state is None or LABEL_BRANCH_OF in state.labels:
            return None
        branches = await self._branches(conversation_id)
        if state.last == 0 and not branches and LABEL_FORKED_FROM not in state.labels:
            return None  # nothing stored: the same as no conversation
        if state.head:
            self._where[state.head] = conversation_id
        for tip, side in branches:
            self._where[tip] = side
        return self._record(state, branches)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        labels = {LABEL_STORE: "conversation"}
        if scope is not None:
            labels[LABEL_SCOPE] = scope
        records: list[ConversationRecord] = []
        token = ""
        while limit is None or len(records) < limit:
            page = await self._rpc("list_conversations", labels=labels, page_size=100, page_token=token)
            for conv in page.conversations:
                record = await self.read_record(conv.conversation_id)
                if record is not None:
                    records.append(record)
            token = page.next_page_token
            if not token:
                break
        records.sort(key=lambda r: r.updated_at, reverse=True)
        return records[:limit] if limit is not None else records

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        if head_id is None:
            return []
        where = self._where.get(head_id)
        conv = await self._get(where) if where is not None else None
        if conv is None:
            raise KeyError(head_id)
        stored = await self._tail(where, conv.last_sequence, limit)
        if not stored or stored[-1].entry.id != head_id:
            # The head is not the conversation's last entry (it moved since it was read).
            stored = await self._tail(where, conv.last_sequence, None)
            ids = [s.entry.id for s in stored]
            if head_id not in ids:
                raise KeyError(head_id)
            stored = stored[: len(ids) - ids[::-1].index(head_id)]
            if limit is not None:
                stored = stored[len(stored) - limit :] if limit else []
        return [s.entry for s in stored]

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        for where in dict.fromkeys(self._where.values()):
            for s in self._group(where, await self._messages(where)):
                if s.entry.id == entry_id:
                    return s.entry
        raise KeyError(entry_id)

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        cid = record.conversation_id
        state = await self._state(cid)
        branches = await self._branches(cid) if state is not None else []
        exists = state is not None and (state.last > 0 or bool(branches) or LABEL_FORKED_FROM in state.labels)
        if state is not None and LABEL_BRANCH_OF in state.labels:
            raise ConversationConflict(cid)
        if (state.revision if exists and state else None) != expected_revision:
            raise ConversationConflict(cid)
        if not exists and record.forked_from is not None and not new_entries:
            last = await self._create_fork(record)
        else:
            state = await self._ensure_labels(record, state)
            last = await self._move_head(record, new_entries, state, dict(branches))
            last = await self._append_entries(cid, new_entries, last, record)
            if state is not None and (branches or record.branches):
                await self._prune_branches(cid, record.branches)
        # The base class hands the record's revision to the conversation it saved, branched or
        # forked: make it ctxd's (the last sequence and the head entry).
        record.revision = f"{last}:{record.head_id or ''}"

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        state = await self._state(conversation_id)
        if state is None or state.revision != expected_revision or LABEL_BRANCH_OF in state.labels:
            raise ConversationConflict(conversation_id)
        for _, side in await self._branches(conversation_id):
            await self._delete(side)
        await self._delete(conversation_id)

    # -- writing ctxd --------------------------------------------------------------------------

    async def _delete(self, conversation_id: str) -> None:
        try:
            await self._rpc("delete_conversation", conversation_id)
        except errors.NotFound:
            pass

    def _labels(self, record: ConversationRecord) -> dict[str, str]:
        labels = {LABEL_STORE: "conversation"}
        if record.scope is not None:
            labels[LABEL_SCOPE] = record.scope
        if record.forked_from is not None:
            labels[LABEL_FORKED_FROM] = record.forked_from
        if record.forked_at is not None:
            labels[LABEL_FORKED_AT] = record.forked_at
        return labels

    async def _ensure_labels(self, record: ConversationRecord, state: _State | None) -> _State | None:
        labels = self._labels(record)
        if state is not None and all(state.labels.get(k) == v for k, v in labels.items()):
            return state
        merged = {**(state.labels if state else {}), **labels}
        await self._rpc(
            "update_conversation", record.conversation_id, labels=merged, allow_missing=state is None
        )
        return await self._state(record.conversation_id)

    async def _locate(self, entry_id: str, where: str) -> tuple[list[_Stored], int] | None:
        """The entries of `where` and the index of `entry_id` among them."""
        stored = self._group(where, await self._messages(where))
        for i in range(len(stored) - 1, -1, -1):
            if stored[i].entry.id == entry_id:
                return stored, i
        return None

    async def _move_head(
        self,
        record: ConversationRecord,
        new_entries: Sequence[ConversationEntry],
        state: _State | None,
        sides: dict[str, str],
    ) -> int:
        """Makes the conversation end at the entry the new entries follow (rewinding and, when
        it lies in a branch, copying that branch in), keeping the history it leaves as a branch
        when the record lists it. Returns the last sequence."""
        cid = record.conversation_id
        last = state.last if state else 0
        head = state.head if state else None
        attach = new_entries[0].parent_id if new_entries else record.head_id
        if attach == head:
            return last
        if head is not None and head in record.branches and head not in sides:
            side = self.branch_prefix + head
            try:
                await self._rpc("fork_conversation", cid, through_sequence=last, new_conversation_id=side)
            except errors.AlreadyExists:
                pass
            await self._rpc("update_conversation", side, labels={LABEL_BRANCH_OF: cid, LABEL_TIP: head})
        if attach is None:
            keep, copy = 0, []
        else:
            here = await self._locate(attach, cid)
            if here is not None:
                keep, copy = here[0][here[1]].last, []
            else:
                found = None
                for side in sides.values():
                    found = await self._locate(attach, side)
                    if found is not None:
                        break
                if found is None:
                    raise ConversationConflict(cid)
                theirs, index = found
                mine = self._group(cid, await self._messages(cid))
                shared = 0
                while shared < min(len(mine), len(theirs)) and mine[shared].entry.id == theirs[shared].entry.id:
                    shared += 1
                keep = mine[shared - 1].last if shared else 0
                first, through = theirs[shared].first, theirs[index].last
                copy = [m for m in await self._messages(side, first - 1) if m.sequence <= through]
        try:
            await self._rpc("rewind_conversation", cid, after_sequence=keep, expected_last_sequence=last)
        except errors.Aborted as error:
            raise ConversationConflict(cid) from error
        last = keep
        for i in range(0, len(copy), _CHUNK):
            chunk = [_copy(m) for m in copy[i : i + _CHUNK]]
            last = await self._append(cid, chunk, last)
        return last

    async def _append(self, cid: str, msgs: list[messages_pb2.Message], last: int, key: str | None = None) -> int:
        try:
            done = await self._rpc(
                "append_message", cid, msgs, expected_last_sequence=last, idempotency_key=key
            )
        except errors.Aborted as error:
            raise ConversationConflict(cid) from error
        return done.conversation_last_sequence

    async def _append_entries(
        self, cid: str, entries: Sequence[ConversationEntry], last: int, record: ConversationRecord
    ) -> int:
        if not entries:
            return last
        calls = await _open_calls(self, cid, last) if _answers_older_calls(entries) else {}
        groups: list[list[messages_pb2.Message]] = []
        seq = last
        for entry in entries:
            msgs = _to_ctxd(entry, seq, calls)
            seq += len(msgs)
            groups.append(msgs)
        groups[-1][-1].metadata[RECORD] = json.dumps(
            {
                "usage": _Usage.dump_python(record.usage, mode="json"),
                "deferred_tool_requests": _Deferred.dump_python(record.deferred_tool_requests, mode="json"),
            },
            separators=(",", ":"),
        )
        chunk: list[messages_pb2.Message] = []
        for index, group in enumerate(groups):
            if chunk and len(chunk) + len(group) > _CHUNK:
                last = await self._append(cid, chunk, last, f"pai-{entries[0].id}-{index}")
                chunk = []
            chunk.extend(group)
        return await self._append(cid, chunk, last, f"pai-{entries[0].id}-end")

    async def _prune_branches(self, cid: str, keep: Sequence[str]) -> None:
        for tip, side in await self._branches(cid):
            if tip not in keep:
                await self._delete(side)

    async def _create_fork(self, record: ConversationRecord) -> int:
        """A new conversation holding the source's history up to `record.head_id`."""
        cid, source = record.conversation_id, record.forked_from
        assert source is not None
        labels = self._labels(record)
        if record.head_id is None:
            await self._rpc("update_conversation", cid, labels=labels, allow_missing=True)
            return 0
        candidates = [source] + [side for _, side in await self._branches(source)]
        for where in candidates:
            found = await self._locate(record.head_id, where)
            if found is None:
                continue
            stored, index = found
            through = stored[index].last
            try:
                await self._rpc("fork_conversation", where, through_sequence=through, new_conversation_id=cid)
                last = through
            except errors.AlreadyExists as error:
                raise ConversationConflict(cid) from error
            except errors.InvalidArgument:
                # Inside a tool-call group (a call answered after the fork point): copy instead.
                copy = [_copy(m) for m in await self._messages(where) if m.sequence <= through]
                last = 0
                for i in range(0, len(copy), _CHUNK):
                    last = await self._append(cid, copy[i : i + _CHUNK], last)
            await self._rpc("update_conversation", cid, labels=labels)
            return last
        raise ConversationConflict(cid)


# -- ModelMessage <-> ctxd messages ------------------------------------------------------------


def _answers_older_calls(entries: Sequence[ConversationEntry]) -> bool:
    """Whether a tool return among `entries` answers a call made before them."""
    called: set[str] = set()
    for entry in entries:
        for part in entry.message.parts:
            kind = getattr(part, "part_kind", "")
            if kind == "tool-call":
                called.add(part.tool_call_id)
            elif kind == "tool-return" and part.tool_call_id not in called:
                return True
    return False


async def _open_calls(store: CtxdConversationStore, cid: str, last: int) -> dict[str, str]:
    """tool_call_id -> ctxd call id of the calls still unanswered among the conversation's
    last 64 messages (a deferred tool's result answers a call an earlier save stored)."""
    calls: dict[str, str] = {}
    if last == 0:
        return calls
    for m in await store._messages(cid, max(0, last - 64)):
        for call in m.tool_calls:
            calls[call.id.rsplit("~", 1)[0]] = call.id
        if m.tool_call_id:
            calls = {k: v for k, v in calls.items() if v != m.tool_call_id}
    return calls


def _to_ctxd(entry: ConversationEntry, last: int, calls: dict[str, str]) -> list[messages_pb2.Message]:
    """The ctxd messages of one entry, appended after sequence `last`."""
    message = entry.message
    out: list[messages_pb2.Message] = []
    if isinstance(message, _messages.ModelResponse):
        out.extend(_response(message, last + 1, calls))
    else:
        for part in message.parts:
            kind = getattr(part, "part_kind", "")
            if kind == "system-prompt":
                out.append(messages_pb2.Message(role=messages_pb2.ROLE_SYSTEM, content=part.content))
            elif kind == "user-prompt":
                out.append(_user(part))
            elif kind == "tool-return":
                text = _tool_text(part)
                call = calls.pop(part.tool_call_id, None)
                if call is not None:
                    out.append(
                        messages_pb2.Message(
                            role=messages_pb2.ROLE_TOOL, tool_call_id=call, content=text, name=part.tool_name
                        )
                    )
                else:  # its call is not in the log (a trimmed history): the result as text
                    out.append(
                        messages_pb2.Message(role=messages_pb2.ROLE_USER, content=f"[{part.tool_name} result] {text}")
                    )
            elif kind == "retry-feedback":
                out.append(messages_pb2.Message(role=messages_pb2.ROLE_USER, content=_text_of(part)))
    if not out:  # nothing ctxd models: a UI-only message carries the entry
        kinds = ", ".join(sorted({getattr(p, "part_kind", "?") for p in message.parts})) or "empty"
        role = messages_pb2.ROLE_ASSISTANT if message.kind == "response" else messages_pb2.ROLE_USER
        out.append(messages_pb2.Message(role=role, content=f"[pydantic-ai {message.kind}: {kinds}]", exclude_from_context=True))
    for m in out:
        m.metadata[ENTRY] = entry.id
    text, datetimes = _dump_message(message)
    out[0].metadata[MESSAGE] = text
    if datetimes is not None:
        out[0].metadata[DATETIMES] = datetimes
    return out


def _response(message: _messages.ModelResponse, sequence: int, calls: dict[str, str]) -> list[messages_pb2.Message]:
    texts, tool_calls = [], []
    for part in message.parts:
        kind = getattr(part, "part_kind", "")
        if kind == "text" and part.content:
            texts.append(part.content)
        elif kind == "tool-call":
            call_id = f"{part.tool_call_id}~{sequence}"
            calls[part.tool_call_id] = call_id
            tool_calls.append(messages_pb2.ToolCall(id=call_id, name=part.tool_name, arguments=part.args_as_json_str()))
    if not texts and not tool_calls:
        return []
    m = messages_pb2.Message(role=messages_pb2.ROLE_ASSISTANT, content="".join(texts), tool_calls=tool_calls)
    m.reasoning.extend(_reasoning(message))
    if message.provider_response_id:
        m.response_id = message.provider_response_id[:256]
    _usage(m, message.usage)
    return [m]


_PROVIDERS = {
    "anthropic": messages_pb2.PROVIDER_ANTHROPIC,
    "openai": messages_pb2.PROVIDER_OPENAI,
    "google": messages_pb2.PROVIDER_GEMINI,
    "google-gla": messages_pb2.PROVIDER_GEMINI,
    "google-vertex": messages_pb2.PROVIDER_GEMINI,
}


def _reasoning(message: _messages.ModelResponse) -> list[messages_pb2.Reasoning]:
    """ThinkingParts ctxd can model (one provider per message, with the fields its type needs);
    the rest stays in the message JSON only."""
    out: list[messages_pb2.Reasoning] = []
    provider = None
    seen_ids: set[str] = set()
    for part in message.parts:
        if getattr(part, "part_kind", "") != "thinking":
            continue
        p = _PROVIDERS.get(part.provider_name or "")
        if p is None or (provider is not None and p != provider):
            continue
        if p == messages_pb2.PROVIDER_ANTHROPIC:
            if part.id == "redacted_thinking" and part.signature:
                block = messages_pb2.Reasoning(provider=p, type="redacted_thinking", data=part.signature)
            elif part.signature and part.content:
                block = messages_pb2.Reasoning(provider=p, type="thinking", text=part.content, signature=part.signature)
            else:
                continue
        elif p == messages_pb2.PROVIDER_OPENAI:
            if not part.id or part.id in seen_ids:
                continue
            seen_ids.add(part.id)
            block = messages_pb2.Reasoning(provider=p, type="reasoning", id=part.id, data=part.signature or "")
            if part.content:
                block.summary.append(part.content)
        else:
            if not part.content:
                continue
            block = messages_pb2.Reasoning(provider=p, type="thought", text=part.content, signature=part.signature or "")
        provider = p
        out.append(block)
    return out


def _usage(m: messages_pb2.Message, usage: RequestUsage | None) -> None:
    if usage is None:
        return
    m.usage.input_tokens = usage.input_tokens or 0
    m.usage.output_tokens = usage.output_tokens or 0
    m.usage.cached_input_tokens = getattr(usage, "cache_read_tokens", 0) or 0
    m.usage.reasoning_tokens = getattr(usage, "output_reasoning_tokens", 0) or 0


def _user(part: Any) -> messages_pb2.Message:
    m = messages_pb2.Message(role=messages_pb2.ROLE_USER)
    if isinstance(part.content, str):
        m.content = part.content
        return m
    texts = []
    for item in part.content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(getattr(item, "data", None), bytes) and getattr(item, "media_type", None):
            m.attachments.append(messages_pb2.Attachment(mime_type=item.media_type, data=item.data))
        elif isinstance(getattr(item, "url", None), str) and getattr(item, "media_type", None):
            m.attachments.append(messages_pb2.Attachment(mime_type=item.media_type, uri=item.url))
        else:
            texts.append(str(getattr(item, "content", "")) if hasattr(item, "content") else "")
    m.content = "\n".join(t for t in texts if t)
    if not m.content and not m.attachments:
        m.content = "[user content]"
    return m


def _tool_text(part: Any) -> str:
    for name in ("model_response_str", "model_response"):
        method = getattr(part, name, None)
        if callable(method):
            try:
                return str(method())
            except Exception:  # noqa: BLE001 - fall back to the raw content
                break
    return _text_of(part)


def _text_of(part: Any) -> str:
    method = getattr(part, "model_response", None)
    if callable(method):
        try:
            return str(method())
        except Exception:  # noqa: BLE001
            pass
    content = getattr(part, "content", "")
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _copy(m: messages_pb2.Message) -> messages_pb2.Message:
    """A stored message as a new append (server-set fields cleared)."""
    out = messages_pb2.Message()
    out.CopyFrom(m)
    for name in ("sequence", "created_at", "tokens", "reasoning_tokens", "native"):
        out.ClearField(name)
    return out


def _from_ctxd(m: messages_pb2.Message) -> _messages.ModelMessage:
    """A ctxd message appended by another client, as the ModelMessage closest to it."""
    if m.role == messages_pb2.ROLE_ASSISTANT:
        parts: list[Any] = [_messages.TextPart(m.content)] if m.content else []
        parts.extend(
            _messages.ToolCallPart(c.name, c.arguments or None, tool_call_id=c.id.rsplit("~", 1)[0]) for c in m.tool_calls
        )
        return _messages.ModelResponse(parts=parts)
    if m.role == messages_pb2.ROLE_TOOL:
        return _messages.ModelRequest(
            parts=[_messages.ToolReturnPart(m.name or "tool", m.content, tool_call_id=m.tool_call_id.rsplit("~", 1)[0])]
        )
    if m.role == messages_pb2.ROLE_SYSTEM:
        return _messages.ModelRequest(parts=[_messages.SystemPromptPart(m.content)])
    return _messages.ModelRequest(parts=[_messages.UserPromptPart(m.content)])

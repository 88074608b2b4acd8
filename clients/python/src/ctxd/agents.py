"""OpenAI Agents SDK session backed by ctxd (`pip install ctxd[agents]`).

    from agents import Agent, Runner
    from ctxd.agents import CtxdSession

    session = CtxdSession("user-42/support", ctxd.AsyncClient("localhost:50051"), budget_tokens=32_000)
    await Runner.run(agent, "Hi", session=session)

`CtxdSession` implements the SDK's `agents.memory.session.Session` protocol (`get_items`,
`add_items`, `pop_item`, `clear_session`, the `session_id` and `session_settings` attributes)
and `OpenAIResponsesCompactionAwareSession` (`run_compaction(args)`). Every method also takes the
SDK's `wrapper=` (the run's `RunContextWrapper`), so the Runner hands the session its usage.

- `get_items`: the pack, not the log. ctxd BuildContext in FORMAT_OPENAI_RESPONSES within
  `budget_tokens` (less `reserve_tokens`, the room the Runner needs on top of the history for
  the turn it runs), returned as the Responses `input` items ctxd renders: the summary, working
  memory or truncation notice as `system` message items, then the newest history that fits,
  tool calls and their outputs kept together, reasoning of the turn under way included,
  cache-stable from call to call. `limit` keeps the SDK's meaning: the latest `limit` items of
  the pack. With `whole_log=True`, the whole log instead (ListMessages): after a compaction,
  the summary item then every item after the summary's watermark.
- `add_items`: one AppendMessage of the items as Responses input JSON (`native`,
  FORMAT_OPENAI_RESPONSES). ctxd keeps every item JSON-equal: reasoning with its
  `encrypted_content`, item ids, tool calls and outputs, server-side tool items. When the Runner
  passes its context wrapper, the usage its model calls reported since the last save is stored
  on the assistant message of the model's items (`Message.usage`, from a Responses `Response`
  usage block), so `Conversation.usage` adds up to what the model reported. Items that need
  the usage split off are appended in up to three guarded requests; if a later one fails, the
  earlier ones are rewound, so the batch is stored whole or not at all.
- `pop_item`: RewindConversation of the last message, guarded by `expected_last_sequence`. One
  ctxd message can hold several items (a model turn's reasoning and calls); then the message is
  rewound and its other items are appended again (guarded too), and the last item is returned.
- `clear_session`: DeleteConversation (an absent conversation is already clear).
- `run_compaction`: ctxd Summarize, decided on tokens: the Runner calls it after each turn, and
  it summarizes when `should_compact(pack)` says so (default: the pack's `needs_summary`,
  history left out that no summary covers). `{"force": True}` summarizes whatever it can
  (falling back to `keep_recent_tokens=0`). It returns a `CompactionResult` saying what it did,
  or why nothing could be summarized. The log stays whole (ListMessages shows every item).
- `call_model_input_filter`: optional, for `RunConfig(call_model_input_filter=...)`: every
  model call of a run is sent a fresh pack of the log within the whole `budget_tokens`, so a
  long tool loop inside one run stays within the budget too.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import grpc
from agents.items import TResponseInputItem
from agents.memory.session import OpenAIResponsesCompactionArgs
from agents.memory.session_settings import SessionSettings, resolve_session_limit
from agents.run_config import CallModelData, ModelInputData
from agents.run_context import RunContextWrapper

from . import errors
from .client import AsyncClient, Client
from .v1 import context_pb2, messages_pb2

__all__ = ["CtxdSession", "CompactionResult", "DEFAULT_BUDGET_TOKENS"]

logger = logging.getLogger(__name__)

RESPONSES = messages_pb2.FORMAT_OPENAI_RESPONSES
_PACK_TOKENS = 10_000_000  # BuildContext's largest budget: the summary is never cut

DEFAULT_BUDGET_TOKENS = 32_000
"""The default budget of a pack, in tokens: a few dozen tool-using turns plus a summary, well
inside the context window of every current Responses model with room left for reasoning and the
reply, while each call's input cost and latency stay bounded however long the session grows."""

Summarizer = Callable[[context_pb2.PreparedRequest], "str | Awaitable[str]"]
Wrapper = RunContextWrapper[Any]

# Model-side Responses items are stored as one assistant message; these and user, system and
# developer messages are stored as messages of their own (docs/native.md).
_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)
# Where the session keeps, on the Runner's context wrapper, the usage it has stored so far.
_USAGE_STORED = "_ctxd_usage_stored"


@dataclasses.dataclass(frozen=True)
class CompactionResult:
    """What `CtxdSession.run_compaction` did. True when a summary was stored.

    Attributes:
        compacted: A new summary version was stored.
        reason: Why it summarized, or why it did not (nothing needed it, the session is empty,
            the summary already covers everything, a tool call is still waiting for results).
        summary: The summary stored (None when none was).
    """

    compacted: bool
    reason: str
    summary: context_pb2.Summary | None = None

    def __bool__(self) -> bool:
        return self.compacted


class CtxdSession:
    """An Agents SDK session whose history is the ctxd conversation `session_id`.

    Args:
        session_id: The ctxd conversation id (1 to 256 bytes of printable ASCII).
        client: A `ctxd.AsyncClient` (or a `ctxd.Client`, whose calls then block the loop).
        budget_tokens: The tokens the model may be sent per call (the input items; the
            agent's instructions and tool definitions are sent beside them). Default 32,000.
        reserve_tokens: Part of `budget_tokens` that `get_items` leaves free: the Runner sends
            the history and then what the run adds (the new input, the tool calls and outputs
            of its tool loop). Default a quarter of the budget. `call_model_input_filter`
            repacks every call and needs no reserve.
        tokenizer: The model's tokenizer (`"o200k_base"`, `"cl100k_base"`, `"approx"`, a
            `ctxd.Tokenizer` value); default the server's.
        working_memory: Put the conversation's working memory in the pack (default True).
        recall: BuildContext `recall`: True, or `{"query", "max_tokens", "max_items"}` (a
            `ctxd.v1.context_pb2.Recall`); the recalled turn is placed last in the pack.
        clear_tool_results: BuildContext `clear_tool_results` (`{"keep_recent",
            "exclude_tools", "clear_arguments"}` or a `ClearToolResults`): older tool outputs
            replaced by a placeholder naming where the whole output is.
        history_policy: `"cache_stable"` (the default: the pack's beginning stays byte-identical
            from call to call, so provider prompt caches hit) or `"newest"` (the newest history
            that fits).
        whole_log: `get_items` returns the whole log (ListMessages) rather than a pack.
        session_settings: The SDK's SessionSettings (`limit`: the default of `get_items`).
        keep_recent_tokens: Summarize's verbatim window: history newer than this many tokens
            stays verbatim after a compaction (snapped back to a turn boundary). Default half
            of what the pack holds (`budget_tokens - reserve_tokens`).
        max_summary_tokens: Summarize's bound on the summary. Default an eighth of what the
            pack holds, so a summary never crowds out the history.
        should_compact: Decides whether an automatic `run_compaction` (the Runner calls it after
            each turn) summarizes; it gets the current pack (`BuildContextResponse`: `stats`,
            `needs_summary`). Default: `pack.needs_summary` (history was left out that no
            summary covers).
        summarizer: Bring your own model: called with ctxd's `PreparedRequest` (`rendered` is
            an OpenAI chat messages array) and returns the summary text (sync or async).
    """

    def __init__(
        self,
        session_id: str,
        client: AsyncClient | Client,
        *,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        reserve_tokens: int | None = None,
        tokenizer: Any = None,
        working_memory: bool = True,
        recall: context_pb2.Recall | Mapping[str, Any] | bool | None = None,
        clear_tool_results: context_pb2.ClearToolResults | Mapping[str, Any] | None = None,
        history_policy: Any = None,
        whole_log: bool = False,
        session_settings: SessionSettings | None = None,
        keep_recent_tokens: int | None = None,
        max_summary_tokens: int | None = None,
        should_compact: Callable[[context_pb2.BuildContextResponse], bool] | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        if budget_tokens <= 0:
            raise ValueError("budget_tokens must be positive")
        reserve = budget_tokens // 4 if reserve_tokens is None else reserve_tokens
        if not 0 <= reserve < budget_tokens:
            raise ValueError("reserve_tokens must be at least 0 and less than budget_tokens")
        self.session_id = session_id
        self.client = client
        self.budget_tokens = budget_tokens
        self.reserve_tokens = reserve
        self.tokenizer = tokenizer
        self.working_memory = working_memory
        self.recall = recall
        self.clear_tool_results = clear_tool_results
        self.history_policy = history_policy
        self.whole_log = whole_log
        self.session_settings = session_settings
        room = budget_tokens - reserve
        self.keep_recent_tokens = room // 2 if keep_recent_tokens is None else keep_recent_tokens
        self.max_summary_tokens = max(1, room // 8) if max_summary_tokens is None else max_summary_tokens
        self.should_compact = should_compact or _needs_summary
        self.summarizer = summarizer
        self.last_pack: context_pb2.BuildContextResponse | None = None
        """The pack the session built last (for `get_items`, the model input filter or
        `run_compaction`'s decision): its `stats` and `needs_summary`."""

    async def _rpc(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, name)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    # -- reading ---------------------------------------------------------------------------

    async def build_pack(self, *, reserve_tokens: int | None = None) -> context_pb2.BuildContextResponse | None:
        """The conversation's pack with the session's options (None when there is no
        conversation). `reserve_tokens` overrides the session's reserve."""
        try:
            pack = await self._rpc(
                "build_context",
                self.session_id,
                max_tokens=self.budget_tokens,
                reserve_output_tokens=self.reserve_tokens if reserve_tokens is None else reserve_tokens,
                format=RESPONSES,
                tokenizer=self.tokenizer,
                omit_working_memory=not self.working_memory,
                history_policy=self.history_policy,
                clear_tool_results=self.clear_tool_results,
                recall=self.recall,
                omit_messages=True,
            )
        except errors.NotFound:
            return None
        self.last_pack = pack
        return pack

    async def get_items(
        self, limit: int | None = None, *, wrapper: Wrapper | None = None
    ) -> list[TResponseInputItem]:
        """The items to send the model: the pack (or the whole log with `whole_log`), or its
        latest `limit` items (default `session_settings.limit`), in order."""
        _note_usage_start(wrapper)
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        if self.whole_log:
            return await self._log_items(limit)
        pack = await self.build_pack()
        items: list[TResponseInputItem] = json.loads(pack.rendered) if pack is not None and pack.rendered else []
        return items if limit is None else items[-limit:]

    async def _state(self) -> tuple[int, int] | None:
        """(last_sequence, summary_through_sequence), or None when there is no conversation."""
        try:
            conv = (await self._rpc("get_conversation", self.session_id)).conversation
        except errors.NotFound:
            return None
        return conv.last_sequence, conv.summary_through_sequence

    async def _summary_item(self) -> tuple[int, TResponseInputItem | None]:
        """The summary as ctxd's Responses packs carry it, and the watermark it covers."""
        pack = await self._rpc(
            "build_context",
            self.session_id,
            max_tokens=_PACK_TOKENS,
            max_messages=1,
            format=RESPONSES,
            omit_working_memory=True,
            omit_messages=True,
        )
        through = pack.stats.summary_through_sequence
        if not through or not pack.stats.summary_tokens:
            return 0, None
        return through, json.loads(pack.rendered)[0]

    async def _items_after(self, after_sequence: int) -> list[TResponseInputItem]:
        items: list[TResponseInputItem] = []
        while True:
            page = await self._rpc(
                "list_messages", self.session_id, after_sequence=after_sequence, page_size=1000, format=RESPONSES
            )
            if page.rendered:
                items.extend(json.loads(page.rendered))
            if not page.next_after_sequence:
                return items
            after_sequence = page.next_after_sequence

    async def _log_items(self, limit: int | None) -> list[TResponseInputItem]:
        """The whole log: after a compaction, the summary item then the items after it."""
        state = await self._state()
        if state is None or state[0] == 0:
            return []
        last, floor = state
        summary: TResponseInputItem | None = None
        if floor:
            floor, summary = await self._summary_item()
        if limit is None:
            items = await self._items_after(floor)
        else:
            # Each message renders as at least one item (UI-only ones as none): widen the tail
            # window until it holds `limit` items or reaches the watermark.
            window = limit
            while True:
                start = max(floor, last - window)
                items = await self._items_after(start)
                if len(items) >= limit or start == floor:
                    break
                window *= 2
        if summary is not None:
            items = [summary, *items]
        return items if limit is None else items[-limit:]

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A `RunConfig.call_model_input_filter` that sends every model call of a run a fresh
        pack of the log, within the whole `budget_tokens` (the Runner stores the run's items
        before each call, so nothing needs reserving):

            Runner.run(agent, prompt, session=session,
                       run_config=RunConfig(call_model_input_filter=session.call_model_input_filter))

        When the log does not end with the input's newest item (the run's items were not stored,
        e.g. another session or none), the input goes as the Runner built it."""
        model_data = data.model_data
        if self.whole_log or not model_data.input:
            return model_data
        pack = await self.build_pack(reserve_tokens=0)
        if pack is None or not pack.rendered:
            return model_data
        items: list[TResponseInputItem] = json.loads(pack.rendered)
        newest = items[:-1] if pack.stats.messages_recalled else items  # the recalled turn comes last
        if not newest or newest[-1] != model_data.input[-1]:
            logger.debug("ctxd session %s: the log does not end with the model input; not repacked", self.session_id)
            return model_data
        return ModelInputData(input=items, instructions=model_data.instructions)

    # -- writing ---------------------------------------------------------------------------

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Wrapper | None = None) -> None:
        """Appends the items natively (stored once, even when retried), with the usage the run
        reported since the last save on the model's message (when the Runner passes `wrapper`)."""
        if not items:
            return
        usage = _unstored_usage(wrapper)
        run = _last_model_run(items) if usage is not None else None
        if usage is None or run is None:
            await self._rpc("append_message", self.session_id, native=_json(items), format=RESPONSES)
            return
        start, end = run
        parts: list[Any] = [items[:start], {"output": items[start:end], "usage": _usage_block(usage)}, items[end:]]
        await self._append_parts([p for p in parts if p])
        assert wrapper is not None  # usage comes from it
        setattr(wrapper, _USAGE_STORED, _usage_totals(wrapper))

    async def _append_parts(self, parts: list[Any]) -> None:
        """Appends each part natively, each after the one before (guarded); a failure rewinds
        what the earlier parts stored, so the batch is stored whole or not at all."""
        first = 0
        last: int | None = None
        try:
            for part in parts:
                done = await self._rpc(
                    "append_message",
                    self.session_id,
                    native=_json(part),
                    format=RESPONSES,
                    expected_last_sequence=last,
                )
                first = first or done.first_sequence
                last = done.conversation_last_sequence
        except BaseException:
            if last is not None:
                try:
                    await self._rpc(
                        "rewind_conversation", self.session_id, after_sequence=first - 1, expected_last_sequence=last
                    )
                except Exception:  # noqa: BLE001 - the append's error is the one to raise
                    logger.warning("ctxd session %s: could not rewind a partly stored batch", self.session_id)
            raise

    async def pop_item(self, *, wrapper: Wrapper | None = None) -> TResponseInputItem | None:
        """Removes and returns the newest item of the log (None when the session is empty)."""
        for _ in range(8):  # another writer moved the tail: read it again
            state = await self._state()
            if state is None:
                return None
            last = state[0]
            # The newest message that renders as an item (UI-only messages render as none).
            seq = last
            items: list[TResponseInputItem] = []
            while seq > 0 and not items:
                page = await self._rpc(
                    "list_messages", self.session_id, after_sequence=seq - 1, page_size=1, format=RESPONSES
                )
                items = json.loads(page.rendered) if page.rendered else []
                if not items:
                    seq -= 1
            if not items:
                return None
            try:
                await self._rpc(
                    "rewind_conversation", self.session_id, after_sequence=seq - 1, expected_last_sequence=last
                )
            except errors.Aborted:
                continue
            if len(items) > 1:
                # The message held a run of items: put back all but the last. The key makes a
                # retry of this append safe; the guard keeps it from landing after a concurrent one.
                await self._rpc(
                    "append_message",
                    self.session_id,
                    native=_json(items[:-1]),
                    format=RESPONSES,
                    expected_last_sequence=seq - 1,
                )
            return items[-1]
        raise errors.Aborted(
            grpc.StatusCode.ABORTED, "the session kept changing while popping its last item", method="pop_item"
        )

    async def clear_session(self, *, wrapper: Wrapper | None = None) -> None:
        """Deletes the conversation (its messages, summary, memory and idempotency records)."""
        try:
            await self._rpc("delete_conversation", self.session_id)
        except errors.NotFound:
            pass

    # -- compaction ------------------------------------------------------------------------

    async def run_compaction(
        self, args: OpenAIResponsesCompactionArgs | None = None, *, wrapper: Wrapper | None = None
    ) -> CompactionResult:
        """Advances the conversation's summary with ctxd Summarize.

        Automatic (the Runner's call after each turn, `force` unset): when `should_compact`
        says so for the current pack (default: `needs_summary`), keeping `keep_recent_tokens`
        verbatim. Forced (`{"force": True}`): whatever can be summarized, with
        `keep_recent_tokens`, or with 0 when that leaves nothing to fold in. The returned
        `CompactionResult` says what was done or why nothing could be. The log is kept whole;
        packs then hold the summary and the history after it. `response_id`, `compaction_mode`
        and `store` are not needed: ctxd summarizes its own log."""
        force = bool((args or {}).get("force", False))
        if not force:
            pack = await self.build_pack()
            if pack is None or not pack.stats.log_last_sequence:
                return CompactionResult(False, "the session is empty: nothing to summarize")
            if not self.should_compact(pack):
                if pack.needs_summary:
                    return CompactionResult(False, "not needed: should_compact declined")
                return CompactionResult(False, "not needed: the pack holds all history the summary does not cover")
        keep = self.keep_recent_tokens
        summary = await self._summarize(keep)
        if summary is None and force and keep:
            keep = 0  # a short session: fold in everything there is
            summary = await self._summarize(keep)
        if summary is not None:
            return CompactionResult(True, f"summarized messages 1 to {summary.through_sequence}", summary)
        return CompactionResult(False, await self._why_not(keep))

    async def _summarize(self, keep_recent_tokens: int) -> context_pb2.Summary | None:
        """One Summarize; the new summary, or None when there was nothing to fold in."""
        common = {"tokenizer": self.tokenizer, "max_summary_tokens": self.max_summary_tokens}
        try:
            if self.summarizer is None:
                done = await self._rpc("summarize", self.session_id, keep_recent_tokens=keep_recent_tokens, **common)
                return done.summary if done.changed else None
            prepared = (
                await self._rpc(
                    "summarize", self.session_id, mode="prepare", keep_recent_tokens=keep_recent_tokens, **common
                )
            ).prepared
        except errors.NotFound:
            return None
        if prepared.through_sequence <= prepared.base_through_sequence:
            return None
        text = self.summarizer(prepared)
        if inspect.isawaitable(text):
            text = await text
        done = await self._rpc(
            "summarize",
            self.session_id,
            mode="provided",
            summary_text=text,
            through_sequence=prepared.through_sequence,
            expected_through_sequence=prepared.base_through_sequence,
            expected_log_changes=prepared.log_changes,
            **common,
        )
        return done.summary if done.changed else None

    async def _why_not(self, keep_recent_tokens: int) -> str:
        state = await self._state()
        if state is None or state[0] == 0:
            return "the session is empty: nothing to summarize"
        last, through = state
        if through >= last:
            return f"nothing to fold in: the summary already covers every message (1 to {last})"
        waiting = await self._open_call(through)
        if waiting is not None:
            call, sequence = waiting
            return (
                f"messages {sequence} to {last} cannot be summarized yet: the {call.name} call {call.id} "
                f"(message {sequence}) has no output, and a summary never splits a call from its output"
            )
        if keep_recent_tokens:
            return (
                f"nothing old enough to fold in: messages {through + 1} to {last} are within "
                f"keep_recent_tokens ({keep_recent_tokens})"
            )
        return f"Summarize found no boundary to cut at in messages {through + 1} to {last}"

    async def _open_call(self, after_sequence: int) -> tuple[messages_pb2.ToolCall, int] | None:
        """The oldest tool call after `after_sequence` that has no result, and its sequence."""
        calls: dict[str, tuple[messages_pb2.ToolCall, int]] = {}
        while True:
            page = await self._rpc("list_messages", self.session_id, after_sequence=after_sequence, page_size=1000)
            for m in page.messages:
                for call in m.tool_calls:
                    calls[call.id] = (call, m.sequence)
                calls.pop(m.tool_call_id, None)
            if not page.next_after_sequence:
                break
            after_sequence = page.next_after_sequence
        return min(calls.values(), key=lambda found: found[1]) if calls else None


def _needs_summary(pack: context_pb2.BuildContextResponse) -> bool:
    return pack.needs_summary


# -- usage ---------------------------------------------------------------------------------


def _usage_totals(wrapper: Wrapper) -> tuple[int, int, int, int]:
    """The run's usage so far: input, output, cached input and reasoning tokens."""
    u = wrapper.usage
    return (
        u.input_tokens or 0,
        u.output_tokens or 0,
        getattr(u.input_tokens_details, "cached_tokens", 0) or 0,
        getattr(u.output_tokens_details, "reasoning_tokens", 0) or 0,
    )


def _note_usage_start(wrapper: Wrapper | None) -> None:
    """At the start of a run (the Runner reads the history first), nothing of its usage is stored."""
    if wrapper is not None and not hasattr(wrapper, _USAGE_STORED):
        setattr(wrapper, _USAGE_STORED, _usage_totals(wrapper))


def _unstored_usage(wrapper: Wrapper | None) -> tuple[int, int, int, int] | None:
    """The usage the run reported since the session last stored some (None when none)."""
    if wrapper is None:
        return None
    now = _usage_totals(wrapper)
    stored = getattr(wrapper, _USAGE_STORED, None)
    if stored is None:
        # A run resumed from a RunState (the history was not read): what its earlier model calls
        # reported was stored with their items; only the newest call's items are being saved.
        entries = wrapper.usage.request_usage_entries
        if not entries:
            setattr(wrapper, _USAGE_STORED, now)
            return None
        e = entries[-1]
        newest = (
            e.input_tokens or 0,
            e.output_tokens or 0,
            getattr(e.input_tokens_details, "cached_tokens", 0) or 0,
            getattr(e.output_tokens_details, "reasoning_tokens", 0) or 0,
        )
        stored = tuple(max(0, a - b) for a, b in zip(now, newest, strict=True))
        setattr(wrapper, _USAGE_STORED, stored)
    delta = tuple(max(0, a - b) for a, b in zip(now, stored, strict=True))
    return (delta[0], delta[1], delta[2], delta[3]) if any(delta) else None


def _usage_block(usage: tuple[int, int, int, int]) -> dict[str, Any]:
    """A Responses `usage` object, which ctxd stores as the message's `Message.usage`."""
    input_tokens, output_tokens, cached, reasoning = usage
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens_details": {"reasoning_tokens": reasoning},
    }


def _model_side(item: Any) -> bool:
    """Whether ctxd stores the item in a model turn's assistant message (docs/native.md)."""
    if not isinstance(item, Mapping):
        item = _default(item)
    kind, role = item.get("type"), item.get("role")
    if kind in _OUTPUTS:
        return False
    if kind in (None, "message"):
        return role == "assistant"
    return True


def _last_model_run(items: list[Any]) -> tuple[int, int] | None:
    """[start, end) of the last run of model-side items (None when there is none)."""
    end = len(items)
    while end > 0 and not _model_side(items[end - 1]):
        end -= 1
    if end == 0:
        return None
    start = end
    while start > 0 and _model_side(items[start - 1]):
        start -= 1
    return start, end


def _json(items: Any) -> str:
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"), default=_default)


def _default(value: Any) -> Any:
    # Items are TypedDicts, but callers sometimes hand over SDK models.
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__qualname__} is not JSON serializable")

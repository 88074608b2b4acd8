"""OpenAI Agents SDK session backed by ctxd (`pip install ctxd[agents]`).

    from agents import Agent, Runner
    from ctxd.agents import CtxdSession

    session = CtxdSession("user-42/support", ctxd.AsyncClient("localhost:50051"))
    await Runner.run(agent, "Hi", session=session)

`CtxdSession` implements the SDK's `agents.memory.session.Session` protocol (`get_items`,
`add_items`, `pop_item`, `clear_session`, the `session_id` and `session_settings` attributes)
and `OpenAIResponsesCompactionAwareSession` (`run_compaction(args)`), which the Runner calls after
each turn:

- `add_items`: one AppendMessage of the items as Responses input JSON (`native`,
  FORMAT_OPENAI_RESPONSES), with an idempotency key, so a retried call stores them once. ctxd
  keeps every item JSON-equal: reasoning with its `encrypted_content`, item ids, tool calls and
  outputs, server-side tool items.
- `get_items`: ListMessages with `format=FORMAT_OPENAI_RESPONSES`, paged; after a compaction, the
  summary (as ctxd renders it in Responses packs: a `system` message item) followed by the items
  after the summary's watermark. `limit` reads only the log's tail.
- `pop_item`: RewindConversation of the last message, guarded by `expected_last_sequence`. One
  ctxd message can hold several items (a model turn's reasoning and calls); then the message is
  rewound and its other items are appended again (guarded too), and the last item is returned.
- `clear_session`: DeleteConversation (an absent conversation is already clear).
- `run_compaction`: ctxd Summarize. The log stays whole (ListMessages shows every item); what
  the model is sent next (`get_items`) becomes the summary plus the recent items. By default
  the server's summarizer runs (`SUMMARIZE_MODE_SERVER`); pass `summarizer=` to run your own
  model on ctxd's prepared request (`SUMMARIZE_MODE_PREPARE` then `_PROVIDED`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from agents.items import TResponseInputItem
from agents.memory.openai_responses_compaction_session import (
    default_should_trigger_compaction,
    select_compaction_candidate_items,
)
from agents.memory.session import OpenAIResponsesCompactionArgs
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from . import errors
from .client import AsyncClient, Client
from .v1 import context_pb2, messages_pb2

__all__ = ["CtxdSession"]

RESPONSES = messages_pb2.FORMAT_OPENAI_RESPONSES
_PACK_TOKENS = 10_000_000  # BuildContext's largest budget: the summary is never cut

Summarizer = Callable[[context_pb2.PreparedRequest], "str | Awaitable[str]"]


class CtxdSession:
    """An Agents SDK session whose history is the ctxd conversation `session_id`.

    Args:
        session_id: The ctxd conversation id (1 to 256 bytes of printable ASCII).
        client: A `ctxd.AsyncClient` (or a `ctxd.Client`, whose calls then block the loop).
        session_settings: The SDK's SessionSettings (`limit`: the default of `get_items`).
        keep_recent_tokens: Summarize's verbatim window: history newer than this many tokens
            stays as items after a compaction (snapped back to a turn boundary).
        max_summary_tokens: Summarize's bound on the summary (0: the server's default).
        should_trigger_compaction: Decides whether an automatic `run_compaction` (the Runner
            calls it after each turn) summarizes; it gets the SDK's context dict
            (`response_id`, `compaction_mode`, `compaction_candidate_items`, `session_items`).
            Default: the SDK's own rule (10 or more candidate items since the last summary).
        summarizer: Bring your own model: called with ctxd's `PreparedRequest` (`rendered` is
            an OpenAI chat messages array) and returns the summary text (sync or async).
    """

    def __init__(
        self,
        session_id: str,
        client: AsyncClient | Client,
        *,
        session_settings: SessionSettings | None = None,
        keep_recent_tokens: int = 2000,
        max_summary_tokens: int = 0,
        should_trigger_compaction: Callable[[dict[str, Any]], bool] | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.session_id = session_id
        self.client = client
        self.session_settings = session_settings
        self.keep_recent_tokens = keep_recent_tokens
        self.max_summary_tokens = max_summary_tokens
        self.should_trigger_compaction = should_trigger_compaction or default_should_trigger_compaction
        self.summarizer = summarizer

    async def _rpc(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, name)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    # -- reading ---------------------------------------------------------------------------

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

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history: all items, or the latest `limit` (default `session_settings.limit`) in
        order; after a compaction, the summary item then the items after it."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
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

    # -- writing ---------------------------------------------------------------------------

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends the items natively, in one request (stored once, even when retried)."""
        if not items:
            return
        await self._rpc("append_message", self.session_id, native=_json(items), format=RESPONSES)

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes and returns the newest item (None when the session is empty)."""
        for _ in range(8):  # another writer moved the tail: read it again
            state = await self._state()
            if state is None:
                return None
            last = state[0]
            # The newest message that renders as an item (UI-only messages render as none).
            seq, items = last, []
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

    async def clear_session(self) -> None:
        """Deletes the conversation (its messages, summary, memory and idempotency records)."""
        try:
            await self._rpc("delete_conversation", self.session_id)
        except errors.NotFound:
            pass

    # -- compaction ------------------------------------------------------------------------

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Advances the conversation's summary with ctxd Summarize when `args["force"]` is set or
        `should_trigger_compaction` says so. The log is kept whole; `get_items` then returns
        the summary and the items after it. `response_id`, `compaction_mode` and `store` are
        passed to the decision hook; ctxd needs none of them (it summarizes its own log)."""
        args = args or {}
        if not args.get("force", False):
            session_items = await self.get_items()
            context = {
                "response_id": args.get("response_id"),
                "compaction_mode": args.get("compaction_mode", "input"),
                "compaction_candidate_items": select_compaction_candidate_items(session_items),
                "session_items": session_items,
            }
            if not self.should_trigger_compaction(context):
                return
        if self.summarizer is None:
            await self._rpc(
                "summarize",
                self.session_id,
                keep_recent_tokens=self.keep_recent_tokens,
                max_summary_tokens=self.max_summary_tokens,
            )
            return
        prepared = (
            await self._rpc(
                "summarize",
                self.session_id,
                mode="prepare",
                keep_recent_tokens=self.keep_recent_tokens,
                max_summary_tokens=self.max_summary_tokens,
            )
        ).prepared
        if prepared.through_sequence <= prepared.base_through_sequence:
            return  # nothing new to fold in
        text = self.summarizer(prepared)
        if inspect.isawaitable(text):
            text = await text
        await self._rpc(
            "summarize",
            self.session_id,
            mode="provided",
            summary_text=text,
            through_sequence=prepared.through_sequence,
            expected_through_sequence=prepared.base_through_sequence,
            expected_log_changes=prepared.log_changes,
            max_summary_tokens=self.max_summary_tokens,
        )


def _json(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"), default=_default)


def _default(value: Any) -> Any:
    # Items are TypedDicts, but callers sometimes hand over SDK models.
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__qualname__} is not JSON serializable")

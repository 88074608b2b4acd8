"""`ctxd.Client` (blocking) and `ctxd.AsyncClient` (asyncio, grpc.aio): one method per RPC of
ctxd.v1.ContextService with keyword arguments, returning the response messages.

Every method takes `timeout=` (seconds, the whole call including retries; default the client's)
and `metadata=` (extra call metadata). Failures raise `ctxd.errors.CtxdError` subclasses.

Both clients come from one definition: each method is written once, in `_Api`, as a coroutine
function (an async generator function for the iterators) whose I/O goes through its class's
transport; `ctxd._transport.Blocking` makes it Client's blocking method, `ctxd._transport.Asyncio`
leaves it AsyncClient's coroutine. `watch_changes` returns the state of a follow (its loop is an
async generator), which each transport wraps in its iterator: ChangeStream, AsyncChangeStream.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import grpc

from . import _requests as rq
from ._transport import (
    RETRY_SAFE,
    WATCH_RECONNECT,
    AsyncChangeStream,
    Asyncio,
    Blocking,
    ChangeStream,
    Deadline,
    Method,
    RetryPolicy,
    Transport,
    Watch,
    call_metadata,
    channel_options,
    credentials,
    retry_policy,
    trace_context,
)
from .errors import from_rpc_error
from .v1 import (
    context_pb2,
    context_service_pb2,
    context_service_pb2_grpc,
    conversations_pb2,
    memory_pb2,
    messages_pb2,
)

__all__ = ["Client", "AsyncClient", "ChangeStream", "AsyncChangeStream"]

_UNSET = rq._UNSET
Metadata = Sequence[tuple[str, str]]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")  # what the method returns on Client
A = TypeVar("A")  # and on AsyncClient
Ch = TypeVar("Ch")  # the channel: grpc.Channel or grpc.aio.Channel


class _Config:
    def __init__(
        self,
        target: str,
        api_key: str | None,
        tenant: str | None,
        timeout: float | None,
        retries: int | RetryPolicy | None,
        metadata: Metadata | None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.retry = retry_policy(retries)
        self.metadata = call_metadata(api_key, tenant, metadata)

    def plan(self, method: str, request: Any, timeout: float | None, metadata: Metadata | None):
        deadline = Deadline(self.timeout if timeout is None else timeout)
        md = self.metadata + tuple(metadata or ()) + trace_context()
        safe = method in RETRY_SAFE and not (
            method == "RewindConversation" and request.HasField("expected_last_sequence")
        )
        return deadline, md, (self.retry if safe else None)


class _Shared(Generic[P, S, A]):
    """A method of both clients, defined once: `impl`, a coroutine function (`_shared`), an
    async generator function (`_shared_iterator`) or a function returning a Watch
    (`_shared_watch`). `_Api.__init_subclass__` puts on each client class the real function its
    transport makes of `impl` (with the transport's `_method`, `_iterator` or `_watch`: `kind`),
    so each class has plain functions, as if written out; the overloads of `__get__` tell a type
    checker what that method is: on Client, one returning S (R, Iterator[R], ChangeStream), on
    AsyncClient one returning A (`impl`'s own type, or AsyncChangeStream)."""

    def __init__(self, impl: Callable[Concatenate[Any, P], Any], kind: str) -> None:
        self.impl = impl
        self.kind = kind

    def method_of(self, owner: type[Transport]) -> Method:
        return getattr(owner, self.kind)(self.impl, owner)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _Shared[P, S, A]: ...
    @overload
    def __get__(self, obj: Blocking, owner: type[Any] | None = None) -> Callable[P, S]: ...
    @overload
    def __get__(self, obj: Asyncio, owner: type[Any] | None = None) -> Callable[P, A]: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else self.method_of(type(obj)).__get__(obj, owner)


def _shared(impl: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> _Shared[P, R, Coroutine[Any, Any, R]]:
    return _Shared(impl, "_method")


def _shared_iterator(
    impl: Callable[Concatenate[Any, P], AsyncIterator[R]],
) -> _Shared[P, Iterator[R], AsyncIterator[R]]:
    return _Shared(impl, "_iterator")


def _shared_watch(impl: Callable[Concatenate[Any, P], Watch]) -> _Shared[P, ChangeStream, AsyncChangeStream]:
    return _Shared(impl, "_watch")


class _Api(Transport, Generic[Ch]):
    """The methods of Client and AsyncClient, each written once (see the module's docstring)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, shared in vars(_Api).items():
            # Only where the class would find the shared definition (not its own or an override).
            if isinstance(shared, _Shared) and inspect.getattr_static(cls, name) is shared:
                setattr(cls, name, shared.method_of(cls))

    def __init__(
        self,
        target: str,
        api_key: str | None = None,
        *,
        tenant: str | None = None,
        timeout: float | None = 30.0,
        retries: int | RetryPolicy | None = 3,
        tls: bool | grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
        interceptors: Sequence[Any] | None = None,
        metadata: Metadata | None = None,
        channel: Ch | None = None,
    ) -> None:
        self._config = _Config(target, api_key, tenant, timeout, retries, metadata)
        self._owns_channel = channel is None
        if channel is None:
            channel = self._open(target, credentials(tls), channel_options(options), list(interceptors or ()))
        self.channel: Ch = self._adopt(channel, list(interceptors or ()))
        self.stub = context_service_pb2_grpc.ContextServiceStub(self.channel)

    async def _call(self, method: str, request: Any, timeout: float | None, metadata: Metadata | None) -> Any:
        deadline, md, policy = self._config.plan(method, request, timeout, metadata)
        rpc = getattr(self.stub, method)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._invoke(rpc, request, deadline.remaining(), md)
            except grpc.RpcError as error:
                code = error.code() if callable(getattr(error, "code", None)) else None
                if policy is not None and attempt < policy.max_attempts and code in policy.codes:
                    pause = policy.backoff(attempt)
                    if deadline.allows(pause):
                        await self._pause(pause)
                        continue
                raise from_rpc_error(error, method) from error

    async def _follow_changes(
        self,
        watch: Watch,
        conversation_id: str,
        include_messages: bool,
        reconnect: RetryPolicy | None,
        deadline: Deadline,
        md: tuple[tuple[str, str], ...],
    ) -> AsyncIterator[conversations_pb2.Change]:
        """The loop of `watch_changes`: one WatchChanges call after another, each resuming from
        `watch.cursor`, which each change handed out and each heartbeat moves."""
        failures = 0  # attempts in a row that made no progress
        while not watch.closed:
            request = conversations_pb2.WatchChangesRequest(
                after_cursor=watch.cursor, conversation_id=conversation_id, include_messages=include_messages
            )
            error: grpc.RpcError | None = None
            received = 0
            call = watch.call = self.stub.WatchChanges(request, timeout=deadline.remaining(), metadata=md)
            try:
                if watch.closed:  # closed from another thread while it was opened
                    return
                while (response := await self._receive(call)) is not None:
                    received += 1
                    if response.changes or received > 1:
                        failures = 0  # progress: a stream's opening heartbeat alone is none
                    for change in response.changes:
                        watch.cursor = change.cursor
                        yield change
                    if response.HasField("heartbeat"):
                        watch.cursor = response.heartbeat.cursor
            except grpc.RpcError as e:
                error = e
            finally:
                watch.call = None
                call.cancel()
            if watch.closed:
                return
            # The stream failed (error) or the server ended it (None): reconnect, or say why not.
            code = error.code() if error is not None and callable(getattr(error, "code", None)) else None
            if error is not None and (reconnect is None or code not in reconnect.codes):
                raise from_rpc_error(error, "WatchChanges") from error
            failures += 1
            pause = 0.0 if reconnect is None else reconnect.backoff(failures)
            if reconnect is None or failures >= reconnect.max_attempts or not deadline.allows(pause):
                if error is not None:
                    raise from_rpc_error(error, "WatchChanges") from error
                return
            await self._pause(pause)

    # -- messages ----------------------------------------------------------------------------

    @_shared
    async def append_message(
        self,
        conversation_id: str,
        messages: Iterable[rq.MessageLike] | None = None,
        *,
        native: Any = None,
        format: Any = None,
        idempotency_key: str | None = None,
        expected_last_sequence: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_service_pb2.AppendMessageResponse:
        """Appends `messages` (Message or dicts, see `ctxd.message`) or `native` provider JSON
        (an SDK object, items, or plain data with `format`). An idempotency key is generated
        when none is given, so retries store the messages once."""
        req = rq.append_message(
            conversation_id,
            messages,
            native=native,
            format=format,
            idempotency_key=idempotency_key,
            expected_last_sequence=expected_last_sequence,
        )
        return await self._call("AppendMessage", req, timeout, metadata)

    @_shared
    async def append_native(
        self,
        conversation_id: str,
        obj: Any,
        format: Any = None,
        *,
        idempotency_key: str | None = None,
        expected_last_sequence: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_service_pb2.AppendMessageResponse:
        """Appends a provider object natively: an openai ChatCompletion / Response / list of
        Responses items, an anthropic Message, a google-genai GenerateContentResponse / list of
        Content, or plain dicts / lists / JSON text with `format` (docs/native.md)."""
        return await _Api.append_message.impl(
            self,
            conversation_id,
            native=obj,
            format=format,
            idempotency_key=idempotency_key,
            expected_last_sequence=expected_last_sequence,
            timeout=timeout,
            metadata=metadata,
        )

    @_shared
    async def list_messages(
        self,
        conversation_id: str,
        *,
        after_sequence: int = 0,
        page_size: int = 0,
        format: Any = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_service_pb2.ListMessagesResponse:
        """One page of the log; with `format`, also `rendered` (the page as that provider's history)."""
        req = rq.list_messages(conversation_id, after_sequence=after_sequence, page_size=page_size, format=format)
        return await self._call("ListMessages", req, timeout, metadata)

    @_shared_iterator
    async def iter_pages(
        self,
        conversation_id: str,
        *,
        after_sequence: int = 0,
        page_size: int = 1000,
        format: Any = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncIterator[context_service_pb2.ListMessagesResponse]:
        """Every page after `after_sequence`, following `next_after_sequence`."""
        while True:
            page = await _Api.list_messages.impl(
                self,
                conversation_id,
                after_sequence=after_sequence,
                page_size=page_size,
                format=format,
                timeout=timeout,
                metadata=metadata,
            )
            yield page
            if not page.next_after_sequence:
                return
            after_sequence = page.next_after_sequence

    @_shared_iterator
    async def iter_messages(self, conversation_id: str, **kwargs: Any) -> AsyncIterator[messages_pb2.Message]:
        """Every message after `after_sequence` (keyword arguments as `iter_pages`)."""
        async for page in _Api.iter_pages.impl(self, conversation_id, **kwargs):
            for message in page.messages:
                yield message

    @_shared
    async def build_context(
        self,
        conversation_id: str,
        *,
        max_tokens: int | None = None,
        budget: context_pb2.Budget | Mapping[str, Any] | None = None,
        reserve_output_tokens: int = 0,
        max_messages: int = 0,
        max_turns: int = 0,
        format: Any = None,
        tokenizer: Any = None,
        system_prompt: str = "",
        pending_messages: Iterable[rq.MessageLike] = (),
        omit_summary: bool = False,
        omit_working_memory: bool = False,
        tool_output_max_tokens: int = 0,
        history_policy: Any = None,
        reasoning: Any = None,
        final_assistant: Any = None,
        omit_messages: bool = False,
        clear_tool_results: context_pb2.ClearToolResults | Mapping[str, Any] | None = None,
        recall: context_pb2.Recall | Mapping[str, Any] | bool | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_pb2.BuildContextResponse:
        """The pack for the next LLM call. Enums take their value, full name, or short name
        (`format="gemini"`, `reasoning="all"`, `history_policy="newest"`)."""
        req = rq.build_context(
            conversation_id,
            max_tokens=max_tokens,
            budget=budget,
            reserve_output_tokens=reserve_output_tokens,
            max_messages=max_messages,
            max_turns=max_turns,
            format=format,
            tokenizer=tokenizer,
            system_prompt=system_prompt,
            pending_messages=pending_messages,
            omit_summary=omit_summary,
            omit_working_memory=omit_working_memory,
            tool_output_max_tokens=tool_output_max_tokens,
            history_policy=history_policy,
            reasoning=reasoning,
            final_assistant=final_assistant,
            omit_messages=omit_messages,
            clear_tool_results=clear_tool_results,
            recall=recall,
        )
        return await self._call("BuildContext", req, timeout, metadata)

    @_shared
    async def search_messages(
        self,
        conversation_id: str,
        query: str,
        *,
        page_size: int = 0,
        roles: Iterable[Any] = (),
        tool_names: Iterable[str] = (),
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_service_pb2.SearchMessagesResponse:
        """Earlier messages that match `query` (full-text relevance), best first; pass
        `next_page_token` as `page_token` for the next page. `roles` take `"user"` or `Role`."""
        req = rq.search_messages(
            conversation_id, query, page_size=page_size, roles=roles, tool_names=tool_names, page_token=page_token
        )
        return await self._call("SearchMessages", req, timeout, metadata)

    @_shared
    async def count_tokens(
        self, text: str, *, tokenizer: Any = None, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.CountTokensResponse:
        req = rq.count_tokens(text, tokenizer=tokenizer)
        return await self._call("CountTokens", req, timeout, metadata)

    # -- summary and memory ------------------------------------------------------------------

    @_shared
    async def summarize(
        self,
        conversation_id: str,
        *,
        mode: Any = None,
        keep_recent_tokens: int = 0,
        tokenizer: Any = None,
        summary_text: str = "",
        through_sequence: int = 0,
        expected_through_sequence: int | None = None,
        expected_log_changes: int | None = None,
        max_summary_tokens: int = 0,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> context_pb2.SummarizeResponse:
        """Advances the rolling summary: mode `"server"` (default), `"prepare"` or `"provided"`.

        With `"provided"`, pass the `prepared` request's `base_through_sequence` as
        `expected_through_sequence` and its `log_changes` as `expected_log_changes`: the call is
        refused (ABORTED) if the watermark moved or messages were redacted or rewound since the
        PREPARE. Without `expected_log_changes`, a first summary of a conversation that was ever
        redacted or rewound is refused the same way."""
        req = rq.summarize(
            conversation_id,
            mode=mode,
            keep_recent_tokens=keep_recent_tokens,
            tokenizer=tokenizer,
            summary_text=summary_text,
            through_sequence=through_sequence,
            expected_through_sequence=expected_through_sequence,
            expected_log_changes=expected_log_changes,
            max_summary_tokens=max_summary_tokens,
        )
        return await self._call("Summarize", req, timeout, metadata)

    @_shared
    async def get_working_memory(
        self,
        conversation_id: str,
        *,
        refresh: bool = False,
        prepare: bool = False,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> memory_pb2.GetWorkingMemoryResponse:
        req = rq.get_working_memory(conversation_id, refresh=refresh, prepare=prepare)
        return await self._call("GetWorkingMemory", req, timeout, metadata)

    @_shared
    async def update_working_memory(
        self,
        conversation_id: str,
        memory: memory_pb2.WorkingMemory | Mapping[str, Any],
        *,
        expected_version: int | None = None,
        expected_log_changes: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> memory_pb2.UpdateWorkingMemoryResponse:
        """Merges `memory` (bring your own LLM); ABORTED if `expected_version` is given and the
        stored version differs. For items from a prepared extraction (`get_working_memory(...,
        prepare=True)`), pass its `prepared.log_changes` as `expected_log_changes`: ABORTED if
        messages were redacted or rewound since. Without it, a first memory of a conversation that
        was ever redacted or rewound is refused the same way."""
        req = rq.update_working_memory(
            conversation_id, memory, expected_version=expected_version, expected_log_changes=expected_log_changes
        )
        return await self._call("UpdateWorkingMemory", req, timeout, metadata)

    # -- changes ---------------------------------------------------------------------------

    @_shared_watch
    def watch_changes(
        self,
        after_cursor: str | None = None,
        conversation_id: str | None = None,
        include_messages: bool = False,
        *,
        reconnect: RetryPolicy | None = WATCH_RECONNECT,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> Watch:
        """Follows the tenant's changes (or `conversation_id`'s) after `after_cursor` (None: from
        now): an iterator of `Change` messages (ChangeStream; AsyncChangeStream on AsyncClient),
        each conversation's in commit order, at least once. The stream opens on the first
        iteration.

        It reconnects by itself when the stream fails with a code of `reconnect.codes`
        (UNAVAILABLE: the server shutting down, a lost connection) or ends, resuming from the
        last cursor seen (a change's or a heartbeat's; heartbeats are not handed out), waiting
        `reconnect`'s backoff between attempts that made no progress (received no change, nor a
        heartbeat after the one each stream opens with); `reconnect.max_attempts` such attempts
        in a row raise the last error. `reconnect=None`: no reconnecting. Other
        errors raise: `errors.OutOfRange` (reason CURSOR_EXPIRED, `oldest_cursor`) when the cursor
        is older than the changes the server keeps: resync, then watch from now.

        `.cursor` is where the stream stands: persist it after handling the changes handed out,
        and pass it as `after_cursor` to go on. `close()` (`await aclose()`) cancels the stream.
        `timeout` bounds the whole watch (default None: no deadline, whatever the client's)."""
        watch = Watch(after_cursor or "")
        md = self._config.metadata + tuple(metadata or ()) + trace_context()
        watch.items = self._follow_changes(
            watch, conversation_id or "", include_messages, reconnect, Deadline(timeout), md
        )
        return watch

    # -- conversations -----------------------------------------------------------------------

    @_shared
    async def get_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.GetConversationResponse:
        req = rq.get_conversation(conversation_id)
        return await self._call("GetConversation", req, timeout, metadata)

    @_shared
    async def update_conversation(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        status: Any = None,
        labels: Mapping[str, str] | None = None,
        expire_time: Any = _UNSET,
        allow_missing: bool = False,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> conversations_pb2.UpdateConversationResponse:
        """Sets the fields given (the update mask is what you pass; `expire_time=None` clears it)."""
        req = rq.update_conversation(
            conversation_id,
            title=title,
            status=status,
            labels=labels,
            expire_time=expire_time,
            allow_missing=allow_missing,
        )
        return await self._call("UpdateConversation", req, timeout, metadata)

    @_shared
    async def list_conversations(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        labels: Mapping[str, str] | None = None,
        status: Any = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> conversations_pb2.ListConversationsResponse:
        req = rq.list_conversations(page_size=page_size, page_token=page_token, labels=labels, status=status)
        return await self._call("ListConversations", req, timeout, metadata)

    @_shared_iterator
    async def iter_conversations(
        self, *, labels: Mapping[str, str] | None = None, status: Any = None, **kwargs: Any
    ) -> AsyncIterator[conversations_pb2.Conversation]:
        """Every conversation with `labels` (and `status`), following the page tokens."""
        page_token = ""
        while True:
            page = await _Api.list_conversations.impl(self, page_token=page_token, labels=labels, status=status, **kwargs)
            for conversation in page.conversations:
                yield conversation
            page_token = page.next_page_token
            if not page_token:
                return

    @_shared
    async def delete_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.DeleteConversationResponse:
        req = rq.delete_conversation(conversation_id)
        return await self._call("DeleteConversation", req, timeout, metadata)

    @_shared
    async def fork_conversation(
        self,
        conversation_id: str,
        *,
        through_sequence: int,
        new_conversation_id: str,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> conversations_pb2.ForkConversationResponse:
        req = rq.fork_conversation(
            conversation_id, through_sequence=through_sequence, new_conversation_id=new_conversation_id
        )
        return await self._call("ForkConversation", req, timeout, metadata)

    @_shared
    async def redact_message(
        self, conversation_id: str, sequence: int, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.RedactMessageResponse:
        req = rq.redact_message(conversation_id, sequence)
        return await self._call("RedactMessage", req, timeout, metadata)

    @_shared
    async def rewind_conversation(
        self,
        conversation_id: str,
        *,
        after_sequence: int,
        expected_last_sequence: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> conversations_pb2.RewindConversationResponse:
        req = rq.rewind_conversation(
            conversation_id, after_sequence=after_sequence, expected_last_sequence=expected_last_sequence
        )
        return await self._call("RewindConversation", req, timeout, metadata)


class Client(Blocking, _Api[grpc.Channel]):
    """A blocking ctxd client.

    Args:
        target: `host:port` of the gRPC port.
        api_key: Sent as `authorization: Bearer <key>`.
        tenant: Sent as `x-tenant-id` (the tenant when auth is off; must agree with the key's).
        timeout: Default deadline of each call, retries included (None: no deadline).
        retries: Retries of UNAVAILABLE for calls safe to repeat (an int, a RetryPolicy, or
            None/0 for none). Appends carry an idempotency key (generated when not given), so a
            retried append is stored once.
        tls: True for TLS with the system roots, or grpc.ChannelCredentials (mutual TLS).
        options: Extra or overriding gRPC channel options.
        interceptors: grpc client interceptors.
        metadata: Metadata sent with every call.
        channel: An existing channel to use instead (target then only names it).
    """

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(Asyncio, _Api[grpc.aio.Channel]):
    """The asyncio client (grpc.aio): the same methods and arguments as `Client`, as
    coroutines (`iter_pages` / `iter_messages` are async iterators). Create it inside the event
    loop that uses it; `await client.close()` (or `async with`) when done."""

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

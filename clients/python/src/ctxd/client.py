"""`ctxd.Client` (blocking) and `ctxd.AsyncClient` (asyncio, grpc.aio): one method per RPC of
ctxd.v1.ContextService with keyword arguments, returning the response messages.

Every method takes `timeout=` (seconds, the whole call including retries; default the client's)
and `metadata=` (extra call metadata). Failures raise `ctxd.errors.CtxdError` subclasses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import grpc

from . import _requests as rq
from ._transport import (
    RETRY_SAFE,
    Deadline,
    RetryPolicy,
    call_metadata,
    channel_options,
    credentials,
    retry_policy,
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

__all__ = ["Client", "AsyncClient"]

_UNSET = rq._UNSET
Metadata = Sequence[tuple[str, str]]


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
        md = self.metadata + tuple(metadata or ())
        safe = method in RETRY_SAFE and not (
            method == "RewindConversation" and request.HasField("expected_last_sequence")
        )
        return deadline, md, (self.retry if safe else None)


class Client:
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
        channel: grpc.Channel | None = None,
    ) -> None:
        self._config = _Config(target, api_key, tenant, timeout, retries, metadata)
        if channel is None:
            creds = credentials(tls)
            opts = channel_options(options)
            channel = (
                grpc.secure_channel(target, creds, opts) if creds else grpc.insecure_channel(target, opts)
            )
            self._owns_channel = True
        else:
            self._owns_channel = False
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self.channel = channel
        self.stub = context_service_pb2_grpc.ContextServiceStub(channel)

    # -- plumbing ----------------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, request: Any, timeout: float | None, metadata: Metadata | None) -> Any:
        deadline, md, policy = self._config.plan(method, request, timeout, metadata)
        rpc = getattr(self.stub, method)
        attempt = 0
        while True:
            attempt += 1
            try:
                return rpc(request, timeout=deadline.remaining(), metadata=md)
            except grpc.RpcError as error:
                code = error.code() if callable(getattr(error, "code", None)) else None
                if policy is not None and attempt < policy.max_attempts and code in policy.codes:
                    pause = policy.backoff(attempt)
                    if deadline.allows(pause):
                        time.sleep(pause)
                        continue
                raise from_rpc_error(error, method) from error

    # -- messages ----------------------------------------------------------------------------

    def append_message(
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
        return self._call("AppendMessage", req, timeout, metadata)

    def append_native(
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
        return self.append_message(
            conversation_id,
            native=obj,
            format=format,
            idempotency_key=idempotency_key,
            expected_last_sequence=expected_last_sequence,
            timeout=timeout,
            metadata=metadata,
        )

    def list_messages(
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
        return self._call("ListMessages", req, timeout, metadata)

    def iter_pages(
        self,
        conversation_id: str,
        *,
        after_sequence: int = 0,
        page_size: int = 1000,
        format: Any = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> Iterator[context_service_pb2.ListMessagesResponse]:
        """Every page after `after_sequence`, following `next_after_sequence`."""
        while True:
            page = self.list_messages(
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

    def iter_messages(self, conversation_id: str, **kwargs: Any) -> Iterator[messages_pb2.Message]:
        """Every message after `after_sequence` (keyword arguments as `iter_pages`)."""
        for page in self.iter_pages(conversation_id, **kwargs):
            yield from page.messages

    def build_context(
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
        return self._call("BuildContext", req, timeout, metadata)

    def search_messages(
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
        return self._call("SearchMessages", req, timeout, metadata)

    def count_tokens(
        self, text: str, *, tokenizer: Any = None, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.CountTokensResponse:
        req = rq.count_tokens(text, tokenizer=tokenizer)
        return self._call("CountTokens", req, timeout, metadata)

    # -- summary and memory ------------------------------------------------------------------

    def summarize(
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
        return self._call("Summarize", req, timeout, metadata)

    def get_working_memory(
        self,
        conversation_id: str,
        *,
        refresh: bool = False,
        prepare: bool = False,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> memory_pb2.GetWorkingMemoryResponse:
        req = rq.get_working_memory(conversation_id, refresh=refresh, prepare=prepare)
        return self._call("GetWorkingMemory", req, timeout, metadata)

    def update_working_memory(
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
        return self._call("UpdateWorkingMemory", req, timeout, metadata)

    # -- conversations -----------------------------------------------------------------------

    def get_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.GetConversationResponse:
        req = rq.get_conversation(conversation_id)
        return self._call("GetConversation", req, timeout, metadata)

    def update_conversation(
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
        return self._call("UpdateConversation", req, timeout, metadata)

    def list_conversations(
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
        return self._call("ListConversations", req, timeout, metadata)

    def delete_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.DeleteConversationResponse:
        req = rq.delete_conversation(conversation_id)
        return self._call("DeleteConversation", req, timeout, metadata)

    def fork_conversation(
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
        return self._call("ForkConversation", req, timeout, metadata)

    def redact_message(
        self, conversation_id: str, sequence: int, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.RedactMessageResponse:
        req = rq.redact_message(conversation_id, sequence)
        return self._call("RedactMessage", req, timeout, metadata)

    def rewind_conversation(
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
        return self._call("RewindConversation", req, timeout, metadata)


class AsyncClient:
    """The asyncio client (grpc.aio): the same methods and arguments as `Client`, as
    coroutines (`iter_pages` / `iter_messages` are async iterators). Create it inside the event
    loop that uses it; `await client.close()` (or `async with`) when done."""

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
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self._config = _Config(target, api_key, tenant, timeout, retries, metadata)
        if channel is None:
            creds = credentials(tls)
            opts = channel_options(options)
            ics = list(interceptors or ())
            channel = (
                grpc.aio.secure_channel(target, creds, opts, interceptors=ics)
                if creds
                else grpc.aio.insecure_channel(target, opts, interceptors=ics)
            )
            self._owns_channel = True
        else:
            self._owns_channel = False
        self.channel = channel
        self.stub = context_service_pb2_grpc.ContextServiceStub(channel)

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _call(self, method: str, request: Any, timeout: float | None, metadata: Metadata | None) -> Any:
        deadline, md, policy = self._config.plan(method, request, timeout, metadata)
        rpc = getattr(self.stub, method)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await rpc(request, timeout=deadline.remaining(), metadata=md)
            except grpc.RpcError as error:
                code = error.code() if callable(getattr(error, "code", None)) else None
                if policy is not None and attempt < policy.max_attempts and code in policy.codes:
                    pause = policy.backoff(attempt)
                    if deadline.allows(pause):
                        await asyncio.sleep(pause)
                        continue
                raise from_rpc_error(error, method) from error

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
        req = rq.append_message(
            conversation_id,
            messages,
            native=native,
            format=format,
            idempotency_key=idempotency_key,
            expected_last_sequence=expected_last_sequence,
        )
        return await self._call("AppendMessage", req, timeout, metadata)

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
        return await self.append_message(
            conversation_id,
            native=obj,
            format=format,
            idempotency_key=idempotency_key,
            expected_last_sequence=expected_last_sequence,
            timeout=timeout,
            metadata=metadata,
        )

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
        req = rq.list_messages(conversation_id, after_sequence=after_sequence, page_size=page_size, format=format)
        return await self._call("ListMessages", req, timeout, metadata)

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
        while True:
            page = await self.list_messages(
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

    async def iter_messages(self, conversation_id: str, **kwargs: Any) -> AsyncIterator[messages_pb2.Message]:
        async for page in self.iter_pages(conversation_id, **kwargs):
            for message in page.messages:
                yield message

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

    async def count_tokens(
        self, text: str, *, tokenizer: Any = None, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.CountTokensResponse:
        req = rq.count_tokens(text, tokenizer=tokenizer)
        return await self._call("CountTokens", req, timeout, metadata)

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

    async def get_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.GetConversationResponse:
        req = rq.get_conversation(conversation_id)
        return await self._call("GetConversation", req, timeout, metadata)

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
        req = rq.update_conversation(
            conversation_id,
            title=title,
            status=status,
            labels=labels,
            expire_time=expire_time,
            allow_missing=allow_missing,
        )
        return await self._call("UpdateConversation", req, timeout, metadata)

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

    async def delete_conversation(
        self, conversation_id: str, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> context_service_pb2.DeleteConversationResponse:
        req = rq.delete_conversation(conversation_id)
        return await self._call("DeleteConversation", req, timeout, metadata)

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

    async def redact_message(
        self, conversation_id: str, sequence: int, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> conversations_pb2.RedactMessageResponse:
        req = rq.redact_message(conversation_id, sequence)
        return await self._call("RedactMessage", req, timeout, metadata)

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

"""Channel, metadata, deadlines and retries shared by Client and AsyncClient, and the two
transports, the only place where the blocking client and the asyncio one differ."""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import time
import types
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from . import __version__

try:  # Optional: the `otel` extra.
    from opentelemetry import propagate as _propagate
except ImportError:  # pragma: no cover - exercised where opentelemetry is absent
    _propagate = None  # type: ignore[assignment]


MiB = 1024 * 1024

#: Channel options every client channel gets (override or extend with `options=`). The receive
#: limit sits above the server's response limit (CTXD_MAX_RESPONSE_BYTES, 16 MiB by default);
#: gRPC's own retries are off because the client retries itself (see RetryPolicy).
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", 64 * MiB),
    ("grpc.max_send_message_length", 64 * MiB),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
    ("grpc.primary_user_agent", f"ctxd-python/{__version__}"),
)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of a failed call whose status is in `codes` (UNAVAILABLE: the server or its
    database could not be reached), with exponential backoff and jitter, within the call's
    deadline. Only calls that are safe to repeat are retried: reads, appends (always sent with
    an idempotency key), conversation updates, redactions, deletions and unguarded rewinds; never
    Summarize, UpdateWorkingMemory, ForkConversation or a rewind with `expected_last_sequence`.
    """

    max_attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    codes: frozenset[grpc.StatusCode] = field(default_factory=lambda: frozenset({grpc.StatusCode.UNAVAILABLE}))

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1): full jitter."""
        ceiling = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)

# Methods that may be sent again after a failure that may have reached the server.
RETRY_SAFE = frozenset(
    {
        "AppendMessage",
        "BuildContext",
        "ListMessages",
        "CountTokens",
        "ListConversations",
        "GetConversation",
        "UpdateConversation",
        "GetWorkingMemory",
        "RedactMessage",
        "DeleteConversation",
        "RewindConversation",
        "SearchMessages",
    }
)


def retry_policy(retries: int | RetryPolicy | None) -> RetryPolicy:
    if retries is None:
        return NO_RETRY
    if isinstance(retries, RetryPolicy):
        return retries
    if retries < 0:
        raise ValueError("retries must be >= 0")
    return RetryPolicy(max_attempts=retries + 1)


def call_metadata(
    api_key: str | None, tenant: str | None, extra: Sequence[tuple[str, str]] | None
) -> tuple[tuple[str, str], ...]:
    md: list[tuple[str, str]] = []
    if api_key:
        md.append(("authorization", f"Bearer {api_key}"))
    if tenant:
        md.append(("x-tenant-id", tenant))
    md.extend(extra or ())
    return tuple(md)


def trace_context() -> tuple[tuple[str, str], ...]:
    """The caller's OpenTelemetry trace context as W3C metadata (`traceparent`, `tracestate`),
    when `opentelemetry-api` is installed (the `otel` extra) and a span is current: ctxd's spans
    for the call then join the caller's trace. Without it, nothing."""
    if _propagate is None:
        return ()
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return tuple(carrier.items())


def channel_options(options: Sequence[tuple[str, Any]] | None) -> list[tuple[str, Any]]:
    merged = dict(DEFAULT_CHANNEL_OPTIONS)
    merged.update(dict(options or ()))
    return list(merged.items())


def credentials(tls: bool | grpc.ChannelCredentials | None) -> grpc.ChannelCredentials | None:
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    return tls


class Deadline:
    """The overall deadline of one logical call, spread over its attempts."""

    def __init__(self, timeout: float | None) -> None:
        self.at = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def allows(self, pause: float) -> bool:
        return self.at is None or time.monotonic() + pause < self.at


# -- the transports ---------------------------------------------------------------------------
# Every client method is written once, as a coroutine (or an async generator), in
# ctxd.client._Api; its I/O goes through `_invoke` (one attempt of an RPC) and `_pause` (the
# backoff between attempts). The transport a client class mixes in supplies those two, makes the
# channel, and turns each shared definition into that class's method:
#  - Blocking (Client): `_invoke` calls grpc's blocking stub and `_pause` is time.sleep, so the
#    shared coroutine never suspends; the method runs it to the end at once (`complete`) and
#    returns the response (the iterators: a generator that runs each step so).
#  - Asyncio (AsyncClient): `_invoke` awaits grpc.aio and `_pause` is asyncio.sleep; the method
#    is the shared coroutine function itself.

T = TypeVar("T")
Method = Callable[..., Any]


def complete(step: Awaitable[T]) -> T:
    """The value of `step`, an awaitable whose awaits all finish at once (a Blocking client's)."""
    steps = step.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    steps.close()
    raise RuntimeError("a blocking ctxd call waited for an event loop")


def _owned_by(method: Method, owner: type) -> Method:
    method.__qualname__ = f"{owner.__qualname__}.{method.__name__}"
    return method


class Transport:
    """What a client class's transport supplies to the shared methods (see the comment above):
    `_open` a channel (`_adopt` one given or opened), `_invoke` one attempt of an RPC, `_pause`
    between attempts, and the class's `_method` (`_iterator`) for a shared coroutine function
    (async generator function) `impl`."""

    _open: Callable[[str, grpc.ChannelCredentials | None, list[tuple[str, Any]], Sequence[Any]], Any]
    _adopt: Callable[[Any, Sequence[Any]], Any]
    _invoke: Callable[[Any, Any, float | None, Sequence[tuple[str, str]]], Awaitable[Any]]
    _pause: Callable[[float], Awaitable[None]]
    _method: Callable[[Method, type], Method]
    _iterator: Callable[[Method, type], Method]


class Blocking(Transport):
    """The blocking transport (ctxd.Client): grpc's channel, calls that block."""

    @staticmethod
    def _open(target: str, creds: Any, opts: list[tuple[str, Any]], interceptors: Sequence[Any]) -> grpc.Channel:
        return grpc.secure_channel(target, creds, opts) if creds else grpc.insecure_channel(target, opts)

    @staticmethod
    def _adopt(channel: grpc.Channel, interceptors: Sequence[Any]) -> grpc.Channel:
        # Interceptors wrap the channel, whether opened here or given.
        return grpc.intercept_channel(channel, *interceptors) if interceptors else channel

    @staticmethod
    async def _invoke(rpc: Any, request: Any, timeout: float | None, metadata: Sequence[tuple[str, str]]) -> Any:
        return rpc(request, timeout=timeout, metadata=metadata)

    @staticmethod
    async def _pause(seconds: float) -> None:
        time.sleep(seconds)  # noqa: ASYNC251 (the blocking client's pause blocks)

    @staticmethod
    def _method(impl: Method, owner: type) -> Method:
        @functools.wraps(impl)
        def method(*args: Any, **kwargs: Any) -> Any:
            return complete(impl(*args, **kwargs))

        return _owned_by(method, owner)

    @staticmethod
    def _iterator(impl: Method, owner: type) -> Method:
        @functools.wraps(impl)
        def method(*args: Any, **kwargs: Any) -> Iterator[Any]:
            items = impl(*args, **kwargs)
            try:
                while True:
                    try:
                        item = complete(items.__anext__())
                    except StopAsyncIteration:
                        return
                    yield item
            finally:
                complete(items.aclose())

        # Its annotation says what it returns here: Iterator[X] for the shared AsyncIterator[X].
        returns = str(impl.__annotations__["return"]).removeprefix("Async")
        method.__annotations__ = {**impl.__annotations__, "return": returns}
        method.__signature__ = inspect.signature(impl).replace(return_annotation=returns)  # type: ignore[attr-defined]
        return _owned_by(method, owner)


class Asyncio(Transport):
    """The asyncio transport (ctxd.AsyncClient): grpc.aio's channel, calls that are awaited."""

    @staticmethod
    def _open(target: str, creds: Any, opts: list[tuple[str, Any]], interceptors: Sequence[Any]) -> grpc.aio.Channel:
        ics = list(interceptors)
        if creds:
            return grpc.aio.secure_channel(target, creds, opts, interceptors=ics)
        return grpc.aio.insecure_channel(target, opts, interceptors=ics)

    @staticmethod
    def _adopt(channel: grpc.aio.Channel, interceptors: Sequence[Any]) -> grpc.aio.Channel:
        # grpc.aio takes interceptors only when a channel is made: a given channel is used as is.
        return channel

    @staticmethod
    async def _invoke(rpc: Any, request: Any, timeout: float | None, metadata: Sequence[tuple[str, str]]) -> Any:
        return await rpc(request, timeout=timeout, metadata=metadata)

    @staticmethod
    async def _pause(seconds: float) -> None:
        await asyncio.sleep(seconds)

    @staticmethod
    def _method(impl: Method, owner: type) -> Method:
        # The shared function itself, copied to be named as the owner's.
        method = types.FunctionType(impl.__code__, impl.__globals__, impl.__name__, impl.__defaults__, impl.__closure__)
        method.__kwdefaults__ = impl.__kwdefaults__
        return _owned_by(functools.update_wrapper(method, impl), owner)

    _iterator = _method

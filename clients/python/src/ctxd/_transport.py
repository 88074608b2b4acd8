"""Channel, metadata, deadlines and retries shared by Client and AsyncClient, and the two
transports, the only place where the blocking client and the asyncio one differ."""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import sys
import threading
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from . import __version__
from .errors import CtxdError
from .v1 import conversations_pb2

try:  # Optional: the `otel` extra.
    from opentelemetry import propagate as _propagate
except ImportError:  # pragma: no cover - exercised where opentelemetry is absent
    _propagate = None  # type: ignore[assignment]


MiB = 1024 * 1024

#: Channel options every client channel gets (override or extend with `options=`). The receive
#: limit sits above the server's response limit (CTXD_MAX_RESPONSE_BYTES, 16 MiB by default);
#: gRPC's own retries are off because the client retries itself (see RetryPolicy). The channel's
#: reconnect backoff is capped at 5 s (gRPC's default grows to 120 s), so that a watch (or a
#: retried call) reaches a server that is back within its own backoff.
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", 64 * MiB),
    ("grpc.max_send_message_length", 64 * MiB),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
    ("grpc.max_reconnect_backoff_ms", 5_000),
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
        # The exponent is bounded so that a watch reconnecting for hours cannot overflow a float.
        ceiling = min(self.max_backoff, self.initial_backoff * self.multiplier ** min(attempt - 1, 64))
        return random.uniform(ceiling / 2, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)

#: How `watch_changes` reconnects unless told otherwise: after UNAVAILABLE (the server shutting
#: down, a lost connection, nothing listening) or a stream the server ended, for ever, waiting
#: 0.1 s doubling to 5 s (with jitter) between attempts in a row that made no progress (no
#: change, nor a heartbeat after the one a stream opens with).
WATCH_RECONNECT = RetryPolicy(max_attempts=sys.maxsize, initial_backoff=0.1, max_backoff=5.0)

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
    _receive: Callable[[Any], Awaitable[Any]]
    _pause: Callable[[float], Awaitable[None]]
    _method: Callable[[Method, type], Method]
    _iterator: Callable[[Method, type], Method]
    _watch: Callable[[Method, type], Method]


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
    async def _receive(call: Any) -> Any:
        return next(call, None)

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

    @staticmethod
    def _watch(impl: Method, owner: type) -> Method:
        return _watch_method(impl, owner, ChangeStream)


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
    async def _receive(call: Any) -> Any:
        response = await call.read()
        return None if response is grpc.aio.EOF else response

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

    @staticmethod
    def _watch(impl: Method, owner: type) -> Method:
        return _watch_method(impl, owner, AsyncChangeStream)


# -- watch_changes -----------------------------------------------------------------------------
# The shared `watch_changes` (ctxd.client._Api) returns a Watch: the state of one follow, and the
# async generator that opens WatchChanges, yields its changes, notes each cursor (a change's or a
# heartbeat's) and reconnects from the last one. Each transport wraps it in its own iterator
# (ChangeStream: blocking; AsyncChangeStream: asyncio), which shows the cursor and closes it.


class Watch:
    """The state of one `watch_changes` iterator, shared by its loop and its wrapper."""

    def __init__(self, cursor: str) -> None:
        self.cursor = cursor
        self.call: Any = None  # the WatchChanges call under way, if any
        self.closed = False
        self.items: AsyncIterator[conversations_pb2.Change]

    def stop(self) -> None:
        """Marks it closed and cancels the call under way (from any thread or task)."""
        self.closed = True
        call = self.call
        if call is not None:
            call.cancel()


def _watch_method(impl: Method, owner: type, stream: type) -> Method:
    @functools.wraps(impl)
    def method(*args: Any, **kwargs: Any) -> Any:
        return stream(impl(*args, **kwargs))

    method.__annotations__ = {**impl.__annotations__, "return": stream.__name__}
    method.__signature__ = inspect.signature(impl).replace(return_annotation=stream.__name__)  # type: ignore[attr-defined]
    return _owned_by(method, owner)


def _cancelling() -> bool:
    """Whether the current asyncio task is being cancelled (Python 3.11+; False before)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling and cancelling())


class ChangeStream(Iterator[conversations_pb2.Change]):
    """What `Client.watch_changes` returns: an iterator of `Change` messages that reconnects by
    itself and resumes from `cursor`. Iterate it in one thread; `close()` (or leaving a `with`
    block) cancels the stream, from any thread: the iteration then ends."""

    def __init__(self, watch: Watch) -> None:
        self._watch = watch
        self._reading = threading.Lock()

    @property
    def cursor(self) -> str:
        """Where the stream stands: the cursor of the last change handed out, or of a heartbeat
        received since (every change before it was handed out). Persist it once the changes
        before it are handled; `watch_changes(after_cursor=...)` resumes from it. Until the
        first change or heartbeat, the `after_cursor` given ("" when none: from now)."""
        return self._watch.cursor

    @property
    def closed(self) -> bool:
        return self._watch.closed

    def __iter__(self) -> ChangeStream:
        return self

    def __next__(self) -> conversations_pb2.Change:
        watch = self._watch
        with self._reading:
            try:
                if not watch.closed:
                    return complete(watch.items.__anext__())
            except StopAsyncIteration:
                pass
            except CtxdError:
                if not watch.closed:
                    raise
            complete(watch.items.aclose())  # (a no-op once the loop has ended)
            raise StopIteration

    def close(self) -> None:
        """Cancels the stream; an iteration under way in another thread ends (StopIteration)."""
        self._watch.stop()
        if self._reading.acquire(blocking=False):  # else the reading thread finishes the loop
            try:
                complete(self._watch.items.aclose())
            finally:
                self._reading.release()

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncChangeStream(AsyncIterator[conversations_pb2.Change]):
    """What `AsyncClient.watch_changes` returns: an async iterator of `Change` messages that
    reconnects by itself and resumes from `cursor`. `await aclose()` (or leaving an `async with`
    block) cancels the stream, from any task: an iteration under way then ends."""

    def __init__(self, watch: Watch) -> None:
        self._watch = watch
        self._reading = False

    @property
    def cursor(self) -> str:
        """As `ChangeStream.cursor`: persist it once the changes before it are handled."""
        return self._watch.cursor

    @property
    def closed(self) -> bool:
        return self._watch.closed

    def __aiter__(self) -> AsyncChangeStream:
        return self

    async def __anext__(self) -> conversations_pb2.Change:
        watch = self._watch
        self._reading = True
        try:
            if not watch.closed:
                return await watch.items.__anext__()
        except StopAsyncIteration:
            pass
        except CtxdError:
            if not watch.closed:
                raise
        except asyncio.CancelledError:
            # Closed from another task: the call's cancellation ends the read. A cancellation of
            # this task itself goes on.
            if not watch.closed or _cancelling():
                raise
        finally:
            self._reading = False
        await watch.items.aclose()  # (a no-op once the loop has ended)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Cancels the stream; an iteration under way in another task ends (StopAsyncIteration)."""
        self._watch.stop()
        if not self._reading:  # else the reading task finishes the loop
            await self._watch.items.aclose()

    async def __aenter__(self) -> AsyncChangeStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

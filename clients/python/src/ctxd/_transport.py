"""Channel, metadata, deadlines and retries shared by Client and AsyncClient."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from . import __version__

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

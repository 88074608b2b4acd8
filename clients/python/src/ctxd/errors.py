"""Errors raised by the ctxd client: one class per gRPC status the service documents, carrying
the status details the server sends (google.rpc.BadRequest field violations on INVALID_ARGUMENT,
google.rpc.ErrorInfo with the current value on ABORTED, the reason on FAILED_PRECONDITION, the
oldest cursor on OUT_OF_RANGE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "CtxdError",
    "FieldViolation",
    "InvalidArgument",
    "NotFound",
    "AlreadyExists",
    "Aborted",
    "FailedPrecondition",
    "Unauthenticated",
    "PermissionDenied",
    "ResourceExhausted",
    "OutOfRange",
    "Unavailable",
    "DeadlineExceeded",
    "Internal",
]

_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One google.rpc.BadRequest field violation: the field path and what is wrong with it."""

    field: str
    description: str


class CtxdError(Exception):
    """A ctxd call failed. `code` is the grpc.StatusCode; `details` the status message."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        *,
        method: str = "",
        field_violations: tuple[FieldViolation, ...] = (),
        reason: str = "",
        info: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{method}: {code.name}: {details}" if method else f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.method = method
        self.field_violations = field_violations
        self.reason = reason
        self.info: dict[str, str] = dict(info or {})


class InvalidArgument(CtxdError):
    """INVALID_ARGUMENT: see `field_violations` (nothing was stored)."""


class NotFound(CtxdError):
    """NOT_FOUND: no such conversation (or another tenant's)."""


class AlreadyExists(CtxdError):
    """ALREADY_EXISTS, e.g. a fork's new conversation id is taken."""


class Aborted(CtxdError):
    """ABORTED: an `expected_*` guard did not hold. `current` is the server's current value
    (`current_last_sequence`, `current_through_sequence` or `current_version`), when sent."""

    @property
    def current(self) -> int | None:
        for key in ("current_last_sequence", "current_through_sequence", "current_version"):
            if key in self.info:
                return int(self.info[key])
        return None


class FailedPrecondition(CtxdError):
    """FAILED_PRECONDITION, with `reason` (IDEMPOTENCY_KEY_REUSED, CONVERSATION_EXPIRED...)."""


class Unauthenticated(CtxdError):
    """UNAUTHENTICATED: missing or bad API key."""


class PermissionDenied(CtxdError):
    """PERMISSION_DENIED: the tenant header disagrees with the credential."""


class ResourceExhausted(CtxdError):
    """RESOURCE_EXHAUSTED: a size or rate limit."""


class OutOfRange(CtxdError):
    """OUT_OF_RANGE: e.g. a WatchChanges cursor older than the changes kept (`reason`
    CURSOR_EXPIRED): resync from the current state, then watch from now or `oldest_cursor`."""

    @property
    def oldest_cursor(self) -> str | None:
        """The oldest cursor the server still holds changes after, when sent."""
        return self.info.get("oldest_cursor")


class Unavailable(CtxdError):
    """UNAVAILABLE: retryable (the client already retried what it safely could)."""


class DeadlineExceeded(CtxdError):
    """DEADLINE_EXCEEDED: the call's deadline passed."""


class Internal(CtxdError):
    """INTERNAL: a server bug (the cause is in the server's log)."""


_CLASSES: dict[grpc.StatusCode, type[CtxdError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.INTERNAL: Internal,
}


def _status_details(trailing: Any) -> status_pb2.Status | None:
    for key, value in trailing or ():
        if key == _DETAILS_KEY:
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # noqa: BLE001 - malformed details are ignored, not fatal
                return None
            return status
    return None


def from_rpc_error(error: grpc.RpcError, method: str = "") -> CtxdError:
    """The CtxdError for a failed call (grpc.RpcError from sync or asyncio stubs)."""
    code = error.code() if callable(getattr(error, "code", None)) else grpc.StatusCode.UNKNOWN
    details = (error.details() if callable(getattr(error, "details", None)) else "") or ""
    trailing = error.trailing_metadata() if callable(getattr(error, "trailing_metadata", None)) else None
    violations: list[FieldViolation] = []
    reason = ""
    info: dict[str, str] = {}
    status = _status_details(trailing)
    if status is not None:
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
            elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                error_info = error_details_pb2.ErrorInfo()
                detail.Unpack(error_info)
                reason = error_info.reason
                info.update(error_info.metadata)
    cls = _CLASSES.get(code, CtxdError)
    return cls(code, details, method=method, field_violations=tuple(violations), reason=reason, info=info)

"""The one place a gRPC status code becomes one of the plugin's errors (httpx-style boundary).

Every ``grpc.StatusCode`` is either mapped to its own class or deliberately left to the
generic ``RpcError`` (``GENERIC_CODES``); a test fails when a code is neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from pytest_cuzk.core.errors import (
    Cancelled,
    DaemonUnavailable,
    DeadlineExceeded,
    InternalError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    RpcError,
    Unimplemented,
)

__all__ = ["ERROR_CLASSES", "GENERIC_CODES", "error_for", "map_grpc_errors"]

ERROR_CLASSES: dict[grpc.StatusCode, type[RpcError]] = {
    grpc.StatusCode.UNAVAILABLE: DaemonUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.CANCELLED: Cancelled,
}

# Codes cuzk never sends; they surface as the generic RpcError, still naming the code.
GENERIC_CODES: frozenset[grpc.StatusCode] = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.DATA_LOSS,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)


def error_for(exc: grpc.RpcError, address: str, rpc: str) -> RpcError:
    """Build the CuzkError for a failed call (without raising it)."""
    code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return ERROR_CLASSES.get(code, RpcError)(address, rpc, code, details or "")


@contextmanager
def map_grpc_errors(address: str, rpc: str) -> Iterator[None]:
    """Turn a ``grpc.RpcError`` raised inside the block into the matching RpcError subclass."""
    try:
        yield
    except grpc.RpcError as exc:
        raise error_for(exc, address, rpc) from exc

"""Exceptions pytest-cuzk raises, and the one place gRPC status codes become them.

A raw ``grpc.RpcError`` says neither which daemon nor which call failed; every
error here names the address, the RPC and the status code, and hints at what to
do. The tree::

    CuzkError
    ├── RpcError                  any failed gRPC call (the generic class for errormap.GENERIC_CODES)
    │   ├── DaemonUnavailable     UNAVAILABLE: nothing listening, connection refused or reset
    │   ├── DeadlineExceeded      DEADLINE_EXCEEDED: the call's client-side deadline passed
    │   ├── InvalidArgument       INVALID_ARGUMENT: the daemon rejected the request
    │   ├── NotFound              NOT_FOUND: unknown job id
    │   ├── MessageTooLarge       a message over a size limit
    │   │   ├── ResourceExhausted RESOURCE_EXHAUSTED (grpcio's own limit check)
    │   │   └── OutOfRange        OUT_OF_RANGE (tonic, i.e. cuzk's 128 MiB limit)
    │   ├── InternalError         INTERNAL: the daemon failed (e.g. PreloadSRS of an unknown circuit)
    │   ├── Unimplemented         UNIMPLEMENTED: not a cuzk.v1.ProvingEngine server
    │   └── Cancelled             CANCELLED
    ├── ProofFailed               the job finished with status FAILED (or another non-COMPLETED status)
    ├── ProofTimeout              the client-side bound on waiting for a proof passed
    ├── ProofStructureError       proof bytes are not well-formed Groth16 proofs
    ├── DaemonExited              the daemon under test is gone, or out of service for the run
    │   └── DaemonHung            it is there but answers nothing (stopped, wedged): killed or taken out
    ├── NotCuzkServer             the address answers, but not as a cuzk.v1 gRPC server
    ├── DataUnavailable           a kind's test data cannot be had (says how to produce it)
    ├── DataDirUnwritable         a file of the data dir cannot be written (read-only, full): names it
    ├── ManifestError             a data manifest that cannot be used (names file, key and fix)
    └── ReadinessError            a readiness stage failed (warm-up proof, PCE file)

    CuzkWarning (a PytestWarning) what could not be checked or measured, said without failing

``pytest_cuzk.daemon.errormap`` is the one place gRPC status codes become these classes (this module
imports no gRPC, so a pytest run that tests no daemon never loads it); ``pytest_cuzk.core.outcome``
turns any of them into the test's pytest outcome.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import TYPE_CHECKING

import pytest

from pytest_cuzk.vocab.redact import redact

if TYPE_CHECKING:
    from collections.abc import Iterator

    import grpc

__all__ = [
    "Cancelled",
    "CuzkError",
    "CuzkWarning",
    "DaemonExited",
    "DaemonHung",
    "DaemonUnavailable",
    "DataDirUnwritable",
    "DataUnavailable",
    "DeadlineExceeded",
    "InternalError",
    "InvalidArgument",
    "ManifestError",
    "MessageTooLarge",
    "NotCuzkServer",
    "NotFound",
    "OutOfRange",
    "ProofFailed",
    "ProofStructureError",
    "ProofTimeout",
    "ReadinessError",
    "ResourceExhausted",
    "RpcError",
    "Unimplemented",
]


class CuzkError(Exception):
    """Base of every error pytest-cuzk raises on purpose."""


class RpcError(CuzkError):
    """A gRPC call to a proving daemon failed."""

    hint = "see the daemon's log for why it refused the call"

    def __init__(self, address: str, rpc: str, code: grpc.StatusCode, details: str) -> None:
        self.address = address
        self.rpc = rpc
        self.code = code
        self.details = details
        super().__init__(
            f"{rpc} on {address} failed with {code.name}: {details or '(no details)'}; {self.hint}"
        )


class DaemonUnavailable(RpcError):
    """Nothing answers at the address."""

    hint = (
        "check that the daemon is running and listening on that address "
        "(TCP IP:port or unix:///absolute/path); the daemon log says where it listens"
    )


class DeadlineExceeded(RpcError):
    """The call's deadline passed before the daemon answered."""

    hint = "the daemon did not answer in time: raise the timeout, or check whether the daemon is stuck"


class InvalidArgument(RpcError):
    """The daemon rejected the request's fields."""

    hint = "the daemon rejected the request: check proof_kind and the other request fields"


class NotFound(RpcError):
    """The daemon does not know the job id."""

    hint = "the daemon does not know this job id (it forgets every job when it restarts): submit it again"


class MessageTooLarge(RpcError):
    """A request or response was over a message size limit."""

    hint = (
        "a message was over a size limit: cuzk accepts at most 128 MiB; "
        "the client's limit is ProvingClient(max_message_bytes=...)"
    )


class ResourceExhausted(MessageTooLarge):
    """RESOURCE_EXHAUSTED: grpcio's message size check (or another exhausted resource)."""


class OutOfRange(MessageTooLarge):
    """OUT_OF_RANGE: what cuzk (tonic) answers to a message over its 128 MiB limit."""


class InternalError(RpcError):
    """The daemon failed while handling the call."""

    hint = (
        "the daemon failed internally: see its log (for PreloadSRS: is the circuit id known "
        "and its .params file in srs.param_cache?)"
    )


class Unimplemented(RpcError):
    """The server does not implement the RPC."""

    hint = "the server does not implement this RPC: is it a cuzk.v1.ProvingEngine daemon?"


class Cancelled(RpcError):
    """The call was cancelled before it finished."""

    hint = "the call was cancelled before it finished (client shutdown or the server went away)"


class ProofFailed(CuzkError):
    """A job finished without a proof (status FAILED, or CANCELLED/TIMEOUT/UNKNOWN)."""

    def __init__(self, job_id: str, error_message: str, status: str = "FAILED", address: str = "") -> None:
        self.job_id = job_id
        self.error_message = error_message
        self.status = status
        self.address = address
        where = f" on {address}" if address else ""
        super().__init__(
            f"proof job {job_id!r}{where} ended {status}: {error_message or '(no error message)'}"
        )


class ProofTimeout(CuzkError, TimeoutError):
    """The client stopped waiting for a proof (cuzk ignores AwaitProof's timeout_ms; the client bounds it)."""

    def __init__(self, job_id: str, elapsed_s: float, timeout_s: float, address: str = "") -> None:
        self.job_id = job_id
        self.elapsed_s = elapsed_s
        self.timeout_s = timeout_s
        self.address = address
        where = f" on {address}" if address else ""
        super().__init__(
            f"proof job {job_id!r}{where} not finished after {elapsed_s:.1f} s (bound {timeout_s:g} s); "
            "raise the timeout if the proof is just slow, else check the daemon's log for a stuck job"
        )


class ProofStructureError(CuzkError, ValueError):
    """Proof bytes are not a sequence of well-formed compressed Groth16 proofs."""

    def __init__(self, reason: str, partition: int | None = None, point: str | None = None) -> None:
        self.reason = reason
        self.partition = partition
        self.point = point
        where = "" if partition is None else f"partition {partition}: "
        if partition is not None and point:
            where = f"partition {partition} point {point}: "
        super().__init__(f"malformed proof: {where}{reason}")


class DaemonExited(CuzkError):
    """The daemon is gone (or out of service); the message says how it ended and what it logged last."""


class NotCuzkServer(CuzkError):
    """Something answers at the address, but not as a cuzk.v1 gRPC server: waiting will not help."""

    def __init__(self, address: str, seen: str) -> None:
        self.address = address
        super().__init__(
            f"{address} answers, but not as a cuzk.v1 gRPC server ({seen}); "
            "check the address and port of the daemon (--cuzk-daemon, --cuzk-addr)"
        )


class DaemonHung(DaemonExited):
    """The daemon stopped answering while its process (if we can see it) still exists."""


class DataUnavailable(CuzkError):
    """A kind's data cannot be had; the message says which file, which entry and how to produce it."""

    def __init__(
        self, kind: str, file: str, manifest: object, entry_key: str, reason: str, hint: str
    ) -> None:
        self.kind, self.file, self.manifest, self.entry_key = kind, file, manifest, entry_key
        self.reason, self.hint = redact(reason), redact(hint)  # they name the URLs data comes from
        end = "" if self.reason.endswith(".") else "."  # requests' own messages end with one
        super().__init__(f"{kind} data {file} ({manifest} [{entry_key}]): {self.reason}{end} {self.hint}")


class DataDirUnwritable(CuzkError):
    """A file of the test-data cache cannot be written: a read-only or full disk, not a missing file.

    Not a ``DataUnavailable``: ``--cuzk-allow-missing`` does not make it a skip, and no kind is
    quietly left out for it.
    """

    def __init__(self, path: object, error: OSError) -> None:
        self.path = path
        writable = "make it writable, or pass --cuzk-data-dir DIR (a directory you can write)"
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space on that disk, or pass --cuzk-data-dir DIR on one with room"
            verb = "cannot write"
        elif error.errno == errno.EROFS:
            verb, fix = "cannot write", writable
        elif error.errno in (errno.EACCES, errno.EPERM):  # a file may be unreadable as well as unwritable
            verb, fix = "cannot read or write", writable
        else:  # an I/O error, a directory where a file should be: what the kernel said, not a guess
            verb, fix = "cannot use", "check that directory, or pass --cuzk-data-dir DIR"
        why = os.strerror(error.errno) if error.errno else str(error)
        super().__init__(f"{verb} {path}: {why}; {fix}")

    @classmethod
    @contextlib.contextmanager
    def raised_for(cls, where: object) -> Iterator[None]:
        """Any OSError inside becomes this, naming the file the OS named, else ``where``."""
        try:
            yield
        except OSError as exc:
            raise cls(exc.filename or where, exc) from None


class ManifestError(CuzkError, ValueError):
    """A manifest that cannot be used; the message names the file, the key path and the fix."""


class ReadinessError(CuzkError):
    """A readiness stage failed: the warm-up proof did not complete, or its PCE file never appeared."""


class CuzkWarning(pytest.PytestWarning):
    """Something pytest-cuzk could not check or measure, said without failing the test."""

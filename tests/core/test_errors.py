"""The gRPC status code → exception mapping and the messages users see."""

from __future__ import annotations

import errno
import os

import grpc
import pytest

from pytest_cuzk.core.errors import (
    CuzkError,
    DataDirUnwritable,
    MessageTooLarge,
    NotFound,
    ProofFailed,
    ProofStructureError,
    ProofTimeout,
    RpcError,
)
from pytest_cuzk.daemon.errormap import ERROR_CLASSES, GENERIC_CODES, map_grpc_errors


class FakeCall(grpc.RpcError):
    """What grpcio raises for a failed unary call: an RpcError with code() and details()."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_every_status_code_is_mapped_specifically_or_deliberately_generic() -> None:
    unmapped = [c.name for c in grpc.StatusCode if c not in ERROR_CLASSES and c not in GENERIC_CODES]
    both = [c.name for c in grpc.StatusCode if c in ERROR_CLASSES and c in GENERIC_CODES]
    assert unmapped == []
    assert both == []


def test_specific_classes_are_distinct_rpc_errors() -> None:
    classes = list(ERROR_CLASSES.values())
    assert len(set(classes)) == len(classes)
    assert all(issubclass(cls, RpcError) and cls is not RpcError for cls in classes)


@pytest.mark.parametrize("code", list(grpc.StatusCode), ids=lambda c: c.name)
def test_map_grpc_errors_raises_the_mapped_class_naming_address_rpc_code(code: grpc.StatusCode) -> None:
    cause = FakeCall(code, f"details for {code.name}")
    with pytest.raises(RpcError) as info, map_grpc_errors("unix:///run/cuzk.sock", "SubmitProof"):
        raise cause
    err = info.value
    assert type(err) is ERROR_CLASSES.get(code, RpcError)
    assert (err.address, err.rpc, err.code, err.details) == (
        "unix:///run/cuzk.sock",
        "SubmitProof",
        code,
        f"details for {code.name}",
    )
    assert err.__cause__ is cause
    text = str(err)
    for part in ("unix:///run/cuzk.sock", "SubmitProof", code.name, f"details for {code.name}", err.hint):
        assert part in text


def test_size_limit_codes_share_a_base_with_a_size_hint() -> None:
    for code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OUT_OF_RANGE):
        assert issubclass(ERROR_CLASSES[code], MessageTooLarge)
    assert "128 MiB" in MessageTooLarge.hint and "max_message_bytes" in MessageTooLarge.hint


def test_other_exceptions_pass_through_untouched() -> None:
    with pytest.raises(KeyError), map_grpc_errors("127.0.0.1:1", "GetStatus"):
        raise KeyError("x")


def test_missing_details_are_said_so() -> None:
    with pytest.raises(NotFound, match=r"\(no details\)"), map_grpc_errors("h:1", "AwaitProof"):
        raise FakeCall(grpc.StatusCode.NOT_FOUND, "")


def test_proof_failed_carries_job_and_message() -> None:
    err = ProofFailed(
        "porep-1000-1", "C1 parse failed: failed to parse C1 output wrapper JSON", address="h:1"
    )
    assert (err.job_id, err.status) == ("porep-1000-1", "FAILED")
    assert str(err) == (
        "proof job 'porep-1000-1' on h:1 ended FAILED: "
        "C1 parse failed: failed to parse C1 output wrapper JSON"
    )


def test_proof_timeout_is_a_timeout_naming_job_and_elapsed() -> None:
    err = ProofTimeout("job-7", elapsed_s=12.34, timeout_s=12, address="127.0.0.1:9820")
    assert isinstance(err, TimeoutError) and isinstance(err, CuzkError)
    assert (err.job_id, err.elapsed_s, err.timeout_s) == ("job-7", 12.34, 12)
    assert "'job-7' on 127.0.0.1:9820 not finished after 12.3 s (bound 12 s)" in str(err)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("bad length",), "malformed proof: bad length"),
        (("identity", 3), "malformed proof: partition 3: identity"),
        (("off curve", 0, "B"), "malformed proof: partition 0 point B: off curve"),
    ],
)
def test_proof_structure_error_names_partition_and_point(args: tuple, text: str) -> None:
    err = ProofStructureError(*args)
    assert str(err) == text
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (errno.ENOSPC, "cannot write /c/f: No space left on device; free space on that disk"),
        (errno.EROFS, "cannot write /c/f: Read-only file system; make it writable"),
        (errno.EACCES, "cannot read or write /c/f: Permission denied; make it writable"),
        (errno.EIO, "cannot use /c/f: Input/output error; check that directory"),
    ],
)
def test_an_unusable_cache_file_is_worded_by_what_the_kernel_said(code: int, said: str) -> None:
    # Permission errors cannot be made for real as root (the tests' CI user): the wording is checked here.
    message = str(DataDirUnwritable("/c/f", OSError(code, os.strerror(code))))
    assert message.startswith(said), message


def test_raised_for_names_the_file_the_kernel_named_else_the_place_given() -> None:
    named = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/c/named")
    unnamed = OSError(errno.EROFS, os.strerror(errno.EROFS))
    cases = ((named, "cannot write /c/named: No space"), (unnamed, "cannot write /c/given: Read-only"))
    for error, said in cases:
        with pytest.raises(DataDirUnwritable, match=f"^{said}"), DataDirUnwritable.raised_for("/c/given"):
            raise error
    with pytest.raises(ValueError, match="not an OS error"), DataDirUnwritable.raised_for("/c/given"):
        raise ValueError("not an OS error")

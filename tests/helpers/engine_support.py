"""Helpers for the reference engine's tests: request data, in-process servers and ``cuzk-ref`` processes."""

from __future__ import annotations

import os
import queue
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.gpu.points import Group
from pytest_cuzk.refengine.server import MAX_MESSAGE_BYTES
from pytest_cuzk.vocab.kinds import KINDS

READY = "cuzk-ref ready, serving on "
FP = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
"""The base field modulus of BLS12-381: the points' coordinates' field."""
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


@dataclass(frozen=True)
class RefData:
    """gendata's output: files plus the manifest's request fields per kind."""

    root: Path
    manifest: dict[str, Any]

    def request(
        self, kind: str, request_id: str = "", sector: int = 0, **fields: Any
    ) -> pb.SubmitProofRequest:
        """A valid request for ``kind`` (its ``sector``-th data set); ``fields`` override the manifest's."""
        entry = self.manifest["kinds"][kind][sector]
        req = build_request(
            KINDS[kind], self.root / entry["file"], entry.get("request", {}), request_id=request_id
        )
        set_fields(req, **fields)
        return req


def set_fields(req: Any, **fields: Any) -> None:
    """Override a request's fields; a repeated one (``vanilla_proofs``) is replaced whole."""
    for name, value in fields.items():
        if name == "vanilla_proofs":
            del req.vanilla_proofs[:]
            req.vanilla_proofs.extend(value)
        else:
            setattr(req, name, value)


@dataclass
class Running:
    """An in-process engine + gRPC server and a client stub for it."""

    engine: Engine
    server: grpc.Server
    address: str
    channel: grpc.Channel
    stub: pb_grpc.ProvingEngineStub

    def stop(self) -> None:
        """Shut the engine down and stop the server."""
        self.channel.close()
        self.engine.shutdown()
        self.server.stop(0.5).wait(2)


def connect(address: str) -> tuple[grpc.Channel, pb_grpc.ProvingEngineStub]:
    """A channel and stub to a daemon at a ready-line address (``IP:port`` or ``unix://path``)."""
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    return channel, pb_grpc.ProvingEngineStub(channel)


@dataclass
class Daemon:
    """A ``cuzk-ref`` subprocess with its output collected line by line."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _new: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _reader: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """Collects the output until EOF, then closes the pipe: the reader is the one user of it."""
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                self._new.put(line)
        self._new.put(None)

    def wait_ready(self, timeout: float = 60.0) -> str:
        """Wait for the ready line; returns the address it names."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"cuzk-ref exited with {self.proc.wait()} before ready:\n{self.output}")
            if READY in line:
                return line.split(READY, 1)[1].strip()
        pytest.fail(f"cuzk-ref not ready after {timeout} s:\n{self.output}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Send ``sig`` and wait for the exit code (kill after ``timeout``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit on its own and for its output to be read."""
        code = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        return code

    def close(self, timeout: float = 10.0) -> None:
        """Kill it if it still runs, reap it and let the reader read its output to the end and close it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait_exit(timeout)

    @property
    def output(self) -> str:
        """Everything the daemon printed so far (stdout and stderr)."""
        return "\n".join(self.lines)


def rss_over_garbage_requests(
    stub: pb_grpc.ProvingEngineStub, ref_data: RefData, pid: int, count: int, size: int
) -> list[int]:
    """The daemon's RSS after each of ``count`` PoRep requests whose ``size``-byte payload fails parsing.

    Each must be answered FAILED; the caller judges whether the engine held the bodies.
    """
    import psutil

    rss = []
    for n in range(count):
        request = ref_data.request("porep", request_id=f"garbage-{n}")
        request.vanilla_proof = bytes([n + 1]) * size
        stub.SubmitProof(request, timeout=120)
        answer = stub.AwaitProof(
            pb.AwaitProofRequest(job_id=request.request_id, timeout_ms=120_000), timeout=130
        )
        assert answer.status == pb.AwaitProofResponse.FAILED, answer
        rss.append(psutil.Process(pid).memory_info().rss)
    return rss


def write_config(path: Path, text: str) -> Path:
    """Write a TOML config file and return its path."""
    path.write_text(text)
    return path


def copy_params(src: Path, dst: Path, circuit_id: str) -> None:
    """Copy one circuit's ``.params`` and ``.vk`` (not its PCE) into another cache."""
    from pytest_cuzk.refengine.prover import RefProver

    prover = RefProver(src)
    prover.ensure_params(circuit_id)
    params = prover.params_path(circuit_id)
    dst.mkdir(parents=True, exist_ok=True)
    for path in (params, params.with_suffix(".vk")):
        shutil.copy2(path, dst / path.name)


@contextmanager
def tmpfs(path: Path, size: str = "1m", read_only: bool = False) -> Iterator[Path]:
    """A small tmpfs mounted at ``path`` (a full disk, a read-only cache), or skip without the rights."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    """Take every free byte of the file system ``directory`` is on."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def wait_for_status(
    stub: pb_grpc.ProvingEngineStub,
    holds: Callable[[pb.GetStatusResponse], bool],
    timeout: float,
    failure: str,
) -> None:
    """Poll GetStatus until ``holds`` its answer, else fail with ``failure``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if holds(stub.GetStatus(pb.GetStatusRequest())):
            return
        time.sleep(0.01)
    pytest.fail(failure)


def _wait_for_queue(
    stub: pb_grpc.ProvingEngineStub,
    status_name: str,
    holds: Callable[[pb.QueueStatus | None], bool],
    timeout: float,
    failure: str,
) -> None:
    """Poll GetStatus until ``holds`` the kind's queue (None where GetStatus lists none), else fail."""

    def kind_holds(status: pb.GetStatusResponse) -> bool:
        return holds({q.proof_kind: q for q in status.queues}.get(status_name))

    wait_for_status(stub, kind_holds, timeout, failure)


def wait_until_running(
    stub: pb_grpc.ProvingEngineStub, status_name: str, jobs: int, timeout: float = 10.0
) -> None:
    """Poll GetStatus until ``jobs`` jobs of that kind are in progress."""
    failure = f"fewer than {jobs} {status_name} jobs started within {timeout} s"
    _wait_for_queue(stub, status_name, lambda q: q is not None and q.in_progress >= jobs, timeout, failure)


def wait_until_none_queued(stub: pb_grpc.ProvingEngineStub, status_name: str, timeout: float = 10.0) -> None:
    """Poll GetStatus until no job of that kind waits in the queue (cuzk lists a kind only then)."""
    failure = f"{status_name} jobs still queued after {timeout} s"
    _wait_for_queue(stub, status_name, lambda q: q is None or q.pending == 0, timeout, failure)


def distinct_points(rnd: random.Random, n: int, group: Group[Any]) -> list[Any]:
    """Distinct pseudo-random points of ``group``: a random start, then steps of a random point."""
    g = group.point()
    p, step = g * Scalar(rnd.randrange(1, R)), g * Scalar(rnd.randrange(1, R))
    out = []
    for _ in range(n):
        out.append(p)
        p = p + step
    return out

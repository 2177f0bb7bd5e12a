"""Fault injection for the reference engine: the failures a harness must report well.

Real fleets lose daemons to the OOM killer, see proofs that never return, GPUs that
return garbage or wrong proofs, batches whose proofs go to the wrong requests, and builds
that got slower. These hooks reproduce each on demand (config ``[ref.faults]`` or env
``CUZK_REF_FAULTS``) so the plugin's handling of them can be tested for real. The proof
faults act after the engine's own self-check: they model what a check missed.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from py_arkworks_bls12381 import G1Point

from pytest_cuzk.refengine.config import Faults

__all__ = [
    "StopOnRpc",
    "after_self_check",
    "before_ready",
    "corrupt_proof",
    "invalid_proof",
    "maybe_die",
    "slow_down",
    "start_memory_growth",
    "swap_batch",
]

log = logging.getLogger("cuzk_ref.faults")
_G1_LEN = 48
_PAGE = 4096


def before_ready(faults: Faults) -> None:
    """Apply the start-up faults: a slow start, or an exit before the listen address is bound."""
    if faults.start_delay_s > 0:
        log.warning("fault: delaying start by %.1f s", faults.start_delay_s)
        time.sleep(faults.start_delay_s)
    if faults.exit_before_ready is not None:
        log.warning("fault: exiting with code %d before ready", faults.exit_before_ready)
        logging.shutdown()
        sys.exit(faults.exit_before_ready)


def maybe_die(faults: Faults, proof_no: int, job_id: str) -> None:
    """SIGKILL this process while proving proof ``proof_no`` when die_at_proof says so."""
    if faults.die_at_proof and proof_no == faults.die_at_proof:
        log.warning(
            "fault: killing the daemon with SIGKILL while proving proof %d (job %s)", proof_no, job_id
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def corrupt_proof(proof: bytes) -> bytes:
    """Flip one bit of partition 0's A point so that it no longer decodes as a curve point.

    Tries the low bits of A's last byte in turn and keeps the first flip that the curve
    check rejects, so the result is deterministic and always invalid (not merely wrong).
    """
    for bit in range(8):
        a = bytearray(proof[:_G1_LEN])
        a[-1] ^= 1 << bit
        try:
            G1Point.from_compressed_bytes(bytes(a))
        except ValueError:
            return bytes(a) + proof[_G1_LEN:]
    a = bytearray(proof[:_G1_LEN])
    a[0] ^= 0x80  # clear the compression flag: never a valid compressed encoding
    return bytes(a) + proof[_G1_LEN:]


def invalid_proof(proof: bytes) -> bytes:
    """Replace partition 0's A by A + G: a valid, in-subgroup point, but the proof no longer verifies."""
    a = G1Point.from_compressed_bytes(proof[:_G1_LEN]) + G1Point()
    return a.to_compressed_bytes() + proof[_G1_LEN:]


def after_self_check(faults: Faults, proof_no: int, proof: bytes) -> bytes:
    """Proof ``proof_no`` as the faults return it: malformed, or well-formed but wrong."""
    if proof_no == faults.corrupt_at_proof:
        log.warning("fault: corrupting proof %d (an invalid point encoding)", proof_no)
        return corrupt_proof(proof)
    if proof_no == faults.invalid_at_proof:
        log.warning("fault: proof %d is well-formed but does not verify", proof_no)
        return invalid_proof(proof)
    return proof


def swap_batch(faults: Faults, proofs: list[tuple[Any, bytes]]) -> list[tuple[Any, bytes]]:
    """With ``swap_batch_proofs``, the first two jobs of a batch get each other's proof."""
    if not faults.swap_batch_proofs or len(proofs) < 2:
        return proofs
    (a, pa), (b, pb_), *rest = proofs
    log.warning("fault: swapping the proofs of two jobs of one batch")
    return [(a, pb_), (b, pa), *rest]


def slow_down(faults: Faults, stage_s: float) -> float:
    """With ``slow_factor`` F, sleep (F - 1) times the stage's time; returns the seconds slept."""
    extra = (faults.slow_factor - 1.0) * stage_s
    if extra > 0:
        time.sleep(extra)
    return max(0.0, extra)


def start_memory_growth(mib_per_s: float) -> threading.Thread | None:
    """Allocate and touch ``mib_per_s`` MiB every second until the process is killed."""
    if mib_per_s <= 0:
        return None
    log.warning("fault: growing memory by %.1f MiB/s until killed", mib_per_s)
    thread = threading.Thread(target=_grow, args=(mib_per_s,), name="fault-memory-growth", daemon=True)
    thread.start()
    return thread


def _grow(mib_per_s: float) -> None:
    hoard: list[bytearray] = []
    step = max(1, int(mib_per_s * (1 << 20) / 10))
    while True:
        chunk = bytearray(step)
        chunk[::_PAGE] = b"\x01" * len(range(0, step, _PAGE))  # touch every page so RSS really grows
        hoard.append(chunk)
        time.sleep(0.1)


class StopOnRpc(grpc.ServerInterceptor):
    """With ``stop_on_rpc``, SIGSTOP this process when that RPC first arrives, before it answers.

    A daemon stopped in the middle of any call (not only while a proof runs) is what a
    harness must find within a poll, not at the call's deadline.
    """

    def __init__(self, rpc: str) -> None:
        self.method, self._done = f"/cuzk.v1.ProvingEngine/{rpc}", threading.Event()

    def intercept_service(self, continuation: Callable[[Any], Any], handler_call_details: Any) -> Any:
        if handler_call_details.method == self.method and not self._done.is_set():
            self._done.set()
            log.warning("fault: stopping the daemon (pid %d) with SIGSTOP in %s", os.getpid(), self.method)
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
        return continuation(handler_call_details)

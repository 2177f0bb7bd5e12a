"""The readiness chain: SRS preloaded, one warm-up proof per kind, its PCE file written.

A daemon is ready for a kind once PreloadSRS answered, a warm-up proof of that kind
completed and checked out, and the kind's ``pce-*.bin`` is complete in the param cache
(final name, cuzk's magic, a stable size, and for cuzk written since the daemon started).
Each stage is timed into the daemon's ``ColdStart`` record, with the kernel's RSS high-water
mark over a kind's stages: the first PCE extraction, not the proofs, is what OOM-kills a host
with too little RAM.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_cuzk.backends import fate
from pytest_cuzk.backends.protocol import ColdStart, DaemonBackend
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.errors import ReadinessError
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.host.proctree import ProcessTree
from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["PCE_MAGIC", "Readiness", "pce_complete"]

PCE_MAGIC = b"PCE\x02"
RequestFactory = Callable[[DaemonBackend, ProofKindInfo], pb.SubmitProofRequest]


def pce_complete(path: Path, newer_than: float = 0.0) -> bool:
    """The PCE file is in place (final name), recent enough, its magic right and its size stable."""
    try:
        st = path.stat()
        with path.open("rb") as f:
            magic = f.read(4)
        time.sleep(0.05)
        return (
            magic == PCE_MAGIC
            and st.st_size >= 32
            and st.st_mtime >= newer_than
            and path.stat().st_size == st.st_size
        )
    except OSError:
        return False


class Readiness:
    """Runs the chain for a daemon and the kinds a test needs, skipping kinds already ready."""

    def __init__(self, settings: Settings, request: RequestFactory, progress: ProgressLine) -> None:
        self.settings = settings
        self.request = request
        self.progress = progress
        self.stage = "getting ready"  # what the chain is doing, for a message if the daemon fails in it

    def __call__(self, backend: DaemonBackend, kinds: Sequence[ProofKindInfo], cold: ColdStart) -> None:
        """Preload, warm up and wait for the PCE of each kind not yet ready on ``backend``.

        A daemon that dies on the way (the OOM killer during the first proof) is reported
        as a death, with its exit and log, not as the RPC error its socket gave.
        """
        todo = [k for k in kinds if k.name not in backend.state.ready_kinds]
        if not todo:
            return
        self.stage = "getting ready"
        watch = functools.partial(self._watch, backend)
        try:
            with ProvingClient(
                backend.address, default_timeout=self.settings.call_timeout, watch=watch
            ) as client:
                for kind in todo:
                    tree = ProcessTree(backend.pid) if backend.pid and not self.settings.skip_warmup else None
                    if tree:
                        tree.reset_hwm()
                    with backend.cache_lock(kind):
                        t0 = time.monotonic()
                        timeout = self.settings.ready_timeout
                        self.stage = f"loading the {kind.name} SRS"
                        with self.progress.stage(f"{backend.label}: loading the {kind.name} SRS", timeout):
                            client.preload_srs(kind.circuit_id, timeout)
                        cold.srs_load_s[kind.name] = time.monotonic() - t0
                        if not self.settings.skip_warmup:
                            self.stage = f"the {kind.name} warm-up proof"
                            self._warm_up(client, backend, kind, cold)
                    if tree:
                        _record_peak(tree, kind.name, cold)
                    backend.state.ready_kinds.add(kind.name)
        except BaseException as exc:
            raise fate.settle(backend, exc, self.stage, self.settings.probe_timeout)  # noqa: B904 (its own cause)

    def _watch(self, backend: DaemonBackend, call: str) -> None:
        self.progress.tick()
        fate.check(backend, f"{self.stage} ({call})")

    def _warm_up(
        self, client: ProvingClient, backend: DaemonBackend, kind: ProofKindInfo, cold: ColdStart
    ) -> None:
        t0 = time.monotonic()
        request = self.request(backend, kind)
        with self.progress.stage(f"{backend.label}: {kind.name} warm-up proof", self.settings.warmup_timeout):
            result = client.prove(request, self.settings.warmup_timeout)
        cold.warmup_s[kind.name] = time.monotonic() - t0
        if not result.completed:
            raise ReadinessError(
                f"warm-up {kind.name} proof on {backend.address} failed: {result.error_message}"
            )
        check_proof(result.proof, kind)
        rule = backend.pce_rule()
        if rule is None:
            cold.notes.append(
                f"{kind.name}: PCE file not checked (param cache unknown or remote: "
                "pass --cuzk-param-cache for a daemon on this machine)"
            )
            return
        self._wait_pce(backend, kind, rule.directory / kind.pce_file, rule.fresh_since, cold)

    def _wait_pce(
        self, backend: DaemonBackend, kind: ProofKindInfo, pce: Path, fresh: float, cold: ColdStart
    ) -> None:
        t1 = time.monotonic()
        self.stage = f"waiting for {pce.name}"
        deadline = t1 + self.settings.warmup_timeout
        with self.progress.stage(f"{backend.label}: waiting for {pce.name}", self.settings.warmup_timeout):
            self._poll_pce(backend, kind, pce, fresh, deadline)
        cold.pce_s[kind.name] = time.monotonic() - t1

    def _poll_pce(
        self, backend: DaemonBackend, kind: ProofKindInfo, pce: Path, fresh: float, deadline: float
    ) -> None:
        while not pce_complete(pce, fresh):
            self.progress.tick()
            fate.check(backend, self.stage)
            if time.monotonic() > deadline:
                raise ReadinessError(
                    f"PCE file {pce} did not appear within {self.settings.warmup_timeout:.0f}s after the "
                    f"{kind.name} warm-up proof"
                )
            time.sleep(0.2)


def _record_peak(tree: ProcessTree, kind: str, cold: ColdStart) -> None:
    """Keep the higher peak: a low-memory warm-up and the full daemon's share one record."""
    tree.sample(time.monotonic())
    tree.close()
    peak = tree.hwm_bytes()
    if peak is not None:
        cold.warmup_rss_peak_bytes[kind] = max(peak, cold.warmup_rss_peak_bytes.get(kind, 0))

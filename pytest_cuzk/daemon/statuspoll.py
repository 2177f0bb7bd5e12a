"""A daemon's own memory figures from cuzk's HTTP ``/status`` (``daemon.status_listen``).

Where the daemon's process cannot be sampled (it runs on another host), what the daemon says of
itself is the next best figure. cuzk's ``memory.used_bytes`` is its unified memory budget in use
(SRS, PCE and the proofs' working set), not an RSS, so it is reported under its own name. Polled
once a second from a thread while the case runs: the endpoint builds a JSON document per GET.

The same document lists each partitioned job in ``pipelines`` with every partition's ``synth_ms``
and ``gpu_ms`` (for 30 s after it finished): the poller keeps each job's last view, and a job
whose partitions are all done gives one synthesis and one GPU time per partition, ten of each per
PoRep proof where AwaitProof gives only their sums.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import requests

from pytest_cuzk.vocab.redact import redact

__all__ = ["StatusMemory", "StatusPoller", "status_url"]

POLL_S = 1.0
TIMEOUT_S = 2.0


def status_url(address: str) -> str:
    """``HOST:PORT`` (as ``status_listen`` is written) or a URL, as the ``/status`` URL."""
    base = address if "://" in address else f"http://{address}"
    return base.rstrip("/") + ("" if base.rstrip("/").endswith("/status") else "/status")


@dataclass(frozen=True)
class StatusMemory:
    """The highest ``memory.used_bytes`` the daemon reported, its budget, and why there is none."""

    url: str  # redacted: it is shown
    used_peak_bytes: int | None
    total_bytes: int | None
    polls: int
    error: str | None = None
    partitions: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = ()  # (job, synth_ms, gpu_ms)


class StatusPoller:
    """Polls ``/status`` between ``start()`` and ``stop()``; a failing endpoint is reported, not raised."""

    def __init__(self, address: str, poll_s: float = POLL_S) -> None:
        self.url = status_url(address)
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cuzk-status-poll", daemon=True)
        self._peak: int | None = None
        self._total: int | None = None
        self._polls = 0
        self._error: str | None = None
        self._jobs: dict[str, list[Any]] = {}  # job id -> its partitions as last seen

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> StatusMemory:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 1)
        self._poll()  # one last look: the case's peak may have come after the last tick
        error = None if self._peak is not None else self._error or "no memory figures in its answers"
        partitions = tuple((job, *times) for job, parts in self._jobs.items() if (times := _done(parts)))
        return StatusMemory(redact(self.url), self._peak, self._total, self._polls, error, partitions)

    def _run(self) -> None:
        while True:
            self._poll()
            if self._stop.wait(self.poll_s):
                return

    def _poll(self) -> None:
        try:
            reply = requests.get(self.url, timeout=TIMEOUT_S)
            reply.raise_for_status()
            document = reply.json()
            memory = document.get("memory") or {}
            pipelines = document.get("pipelines") or []
        except (requests.RequestException, ValueError, AttributeError) as exc:
            self._error = redact(f"{self.url}: {exc}")
            return
        self._polls += 1
        used, total = memory.get("used_bytes"), memory.get("total_bytes")
        if isinstance(used, int):
            self._peak = max(used, self._peak or 0)
        if isinstance(total, int):
            self._total = total
        for job in pipelines if isinstance(pipelines, list) else ():
            if isinstance(job, dict) and isinstance(job.get("partitions"), list):
                self._jobs[str(job.get("job_id"))] = job["partitions"]


def _done(parts: list[Any]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A finished job's per-partition (synth_ms, gpu_ms); None while any partition is not done."""
    try:
        if not parts or any(p["state"] != "done" for p in parts):
            return None
        order = sorted(parts, key=lambda p: int(p["index"]))
        return tuple(int(p["synth_ms"]) for p in order), tuple(int(p["gpu_ms"]) for p in order)
    except (KeyError, TypeError, ValueError):  # a shape this poller does not know: no partition figures
        return None

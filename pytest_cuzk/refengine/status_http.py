"""cuzk's optional HTTP ``/status`` endpoint: one JSON snapshot of the engine.

Served when ``daemon.status_listen`` is set. Like cuzk, any GET whose path starts with
``/status`` gets the JSON (with ``Access-Control-Allow-Origin: *``); anything else is a
404. The top-level keys are cuzk's: uptime_secs, memory, synthesis, pipelines,
gpu_workers, allocations, counters, buffers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psutil

from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.jobs import DONE
from pytest_cuzk.vocab.kinds import KINDS

__all__ = ["StatusServer", "build_status", "start_status_server"]

log = logging.getLogger("cuzk_ref.status")


def _memory(engine: Engine, srs: list[dict[str, Any]], pce: list[dict[str, Any]]) -> dict[str, int]:
    budget = engine.config.total_budget
    if budget is None:
        budget = max(0, psutil.virtual_memory().total - engine.config.safety_margin)
    used = sum(a["bytes"] for a in srs + pce)
    return {"total_bytes": budget, "used_bytes": used, "available_bytes": max(0, budget - used)}


def _allocations(engine: Engine) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    now = time.monotonic()
    in_use = {j.kind.circuit_id for j in engine.jobs() if j.state == "running"}
    srs = [
        {
            "circuit_id": cid,
            "bytes": size,
            "last_used_secs_ago": round(now - engine.srs_last_used.get(cid, now), 3),
            "evictable": cid not in in_use,
        }
        for cid, size in engine.prover.loaded()
    ]
    pce = []
    for name in sorted(engine.pce_resident):
        path = engine.config.param_cache / KINDS[name].pce_file
        size = path.stat().st_size if path.exists() else 0
        pce.append(
            {"circuit_id": KINDS[name].pce_name, "bytes": size, "last_used_secs_ago": 0.0, "evictable": False}
        )
    return srs, pce


def _pipelines(engine: Engine) -> list[dict[str, Any]]:
    now = time.monotonic()
    return [
        {
            "job_id": job.job_id,
            "proof_kind": job.kind.status_name,
            "started_secs_ago": round(now - job.started, 3),
            "total_partitions": len(job.parts),
            "partitions_done": sum(1 for p in job.parts if p["state"] == "done"),
            "partitions": [dict(p) for p in job.parts],
        }
        for job in engine.jobs()
        if job.parts
    ]


def _counters(engine: Engine) -> dict[str, Any]:
    completed, failed, _ = engine.counts()
    return {
        "total_completed": sum(completed.values()),
        "total_failed": sum(failed.values()),
        "completed_by_kind": {KINDS[k].status_name: n for k, n in completed.items()},
        "failed_by_kind": {KINDS[k].status_name: n for k, n in failed.items()},
        "queue_depth": engine.queue_depth(),
    }


def build_status(engine: Engine) -> dict[str, Any]:
    """The JSON document ``GET /status`` returns."""
    srs, pce = _allocations(engine)
    proving = engine.proving
    jobs = engine.jobs()
    devices = engine.config.gpu_devices or (0,)
    return {
        "uptime_secs": round(engine.uptime_s(), 3),
        "memory": _memory(engine, srs, pce),
        "synthesis": {"max_concurrent": engine.config.synthesis_concurrency, "active": engine.synth_active},
        "pipelines": _pipelines(engine),
        "gpu_workers": [
            {
                "worker_id": 0,
                "gpu_ordinal": devices[0],
                "state": "proving" if proving else "idle",
                "current_job": proving.job_id if proving else None,
                "current_partition": None,
                "busy_secs": round(time.monotonic() - proving.started, 3) if proving else 0.0,
            }
        ],
        "allocations": {"srs": srs, "pce": pce},
        "counters": _counters(engine),
        "buffers": {
            "synth_in_flight": engine.synth_active,
            "provers_in_flight": 1 if proving else 0,
            "aux_in_flight": 0,
            "shells_in_flight": 0,
            "pending_handles": sum(1 for j in jobs if j.state != DONE),
        },
    }


class _Handler(BaseHTTPRequestHandler):
    engine: Engine

    def do_GET(self) -> None:
        if self.path.startswith("/status"):
            body = json.dumps(build_status(self.engine)).encode()
            self._reply(200, "application/json", body)
        else:
            self._reply(404, "text/plain", b"404 Not Found\n")

    def _reply(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("status http: " + format, *args)


class StatusServer:
    """The HTTP server and its thread; ``address`` is the bound ``host:port``."""

    def __init__(self, engine: Engine, host: str, port: int) -> None:
        handler = type("StatusHandler", (_Handler,), {"engine": engine})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.address = f"{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="ref-status-http", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def start_status_server(engine: Engine, listen: str) -> StatusServer | None:
    """Serve ``/status`` on ``listen`` (``host:port``); a bind failure is only logged, like cuzk."""
    host, _, port = listen.rpartition(":")
    try:
        server = StatusServer(engine, host.strip("[]") or "0.0.0.0", int(port))
    except (OSError, ValueError) as exc:
        log.error("failed to bind status HTTP server on %s: %s", listen, exc)
        return None
    log.info("status HTTP server listening on %s", server.address)
    return server

"""Reference engine throughput: N proofs of a kind, pipelined (synthesis overlaps proving) vs sequential.

Each figure is the wall time for N proofs submitted at once to a warm engine (key resident, PCE in use),
as proofs per minute, with the mean per-proof synthesis and prove-stage times the engine reported.
Synthesis is all of a proof's GIL-bound Python (witness, witness map, scalar conversion); the prove
stage is native MSMs only, so the two really run at once. The pipelined/sequential speedup is bounded
by the overlap: it can hide at most the shorter of the two stages, and on few cores the MSM threads
and synthesis also share the CPUs. Figures go to ``benchmark.extra_info`` and are printed at the end.
Run: ``python -m pytest tests/benchmarks/test_engine_bench.py -s`` (``CUZK_REF_BENCH_PRESET``,
``CUZK_REF_BENCH_PROOFS`` choose the preset and N).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.vocab.kinds import KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESET = os.environ.get("CUZK_REF_BENCH_PRESET", "default")
PROOFS = int(os.environ.get("CUZK_REF_BENCH_PROOFS", "4"))
FIGURES: dict[tuple[str, str], dict[str, float]] = {}


@pytest.fixture(scope="module")
def requests_by_kind(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pb.SubmitProofRequest]:
    out = tmp_path_factory.mktemp("data")
    manifest = tomllib.loads(gendata.generate(out, preset=PRESET).read_text())
    return {
        name: build_request(KINDS[name], out / entries[0]["file"], entries[0].get("request", {}))
        for name, entries in manifest["kinds"].items()
    }


@pytest.fixture(scope="module")
def param_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("params")
    _print_table()


def _print_table() -> None:
    if not FIGURES:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nreference engine throughput, preset {PRESET!r}, {PROOFS} proofs per run, {cpus} CPUs")
    print(f"{'kind':8} {'mode':10} {'proofs/min':>10} {'synth ms':>9} {'prove ms':>9} {'speedup':>8}")
    for (kind, mode), fig in sorted(FIGURES.items()):
        base = FIGURES.get((kind, "sequential"), fig)
        speedup = fig["proofs_per_min"] / base["proofs_per_min"]
        print(
            f"{kind:8} {mode:10} {fig['proofs_per_min']:10.1f} {fig['synthesis_ms']:9.0f}"
            f" {fig['gpu_compute_ms']:9.0f} {speedup:7.2f}x"
        )


def _run(engine: Engine, req: pb.SubmitProofRequest, n: int) -> list[pb.AwaitProofResponse]:
    jobs = [engine.submit(req)[0] for _ in range(n)]
    results = [engine.wait(job, None) for job in jobs]
    failed = [r.error_message for r in results if r.status != pb.AwaitProofResponse.COMPLETED]
    assert not failed, failed
    return results


@pytest.mark.parametrize("mode", ["pipelined", "sequential"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_engine_throughput(
    benchmark: Any,
    kind: str,
    mode: str,
    requests_by_kind: dict[str, pb.SubmitProofRequest],
    param_cache: Path,
) -> None:
    config = replace(
        RefConfig(), param_cache=param_cache, preset=PRESET, pipeline_enabled=mode == "pipelined"
    )
    engine = Engine.from_config(config)
    engine.start()
    try:
        _run(engine, requests_by_kind[kind], 1)  # warm: setup, key load and PCE are not what is measured
        t0 = time.perf_counter()
        results = benchmark.pedantic(
            _run, args=(engine, requests_by_kind[kind], PROOFS), rounds=1, iterations=1
        )
        wall = time.perf_counter() - t0
    finally:
        engine.shutdown()
    figures = {
        "proofs": PROOFS,
        "wall_s": round(wall, 3),
        "proofs_per_min": round(60 * PROOFS / wall, 2),
        "synthesis_ms": sum(r.synthesis_ms for r in results) / PROOFS,
        "gpu_compute_ms": sum(r.gpu_compute_ms for r in results) / PROOFS,
    }
    benchmark.extra_info.update(figures, preset=PRESET, mode=mode)
    FIGURES[(kind, mode)] = figures


@pytest.mark.parametrize("kind", list(KINDS))
def test_pipelining_does_not_cost_throughput(kind: str) -> None:
    """Runs after both modes of a kind: overlapping synthesis with proving must not be slower."""
    pipelined, sequential = (FIGURES.get((kind, mode)) for mode in ("pipelined", "sequential"))
    if pipelined is None or sequential is None:
        pytest.fail(f"run test_engine_throughput[{kind}-pipelined] and [{kind}-sequential] with this test")
    ratio = pipelined["proofs_per_min"] / sequential["proofs_per_min"]
    print(f"\n{kind}: pipelined/sequential {ratio:.2f}x")
    assert ratio > 0.95, f"pipelined {kind} is {ratio:.2f}x sequential"

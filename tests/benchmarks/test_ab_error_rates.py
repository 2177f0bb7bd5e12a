"""How often the A/B gate is wrong on a drifting host, on the reference engine, one core kept busy.

Each comparison is a fresh ``pytest`` with a fresh pair of daemons, ``--cuzk-daemon=ref
--cuzk-ab=ref`` and the README's gate ``--cuzk-compare-fail=throughput:5%``: ``RUNS`` with two
identical builds, ``RUNS`` with a candidate planted slower by ``[ref.faults] slow_factor = 1.15``
in its ``--cuzk-config``, and ``RUNS`` with 1.10. Targets: no identical pair fails, at least 9 of
10 slow candidates are caught at each factor. All the while another process keeps one core busy
(a shared runner's neighbour). The case is ``test_prove[porep-batch1-j1]``: the reference
engine's PoRep proofs vary least from one proof to the next (CV about 7% where WinningPoSt's is
about 22% on the 2-core machine), so a pair of daemons resolves the most in the fewest seconds.
First it times the same case as two separate runs (a saved baseline, then a gated comparison
with it) against one A/B run. Run: ``pytest tests/benchmarks/test_ab_error_rates.py --figures -s``.

Knobs (environment): ``CUZK_AB_BENCH_RUNS`` runs per condition; ``CUZK_AB_BENCH_KIND`` another
kind; ``CUZK_AB_BENCH_PROVER=cpu`` keeps both daemons on the CPU prover where a GPU would be used
(``[gpus] devices = []``); ``CUZK_AB_BENCH_SLOTS=N`` splits a large host's CPUs into N equal slots
and runs N comparisons at once, each pinned to its slot with one of the slot's cores kept busy, so
that 8 slots of a 16-core host are 8 busy 2-core runners sharing one memory system;
``CUZK_AB_BENCH_FACTORS=1.10`` the planted factors (comma-separated);
``CUZK_AB_BENCH_NEIGHBOUR=drifting`` replaces the one busy core with a neighbour on every core of
the slot whose load wanders over minutes (the drift that two separate runs cannot tell from a
change);
``CUZK_AB_BENCH_THREADS=N`` gives both daemons ``[synthesis] threads = N``: the CPU prover's MSM
threads are what makes its proofs vary (on a quiet 2-core slot of the H200 host, per-proof CV 1-3%
with one thread, 10-28% with two), so one thread trades speed for a steadier comparison.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from queue import Queue

import pytest
from support import drifting_neighbours, gate_verdict, run_ref_case

RUNS = int(os.environ.get("CUZK_AB_BENCH_RUNS", "10"))
KIND = os.environ.get("CUZK_AB_BENCH_KIND", "porep")
CPU_PROVER = os.environ.get("CUZK_AB_BENCH_PROVER", "") == "cpu"
SLOTS = int(os.environ.get("CUZK_AB_BENCH_SLOTS", "1"))
THREADS = int(os.environ.get("CUZK_AB_BENCH_THREADS", "0"))  # 0: the engine's default
NEIGHBOUR = os.environ.get("CUZK_AB_BENCH_NEIGHBOUR", "busy")
CASE = ("-k", f"test_prove and {KIND}-batch1-j1")
GATE = "--cuzk-compare-fail=throughput:5%"
FACTORS = tuple(float(f) for f in os.environ.get("CUZK_AB_BENCH_FACTORS", "1.15,1.10").split(","))
RUN_TIMEOUT_S = 600  # an undecided A/B case measures up to 8 case budgets (360 s) after its warm-up


def _slots() -> list[set[int]]:
    """The CPU sets the comparisons run on: the whole host once, or ``SLOTS`` equal slices of it."""
    cpus = sorted(os.sched_getaffinity(0))
    if SLOTS <= 1:
        return [set(cpus)]
    size = len(cpus) // SLOTS
    assert size >= 2, f"{len(cpus)} CPUs cannot make {SLOTS} slots of at least 2"
    return [set(cpus[i * size : (i + 1) * size]) for i in range(SLOTS)]


def _pinned(cpus: set[int]) -> Callable[[], None]:
    return lambda: os.sched_setaffinity(0, cpus)


def _busy(cpus: set[int]) -> list[subprocess.Popen[bytes]]:
    """The slot's neighbours: one spinning on one of its cores, or one drifting on each."""
    if NEIGHBOUR == "drifting":
        return drifting_neighbours(cpus)
    pin = {min(cpus)} if SLOTS > 1 else cpus
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_pinned(pin))]


def _config(tmp: Path, name: str, factor: float | None = None) -> Path:
    text = "[gpus]\ndevices = []\n" if CPU_PROVER else ""
    text += f"[synthesis]\nthreads = {THREADS}\n" if THREADS else ""
    if factor is not None:
        text += f"[ref.faults]\nslow_factor = {factor}\n"
    path = tmp / f"{name}.toml"
    path.write_text(text)
    return path


def _pair(out: str) -> str:
    """The A/B line of the summary: the paired change, its interval and p-value, how the pairs ran."""
    line = re.search(r"^A/B \S+: candidate against baseline, (.*)$", out, re.M)
    assert line, out[-3000:]
    return re.sub(r", order [BC ]+;", ";", line[1])


@pytest.mark.timeout((3 * RUNS + 3) * RUN_TIMEOUT_S)
def test_the_ab_gate_fails_no_identical_pair_and_catches_planted_slowdowns(tmp_path: Path) -> None:
    slots: Queue[tuple[set[int], Path]] = Queue()
    for i, cpus in enumerate(_slots()):
        (tmp_path / f"slot{i}").mkdir()
        slots.put((cpus, tmp_path / f"slot{i}"))
    busy = [proc for cpus, _ in list(slots.queue) for proc in _busy(cpus)]
    one = slots.queue[0]
    base = _config(tmp_path, "baseline")
    ab = ("--cuzk-ab=ref", f"--cuzk-ab-config={base}", GATE)

    def run(*args: str) -> tuple[int, str, float]:
        cpus, tmp = slots.get()
        try:
            return run_ref_case(CASE, tmp, *args, timeout_s=RUN_TIMEOUT_S, preexec_fn=_pinned(cpus))
        finally:
            slots.put((cpus, tmp))

    def timed(*args: str) -> tuple[int, str, float]:
        """One of the wall-time runs, all in the first slot (the saved run is in its storage)."""
        return run_ref_case(CASE, one[1], f"--cuzk-config={base}", *args, timeout_s=RUN_TIMEOUT_S,
                            preexec_fn=_pinned(one[0]))  # fmt: skip

    conditions = [("identical", base)] + [
        (f"slow_factor={f}", _config(tmp_path, f"slow-{f}", f)) for f in FACTORS
    ]
    # Round-robin over the conditions, so that a run cut short has measured each about as often.
    jobs = [(name, config, i) for i in range(1, RUNS + 1) for name, config in conditions]
    failed = {name: 0 for name, _ in conditions}
    if SLOTS > 1:
        slots.get()  # the first slot times the separate runs while the others compare, then joins them

    def separate_then_ab() -> list[tuple[int, str, float]]:
        done = [timed("--benchmark-save=separate"), timed("--benchmark-compare=0001", GATE), timed(*ab)]
        if SLOTS > 1:
            slots.put(one)
        return done

    try:
        # One worker per slot: the first times the separate runs (before the rest when it is the only one).
        with ThreadPoolExecutor(SLOTS) as pool:
            timing = pool.submit(separate_then_ab)
            if SLOTS <= 1:
                timing.result()
            compared = {pool.submit(run, f"--cuzk-config={job[1]}", *ab): job for job in jobs}
            for done in as_completed(compared):  # printed as they end: a cut-off run still shows them
                name, _, i = compared[done]
                code, out, seconds = done.result()
                verdict = gate_verdict(code, out)
                failed[name] = failed.get(name, 0) + (verdict == "failed")
                tally = f"{failed[name]} {'failed' if name == 'identical' else 'caught'} so far"
                print(f"  {name} #{i}: {verdict} ({tally}, {seconds:.0f} s): {_pair(out)}", flush=True)
            (code, out, first), (code2, out2, second), (code3, out3, paired) = timing.result()
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert code == 0, out[-3000:]
    assert code2 in (0, 1), out2[-3000:]
    assert code3 in (0, 1), out3[-3000:]
    where = f"{SLOTS} slots of {len(one[0])} CPUs at once" if SLOTS > 1 else "the whole host"
    prover = "CPU prover forced" if CPU_PROVER else "the engine's own prover choice"
    neighbour = "a drifting neighbour on each core" if NEIGHBOUR == "drifting" else "one core busy"
    print(f"\n[A/B error rates] {CASE[1]}, gate {GATE}, default plan, {where}, {neighbour}, {prover}")
    print(
        f"  wall time: two separate runs {first:.0f} s + {second:.0f} s = {first + second:.0f} s; "
        f"one A/B run {paired:.0f} s ({_pair(out3)})"
    )
    rates = "; ".join(f"{name}: {n} of {RUNS} caught" for name, n in failed.items() if name != "identical")
    wrong = failed["identical"]
    print(f"[A/B error rates] identical builds: {wrong} of {RUNS} failed (target 0); {rates} (target >= 9)")
    assert failed["identical"] == 0, f"{failed['identical']} of {RUNS} identical-build pairs failed"
    for name, n in failed.items():
        if name != "identical":
            assert n >= 0.9 * RUNS, f"only {n} of {RUNS} candidates at {name} were caught"

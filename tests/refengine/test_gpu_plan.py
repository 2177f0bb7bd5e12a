"""The GPU prover's logic that runs without a GPU: the signed-digit MSM, device choice, the prover label.

The Pippenger here is the kernels' algorithm step by step in Python over py-arkworks points
(the digits ``plan.signed_digits`` gives, buckets, running-sum weights, the Horner fold), so
that a mistake in the plan shows on any machine, not only on a GPU host.
"""

from __future__ import annotations

import random
import sys
import types

import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from pytest_cuzk.backends.profiles import CuzkProfile, detect_profile
from pytest_cuzk.backends.reference import RefProfile
from pytest_cuzk.refengine.config import ConfigError, parse_config
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.gpu import CPU_LABEL, open_gpu
from pytest_cuzk.refengine.gpu.plan import MAX_WINDOW_BITS, MsmPlan, signed_digits

G = G1Point()


def pippenger(points: list[G1Point], scalars: list[int], c: int) -> G1Point:
    """The kernels' MSM: signed digits, bucket sums, running-sum weights per window, Horner over windows."""
    windows, half = -(-256 // c), 1 << (c - 1)
    digits = [signed_digits(k, c, windows) for k in scalars]
    acc = G1Point.identity()
    for w in reversed(range(windows)):
        for _ in range(c):
            acc = acc + acc
        buckets = [G1Point.identity() for _ in range(half)]
        for p, ds in zip(points, digits, strict=True):
            if ds[w]:
                buckets[abs(ds[w]) - 1] = buckets[abs(ds[w]) - 1] + (p if ds[w] > 0 else -p)
        running = total = G1Point.identity()
        for b in reversed(buckets):
            running = running + b
            total = total + running
        acc = acc + total
    return acc


def _msm(points: list[G1Point], scalars: list[int]) -> G1Point:
    return G1Point.multiexp_unchecked(points, [Scalar(k) for k in scalars])


@pytest.mark.parametrize("c", [4, 5, 9, 13, 16])
def test_signed_digits_recompose_within_half_a_window(c):
    rnd = random.Random(c)
    windows = -(-256 // c)
    edge = [0, 1, R - 1, R - 2, (1 << 255) - 1, (1 << (c - 1)), (1 << c) - 1, (1 << (c - 1)) + 1]
    for k in edge + [rnd.randrange(R) for _ in range(200)]:
        ds = signed_digits(k, c, windows)
        assert sum(d << (c * w) for w, d in enumerate(ds)) == k
        assert all(-(1 << (c - 1)) <= d <= 1 << (c - 1) for d in ds)


def test_signed_digits_refuse_scalars_the_top_window_cannot_hold():
    with pytest.raises(ValueError, match="2\\^255"):
        signed_digits(1 << 255, 16, 16)


@pytest.mark.parametrize("n", [1, 7, 100, 5000, 1 << 16, 1 << 20, 1 << 24])
def test_plan_covers_256_bits_with_whole_segments(n):
    plan = MsmPlan(n)
    assert 4 <= plan.c <= MAX_WINDOW_BITS
    assert plan.c * plan.windows >= 256 > plan.c * (plan.windows - 1)
    assert plan.buckets_per_window % plan.segment == 0
    assert plan.segments * plan.segment == plan.total_buckets


def _cases() -> dict[str, tuple[list[G1Point], list[int]]]:
    rnd = random.Random(7)
    pts = [G * Scalar(rnd.randrange(1, R)) for _ in range(24)]
    ks = [rnd.randrange(R) for _ in range(24)]
    return {
        "random": (pts, ks),
        "zero scalars": (pts, [0 if i % 3 else k for i, k in enumerate(ks)]),
        "all zero": (pts, [0] * 24),
        "identity bases": ([G1Point.identity() if i % 4 == 0 else p for i, p in enumerate(pts)], ks),
        "repeated base": ([pts[0]] * 24, ks),
        "near r": (pts, [R - 1 - i for i in range(24)]),
        "cancelling": ([pts[0], -pts[0]] * 12, [5] * 24),
    }


@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("c", [4, 7])
def test_python_pippenger_matches_arkworks(case, c):
    points, scalars = _cases()[case]
    assert pippenger(points, scalars, c) == _msm(points, scalars)


def test_gpus_devices_empty_list_asks_for_the_cpu():
    assert parse_config({"gpus": {"devices": []}}, "t.toml").gpus_off
    given = parse_config({"gpus": {"devices": [1]}}, "t.toml")
    assert (given.gpus_off, given.gpu_devices) == (False, (1,))
    assert not parse_config({}, "t.toml").gpus_off
    with pytest.raises(ConfigError, match=r"gpus\.devices entry"):
        parse_config({"gpus": {"devices": ["0"]}}, "t.toml")


def test_open_gpu_says_why_the_cpu_proves(monkeypatch):
    assert open_gpu((), off=True) == (None, "[gpus] devices is empty")
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    gpu, why = open_gpu((), off=False)
    assert gpu is None and "CuPy is not installed" in why


def _fake_cupy(count) -> types.ModuleType:
    def get_count() -> int:
        if isinstance(count, Exception):
            raise count
        return count

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_count))
    return cupy


def test_open_gpu_without_a_device_or_with_absent_ordinals(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(RuntimeError("cudaErrorNoDevice")))
    assert open_gpu((), off=False) == (None, "no CUDA device (cudaErrorNoDevice)")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(1))
    gpu, why = open_gpu((2, 3), off=False)
    assert gpu is None and why == "no CUDA device among [gpus] devices [2, 3] (1 present)"


def test_cpu_engine_says_so_in_cuzk_ref_info(start_engine, tmp_path):
    from pytest_cuzk.proto import pb

    running = start_engine(gpus_off=True)
    assert running.engine.prover.prover_label == CPU_LABEL
    text = running.stub.GetMetrics(pb.GetMetricsRequest(), timeout=10).prometheus_text
    info = next(line for line in text.splitlines() if line.startswith("cuzk_ref_info{"))
    assert 'prover="cpu"' in info
    profile = detect_profile(running.address, CuzkProfile("cuzk"), local=True, data_dir=tmp_path)
    assert isinstance(profile, RefProfile) and profile.identity().endswith(" prover=cpu")

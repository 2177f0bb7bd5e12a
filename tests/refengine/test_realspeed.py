"""cuzk-ref at real speed: each stage paced as cuzk's, per-partition times in /status, sums in AwaitProof."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.engine_support import RefData, Running

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.config import REAL_SPEEDS, ConfigError, Faults, parse_config
from pytest_cuzk.refengine.realspeed import MODELS
from pytest_cuzk.refengine.status_http import build_status
from pytest_cuzk.vocab.kinds import KINDS

Status = pb.AwaitProofResponse
SCALE = 0.02  # a PoRep partition's synthesis 0.84 s, its GPU stage 64 ms


def test_every_model_paces_every_kind():
    assert set(MODELS) == set(REAL_SPEEDS)
    assert all(set(model) == set(KINDS) for model in MODELS.values())


def test_a_porep_proof_at_real_speed_has_each_partitions_times_and_cuzks_sums(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(faults=Faults(real_speed="32g", real_speed_scale=SCALE))
    req = ref_data.request("porep", request_id="real-speed-1")
    result = running.stub.Prove(pb.ProveRequest(submit=req)).result
    assert result.status == Status.COMPLETED, result.error_message
    (job,) = [j for j in build_status(running.engine)["pipelines"] if j["job_id"] == "real-speed-1"]
    synth = [p["synth_ms"] for p in job["partitions"]]
    gpu = [p["gpu_ms"] for p in job["partitions"]]
    assert len(synth) == len(gpu) == KINDS["porep"].partitions
    pace = MODELS["32g"]["porep"]
    # each partition its own draw around the model (a proof's host factor of ~8% on top)
    assert all(0.6 < s / (pace.synth_s * SCALE * 1000) < 1.5 for s in synth), synth
    assert all(0.6 < g / (pace.gpu_s * SCALE * 1000) < 1.5 for g in gpu), gpu
    assert len(set(gpu)) > 1, "partitions are not all given the pass's time"
    # AwaitProof sums partitions, as cuzk's: synthesis side by side sums past the proof's own time
    assert abs(result.synthesis_ms - sum(synth)) <= len(synth)
    assert abs(result.gpu_compute_ms - sum(gpu)) <= len(gpu)
    assert result.synthesis_ms > result.total_ms >= max(synth) + sum(gpu) - 20


def test_a_drift_slows_each_proof_against_the_one_before(
    start_engine: Callable[..., Running], ref_data: RefData
) -> None:
    running = start_engine(faults=Faults(real_speed="32g", real_speed_scale=1.0, real_speed_drift_pct=40.0))
    totals = []
    for i in range(4):
        req = ref_data.request("winning", request_id=f"drift-{i}")
        result = running.stub.Prove(pb.ProveRequest(submit=req)).result
        assert result.status == Status.COMPLETED, result.error_message
        totals.append(result.gpu_compute_ms)
    assert totals[-1] > 1.6 * totals[0], totals  # 1 + 3 x 40%, less the host's draws


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ({"real_speed": "64g"}, "real_speed must be one of 32g"),
        ({"real_speed": "32g", "real_speed_scale": 0}, "real_speed_scale must be above 0 and at most 10"),
        ({"real_speed_drift_pct": 80}, "real_speed_drift_pct must be between -50 and 50"),
        ({"real_speed": 32}, "real_speed must be str"),
    ],
)
def test_bad_real_speed_settings_name_the_key(faults, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"ref": {"faults": faults}}, "rs.toml", env={})

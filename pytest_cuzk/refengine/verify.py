"""Full verification of reference-engine proofs, from the request alone.

The plugin calls ``verify_proof`` on every proof the reference engine returns:
public inputs are derived from the request exactly as the prover's self-check
derives them, the circuit shape comes from the ``.vk`` file's metadata, and
each 192-byte partition proof must pass the Groth16 pairing check.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import JobInputError, Preset
from pytest_cuzk.refengine.circuits.registry import Inputs, circuit_for
from pytest_cuzk.refengine.groth16 import Proof, VerifyingKey, verify, verify_all
from pytest_cuzk.refengine.keyfile import read_vk
from pytest_cuzk.vocab.kinds import GROTH16_PROOF_LEN, ProofKindInfo

__all__ = ["first_bad_partition", "key_stem", "verify_proof"]

_cache: dict[tuple[Path, int], tuple[VerifyingKey, dict]] = {}
_cache_lock = threading.Lock()


def key_stem(preset: str, circuit_id: str) -> str:
    """File stem of a circuit's .params/.vk in the param cache (per preset: sizes differ)."""
    return f"cuzk-ref-{preset}-{circuit_id}"


def first_bad_partition(vk: VerifyingKey, inputs: Inputs, proof: bytes) -> int | None:
    """The first partition whose proof is malformed or does not verify (0: wrong length); None if all do.

    All partitions are checked at once (``verify_all``); only when that fails is each checked
    in turn, to name the first bad one.
    """
    if len(proof) != inputs.partitions * GROTH16_PROOF_LEN:
        return 0
    try:
        pieces = [Proof.from_bytes(proof[k * GROTH16_PROOF_LEN : (k + 1) * GROTH16_PROOF_LEN])
                  for k in range(inputs.partitions)]  # fmt: skip
    except ValueError:
        pieces = []
    publics = [inputs.public_inputs(k) for k in range(inputs.partitions)]
    if pieces and verify_all(vk, publics, pieces):
        return None
    for k in range(inputs.partitions):
        try:
            piece = Proof.from_bytes(proof[k * GROTH16_PROOF_LEN : (k + 1) * GROTH16_PROOF_LEN])
        except ValueError:
            return k
        if not verify(vk, publics[k], piece):
            return k
    return None


def _find_vk(param_cache: Path, circuit_id: str, preset: str | None) -> Path:
    if preset is not None:
        path = param_cache / f"{key_stem(preset, circuit_id)}.vk"
        if not path.exists():
            raise ValueError(
                f"verifying key {path} not found: prove one {circuit_id} proof with preset {preset!r}"
            )
        return path
    found = sorted(param_cache.glob(f"cuzk-ref-*-{circuit_id}.vk"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValueError(f"no reference-engine verifying key for {circuit_id} in {param_cache}")
    names = ", ".join(p.name for p in found)
    raise ValueError(f"several verifying keys for {circuit_id} in {param_cache} ({names}); pass preset=")


def _load_vk(path: Path) -> tuple[VerifyingKey, dict]:
    key = (path, path.stat().st_mtime_ns)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = read_vk(path)
        return _cache[key]


def verify_proof(
    param_cache: Path,
    kind: ProofKindInfo,
    request: pb.SubmitProofRequest,
    proof: bytes,
    preset: str | None = None,
) -> bool:
    """True when ``proof`` is a valid reference-engine proof for ``request``.

    False for a proof that does not verify, has the wrong length or a bad point
    encoding. ValueError, with what to do, when the ``.vk`` is missing or the request
    cannot be parsed. ``preset`` picks the key when the cache holds several presets'.
    """
    vk, meta = _load_vk(_find_vk(Path(param_cache), kind.circuit_id, preset))
    shape = Preset(**meta["shape"])
    try:
        inputs = circuit_for(kind.circuit_id).parse(request, shape)
    except JobInputError as exc:
        raise ValueError(f"cannot derive {kind.name} public inputs from the request: {exc}") from None
    return first_bad_partition(vk, inputs, proof) is None

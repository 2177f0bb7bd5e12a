"""The reference prover: what the reference engine runs for every proof.

Stages as in cuzk's pipeline: ``parse`` (request to circuit inputs, cuzk's
error messages), ``synthesize`` (one partition's CPU work, all GIL-bound Python:
witness, A·z, B·z, C·z, the QAP witness map (FFTs) to h(x), and z and h as native
scalars; on the GPU prover the witness map runs on the GPU and h stays there; a large
circuit's partition witnesses are computed side by side in worker processes, ``prefetch``),
``prove`` (the "GPU" stage: only the MSMs, which release the GIL and are
sliced over a thread pool so that every core works; any number of partitions in
one pass), ``self_check`` (full pairing verification). Keeping the prove stage
free of Python arithmetic is what lets the engine synthesise the next proof
while the MSMs of the current one run.

Parameters are per preset and circuit in the param cache
(``cuzk-ref-<preset>-<circuit id>.params`` and ``.vk``), made by a trusted
setup on first need and reused afterwards. The first synthesis of a circuit
goes through the constraint system and writes ``pce-<name>.bin``; with
``reuse_pce`` later ones, also after a restart, use the PCE (witness generation
plus sparse mat-vec) when it carries the circuit's constraint digest. Without it
(cuzk's way) every synthesis takes the constraint system, and the PCE is
extracted again, in the background, after every start and never read back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import keyfile
from pytest_cuzk.refengine.circuits import PRESETS, JobInputError, Preset
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.field import get_domain
from pytest_cuzk.refengine.gpu import CPU_LABEL
from pytest_cuzk.refengine.groth16 import (
    PhaseTimer,
    ProofInput,
    ProvingKey,
    create_random_proofs,
    generate_random_parameters,
    to_scalars,
)
from pytest_cuzk.refengine.param_cache import check_param_cache
from pytest_cuzk.refengine.pce import PceError, constraint_digest, load_pce, pce_path, write_pce
from pytest_cuzk.refengine.qap import h_coefficients
from pytest_cuzk.refengine.r1cs import ConstraintSystem, Evaluations, Matrices
from pytest_cuzk.refengine.stages import ParsedJob, Source, Synthesized
from pytest_cuzk.refengine.verify import first_bad_partition, key_stem
from pytest_cuzk.refengine.witness_pool import (
    MIN_CONSTRAINTS,
    WitnessPool,
    partition_constraints,
    partition_witness,
    usable_cpus,
)
from pytest_cuzk.vocab.kinds import ProofKindInfo, by_circuit

if TYPE_CHECKING:
    from pytest_cuzk.refengine.gpu.keys import GpuKeys
    from pytest_cuzk.refengine.gpu.msm import GpuMsm

__all__ = ["PRESETS", "JobInputError", "Preset", "RefProver"]

log = logging.getLogger(__name__)


@dataclass
class _Resident:
    pk: ProvingKey
    size_bytes: int


class RefProver:
    """Setup, PCE, synthesis, proving and self-check for the reference circuits; thread-safe."""

    def __init__(
        self,
        param_cache: Path,
        preset: str = "default",
        seed: int = 0,
        threads: int = 0,
        reuse_pce: bool = True,
        gpu: GpuMsm | None = None,
        parallel_from: int = MIN_CONSTRAINTS,
    ) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown reference preset {preset!r}; use one of: {', '.join(PRESETS)}")
        self.param_cache = Path(param_cache)
        check_param_cache(self.param_cache)
        self.reuse_pce = reuse_pce
        self._preset = PRESETS[preset]
        self.seed = seed  # the data seed the engine passes to gendata; proofs always use fresh randomness
        self.threads = threads or usable_cpus()
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ref-msm")
        self.witness_pool = WitnessPool(self.threads)  # the engine closes it at shutdown
        self._parallel_from = parallel_from  # the smallest circuit whose witnesses go to the workers
        self._lock = threading.Lock()
        self._circuit_locks: dict[str, threading.Lock] = {}
        self._keys: dict[str, _Resident] = {}
        self._pce: dict[str, Matrices] = {}
        self._extracted: set[str] = set()  # circuits whose PCE this process has written
        self.extract_delay_s: Callable[[str], float] = lambda kind: 0.0  # real speed: a PCE's extraction
        self.timer = PhaseTimer()
        self._gpu: GpuKeys | None = None
        if gpu is not None:
            from pytest_cuzk.refengine.gpu.keys import GpuKeys

            self._gpu = GpuKeys(gpu)

    @property
    def prover_label(self) -> str:
        """Which prover runs the MSMs: ``gpu:<device name>`` or ``cpu``."""
        return self._gpu.label if self._gpu is not None else CPU_LABEL

    def gpu_bytes(self) -> int | None:
        """The GPU prover's device memory by its own count (context and allocations); None on the CPU."""
        return self._gpu.device_bytes() if self._gpu is not None else None

    @property
    def preset(self) -> Preset:
        """The circuit size preset."""
        return self._preset

    def _circuit_lock(self, circuit_id: str) -> threading.Lock:
        with self._lock:
            return self._circuit_locks.setdefault(circuit_id, threading.Lock())

    # --- parameters -------------------------------------------------------------------------------

    def params_path(self, circuit_id: str) -> Path:
        """``<param_cache>/cuzk-ref-<preset>-<circuit id>.params`` (the .vk sits alongside)."""
        return self.param_cache / f"{key_stem(self._preset.name, circuit_id)}.params"

    def _params_current(self, circuit_id: str) -> bool:
        params = self.params_path(circuit_id)
        if not (params.exists() and params.with_suffix(".vk").exists()):
            return False
        try:
            meta = keyfile.read_meta(params)
        except (ValueError, OSError):
            return False
        return meta.get("shape") == self._preset.shape() and "constraint_digest" in meta

    def ensure_params(self, circuit_id: str) -> None:
        """Run the trusted setup for ``circuit_id`` unless current .params/.vk files exist."""
        circuit = circuit_for(circuit_id)
        path = self.params_path(circuit_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Daemons sharing a param cache (several on one host, xdist workers) set up once.
        with self._circuit_lock(circuit_id), FileLock(f"{path}.lock"):
            if self._params_current(circuit_id):
                return
            log.info("running trusted setup for %s (preset %s)", circuit_id, self._preset.name)
            cs = ConstraintSystem()
            circuit.synthesize(cs, self._preset, circuit.blank(self._preset))
            with self.timer.phase("setup"):
                pk = generate_random_parameters(cs.matrices(), self.timer)
            pk.meta.update(
                circuit_id=circuit_id,
                kind=circuit.kind.name,
                shape=self._preset.shape(),
                constraint_digest=constraint_digest(cs.matrices()),
            )
            keyfile.write_params(path, pk)
            keyfile.write_vk(path.with_suffix(".vk"), pk.vk, pk.meta)

    def ensure_loaded(self, circuit_id: str) -> float:
        """Load the proving key (after a setup if needed); seconds spent, 0.0 when already resident."""
        return self._load(circuit_id)[1]

    def _load(self, circuit_id: str) -> tuple[ProvingKey, float]:
        resident = self._keys.get(circuit_id)
        if resident is not None:
            return resident.pk, 0.0
        t0 = time.perf_counter()
        self.ensure_params(circuit_id)
        with self._circuit_lock(circuit_id):
            resident = self._keys.get(circuit_id)
            if resident is None:
                path = self.params_path(circuit_id)
                resident = _Resident(keyfile.read_params(path), path.stat().st_size)
                if self._gpu is not None:
                    vram = self._gpu.load(resident.pk)
                    log.info("%s: bases on %s (%d MiB)", circuit_id, self.prover_label, vram >> 20)
                with self._lock:
                    self._keys[circuit_id] = resident
                return resident.pk, time.perf_counter() - t0
        return resident.pk, 0.0

    def preload(self, circuit_id: str) -> tuple[bool, float]:
        """(already_loaded, load seconds) like PreloadSRS; KeyError for ids cuzk does not know."""
        circuit_for(circuit_id)
        if circuit_id in self._keys:
            return True, 0.0
        return False, self.ensure_loaded(circuit_id)

    def evict(self, circuit_id: str) -> tuple[bool, int]:
        """Drop a resident proving key: (was_loaded, freed_bytes)."""
        with self._lock:
            gone = self._keys.pop(circuit_id, None)
        if gone is not None and self._gpu is not None:
            self._gpu.evict(gone.pk)
        return (gone is not None, gone.size_bytes if gone else 0)

    def loaded(self) -> list[tuple[str, int]]:
        """(circuit id, size in bytes) of every resident proving key."""
        with self._lock:
            return [(cid, r.size_bytes) for cid, r in self._keys.items()]

    # --- the pipeline stages --------------------------------------------------------------------

    def parse(self, kind: ProofKindInfo, req: pb.SubmitProofRequest) -> ParsedJob:
        """Validate a request; JobInputError carries cuzk's FAILED message."""
        inputs = circuit_for(kind.circuit_id).parse(req, self._preset)
        return ParsedJob(kind, inputs.partitions, inputs)

    def _resident_pce(self, circuit_id: str, name: str) -> Matrices | None:
        if not self.reuse_pce:
            return None
        if circuit_id in self._pce:
            return self._pce[circuit_id]
        path = pce_path(self.param_cache, name)
        if not path.exists():
            return None
        with self._circuit_lock(circuit_id), self.timer.phase("pce: load"):
            expected = None
            if self._params_current(circuit_id):
                expected = keyfile.read_meta(self.params_path(circuit_id))["constraint_digest"]
            try:
                m = load_pce(path, expected)
            except PceError as exc:
                log.warning("ignoring unusable PCE (%s); it will be extracted again", exc)
                return None
            self._pce[circuit_id] = m
            return m

    def prefetch(self, job: ParsedJob) -> None:
        """Start a large circuit's partitions in the worker processes, side by side.

        On the PCE path the workers make each partition's witness. Behaving as cuzk (no PCE read
        back) they synthesise each partition whole, but for the first while this process has not
        extracted the PCE yet: that extraction needs its constraint system here. Reusing the PCE,
        a job that finds none resident leaves its partitions here: the first writes the PCE and
        the rest take it. A partition the request cannot give a witness for, and those after it,
        are left to ``synthesize``, which raises its ``JobInputError`` with the partition's number.
        """
        cid = job.kind.circuit_id
        m = self._resident_pce(cid, job.kind.pce_name)
        resident = self._keys.get(cid)
        size = m.num_constraints if m is not None else resident.pk.meta["num_constraints"] if resident else 0
        if job.partitions < 2 or size < self._parallel_from or (m is None and self.reuse_pce):
            return
        work: Callable[[str, Preset, Any], object] = partition_constraints
        if m is not None:
            work = partition_witness
        first = int(m is None and cid not in self._extracted)
        for k in range(first, job.partitions):
            try:
                witness = job.inputs.witness(k)
            except JobInputError:
                return
            job.witnesses[k] = self.witness_pool.submit(work, cid, self._preset, witness)

    def synthesize(self, job: ParsedJob, partition: int) -> Synthesized:
        """All of one partition's CPU work, so that the prove stage is left with MSMs only.

        The assignment comes from a worker process when ``prefetch`` sent the partition there,
        else from the PCE when one exists, else from the constraint system (which also extracts
        the PCE; that one-off is not counted in ``synth_s``; a worker's counts its own time, not
        the wait for it, as cuzk sums its partitions' synthesis times). Then A·z, B·z, C·z
        (the PCE's sparse products; the constraint system has them already), the witness map
        and the conversion of z and h to native scalars; the GPU prover runs the products and
        the witness map on the device and keeps z and h there.
        """
        t0 = time.perf_counter()
        z, src = self._assign(job, partition)
        waited_s = time.perf_counter() - t0
        assign_s = src.seconds if isinstance(src, Evaluations) else waited_s
        cs = src if isinstance(src, ConstraintSystem) else None
        pce = isinstance(src, Matrices)
        self.timer.add("synthesis: witness (PCE path)" if pce else "synthesis: constraint system", waited_s)
        if cs is not None and self.reuse_pce:
            self._extract_pce(job.kind.circuit_id, job.kind.pce_name, cs)
        elif cs is not None and job.kind.circuit_id not in self._extracted:
            # cuzk has no "in progress" flag: every job before the first extraction ends starts one.
            args = (job.kind.circuit_id, job.kind.pce_name, cs)
            threading.Thread(target=self._extract_pce, args=args, name="ref-pce", daemon=True).start()
        t1 = time.perf_counter()
        domain = get_domain(src.num_constraints)
        h_limbs = z_limbs = None
        if self._gpu is not None:
            with self.timer.phase("synthesis: A·z, B·z, C·z + witness map (GPU)"):
                if isinstance(src, Matrices):
                    h_limbs, z_limbs = self._gpu.witness_map_pce(src, z, domain)
                else:
                    h_limbs, z_limbs = self._gpu.witness_map(src.a, src.b, src.c, z, domain)
            zs, hs = [], []  # the MSMs read z and h on the device
        else:
            if isinstance(src, Matrices):
                with self.timer.phase("synthesis: A·z, B·z, C·z (PCE)"):
                    abc = (src.a.matvec(z), src.b.matvec(z), src.c.matvec(z))
            else:
                abc = (src.a, src.b, src.c)
            with self.timer.phase("synthesis: witness map (FFT)"):
                h = h_coefficients(*abc, domain)
            with self.timer.phase("synthesis: scalar conversion"):
                zs, hs = to_scalars(z), to_scalars(h)
        synth_s = assign_s + time.perf_counter() - t1
        return Synthesized(job, partition, synth_s, pce, src.num_constraints, zs, hs, h_limbs, z_limbs)

    def _assign(self, job: ParsedJob, partition: int) -> tuple[list[int], Source]:
        """(z, the PCE's matrices when its path ran, else the constraint system or its evaluations)."""
        cid = job.kind.circuit_id
        pending = job.witnesses.pop(partition, None)
        done = pending.result() if pending is not None else None  # a worker process made it (``prefetch``)
        if isinstance(done, Evaluations):
            return done.z, done
        m = self._resident_pce(cid, job.kind.pce_name)
        if m is not None:
            if isinstance(done, tuple):
                num_inputs, z = done
            else:
                num_inputs, z = partition_witness(cid, self._preset, job.inputs.witness(partition))
            if (num_inputs, len(z) - num_inputs) == (m.num_inputs, m.num_aux):
                return z, m
            log.warning("PCE for %s does not fit the circuit; falling back", cid)
            with self._lock:
                self._pce.pop(cid, None)
        cs = ConstraintSystem()
        circuit_for(cid).synthesize(cs, self._preset, job.inputs.witness(partition))
        return cs.assignment(), cs

    def _extract_pce(self, circuit_id: str, name: str, cs: ConstraintSystem) -> None:
        """Write the circuit's PCE file; a failure (a full disk) is logged, as cuzk logs it, not fatal."""
        time.sleep(self.extract_delay_s(by_circuit(circuit_id).name))
        with self._circuit_lock(circuit_id), self.timer.phase("pce: extract + write"):
            if circuit_id in self._pce:
                return
            m = cs.matrices()
            try:
                path = write_pce(self.param_cache, name, m)
            except OSError as exc:
                log.warning("PCE extraction failed: %s", exc.strerror or exc)
                return
            log.info("PCE saved to disk: %s (%d constraints, %d non-zeros)", path, m.num_constraints, m.nnz)
            self._extracted.add(circuit_id)
            if self.reuse_pce:
                self._pce[circuit_id] = m

    def prove(self, parts: Sequence[Synthesized]) -> list[bytes]:
        """One 192-byte proof per part, same order; all MSMs in one pass, sliced over the thread pool."""
        inputs = []
        for part in parts:
            cid = part.job.kind.circuit_id
            pk = self._load(cid)[0]
            if part.num_constraints != pk.meta["num_constraints"]:
                raise RuntimeError(
                    f"{cid}: synthesized {part.num_constraints} constraints but the key has "
                    f"{pk.meta['num_constraints']}; delete {self.params_path(cid).name} and "
                    f"{part.job.kind.pce_file} from the param cache"
                )
            inputs.append(ProofInput(pk, part.z, part.h, part.h_limbs, part.z_limbs))
        try:
            proofs = create_random_proofs(inputs, self._pool, self.threads, self.timer, self._gpu)
        finally:
            for part in parts:  # the engine's workers hold the last work until the next arrives
                part.h_limbs = part.z_limbs = None
        return [p.to_bytes() for p in proofs]

    def first_bad_partition(self, job: ParsedJob, proof: bytes) -> int | None:
        """Full pairing verification against the request-derived public inputs: the first bad partition."""
        pk = self._load(job.kind.circuit_id)[0]
        with self.timer.phase("self-check"):
            return first_bad_partition(pk.vk, job.inputs, proof)

    def timings(self) -> dict[str, float]:
        """Seconds spent per named phase since this prover was created."""
        return dict(self.timer.totals)

    def close(self) -> None:
        """Stop the MSM thread pool and the witness workers."""
        self._pool.shutdown(wait=True)
        self.witness_pool.close()

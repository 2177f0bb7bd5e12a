"""The QAP witness map on a CUDA device: the kernels of ``ntt.cu``.

The same arithmetic as ``qap.h_coefficients`` (three iFFTs, three coset FFTs, the quotient by
Z on the coset, one coset iFFT), as radix-2 NTTs over Fr in Montgomery form. On the PCE path
only z goes up: the PCE's matrices stay on the device and A·z, B·z, C·z are sparse products
there (in Python they cost as much as the witness itself); after the constraint system the
three vectors go up instead. h(x)'s coefficients stay on the device as the H query MSM's
scalars (canonical 32-bit limbs), as z does for the other MSMs, so neither becomes Python ints
or native ``Scalar``s again. Each domain's twiddles and scaling tables are made once, on the
host, and kept on the device. CuPy is imported where the device is first used, so that
``fr_limbs`` needs only NumPy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_cuzk.refengine.field import GENERATOR, Domain, R, inv
from pytest_cuzk.refengine.gpu.kernels import Kernels
from pytest_cuzk.refengine.r1cs import CSR, Matrices

__all__ = ["GpuNtt", "fr_limbs"]

_MONT = 1 << 256


def fr_limbs(values: list[int], rows: int | None = None) -> np.ndarray:
    """Field elements (canonical ints) as an (rows, 8) array of little-endian 32-bit limbs, zero-padded."""
    raw = b"".join(x.to_bytes(32, "little") for x in values)
    out = np.zeros((len(values) if rows is None else rows, 8), dtype=np.uint32)
    out[: len(values)] = np.frombuffer(raw, dtype="<u4").reshape(len(values), 8)
    return out


def _mont(values: list[int], times: int = _MONT) -> np.ndarray:
    return fr_limbs([x * times % R for x in values])


@dataclass
class _Tables:
    """One domain's constants on the device, in Montgomery form."""

    log_n: int
    tw: Any  # forward twiddles, stage m at [m - 1, 2m - 1)
    tw_inv: Any  # inverse twiddles
    to_coset: Any  # size_inv * g^i: after an iFFT, before the coset FFT
    from_coset: Any  # size_inv * g^-i: after the coset iFFT
    z_inv: Any  # 1 / Z(x) on the coset, one element


def _twiddles(omega: int, n: int) -> list[int]:
    out, m = [], 1
    while m < n:
        w, x = pow(omega, n // (2 * m), R), 1
        for _ in range(m):
            out.append(x)
            x = x * w % R
        m *= 2
    return out


def _powers(scale: int, g: int, n: int) -> list[int]:
    out, x = [], scale
    for _ in range(n):
        out.append(x)
        x = x * g % R
    return out


class GpuNtt:
    """One device's witness map; thread-safe (one at a time)."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._lock = threading.Lock()
        self._tables: dict[int, _Tables] = {}
        self._matrices: dict[int, tuple[Matrices, list[_DeviceCsr]]] = {}
        import cupy

        self._cp = cupy
        with cupy.cuda.Device(ordinal):
            names = ("fr_to_mont", "bit_reverse", "butterflies", "scale_rows", "quotient", "spmv")
            self._launch = Kernels(cupy, "ntt.cu", names)

    def forget(self) -> None:
        """Drop the domains' tables and the PCEs (EvictSRS frees the device memory a key's proofs used)."""
        with self._lock:
            self._tables.clear()
            self._matrices.clear()

    def _domain(self, domain: Domain) -> _Tables:
        tables = self._tables.get(domain.size)
        cupy = self._cp
        if tables is None:
            n = domain.size
            tables = _Tables(
                n.bit_length() - 1,
                cupy.asarray(_mont(_twiddles(domain.omega, n))),
                cupy.asarray(_mont(_twiddles(domain.omega_inv, n))),
                cupy.asarray(_mont(_powers(domain.size_inv, GENERATOR, n))),
                cupy.asarray(_mont(_powers(domain.size_inv, inv(GENERATOR), n))),
                cupy.asarray(_mont([inv(domain.vanishing_on_coset())])),
            )
            self._tables[n] = tables
        return tables

    def _ntt(self, rows: Any, tw: Any, log_n: int) -> Any:
        """The NTT of every row of ``rows`` (Montgomery), in natural order."""
        batch = rows.shape[0]
        out = self._cp.empty_like(rows)
        self._launch("bit_reverse", batch << log_n, rows, out, np.int32(log_n), np.int32(batch))
        m = 1
        while m < 1 << log_n:
            self._launch("butterflies", batch << max(log_n - 1, 0), out, tw, np.int32(m), np.int32(log_n),
                         np.int32(batch))  # fmt: skip
            m *= 2
        return out

    def witness_map(self, a: list[int], b: list[int], c: list[int], domain: Domain) -> Any:
        """h(x)'s coefficients h_0..h_{n-2}, an (n - 1, 8) device array of canonical limbs."""
        n = domain.size
        host = np.stack([fr_limbs(v, n) for v in (a, b, c)])
        with self._lock, self._cp.cuda.Device(self.ordinal):
            abc = self._cp.asarray(host)
            self._launch("fr_to_mont", 3 * n, abc, np.int32(3 * n))
            return self._h(abc, domain)

    def witness_map_pce(self, m: Matrices, z: list[int], domain: Domain) -> tuple[Any, Any]:
        """(h as ``witness_map`` gives it, z as an (len(z), 8) device array): A·z, B·z, C·z on the device."""
        n, rows = domain.size, m.num_constraints
        host = fr_limbs(z)
        cupy = self._cp
        with self._lock, cupy.cuda.Device(self.ordinal):
            csrs = self._device_matrices(m)
            z_dev = cupy.asarray(host)
            abc = cupy.empty((3, n, 8), dtype=cupy.uint32)
            for i, csr in enumerate(csrs):
                args = (csr.row_ptr, csr.cols, csr.vals, z_dev, abc[i], np.int32(rows), np.int32(n))
                self._launch("spmv", n, *args)
            return self._h(abc, domain), z_dev

    def _device_matrices(self, m: Matrices) -> list[_DeviceCsr]:
        held = self._matrices.get(id(m))
        if held is None:
            held = (m, [_DeviceCsr.upload(self._cp, csr) for csr in (m.a, m.b, m.c)])
            self._matrices[id(m)] = held
        return held[1]

    def _h(self, abc: Any, domain: Domain) -> Any:
        """The canonical coefficients of h from the (3, n, 8) Montgomery evaluations of A·z, B·z, C·z."""
        cupy, n = self._cp, domain.size
        t = self._domain(domain)
        log_n, batch = np.int32(t.log_n), np.int32(3)
        coeffs = self._ntt(abc, t.tw_inv, t.log_n)
        self._launch("scale_rows", 3 * n, coeffs, t.to_coset, log_n, batch, np.int32(0))
        evals = self._ntt(coeffs, t.tw, t.log_n)
        q = cupy.empty((1, n, 8), dtype=cupy.uint32)
        self._launch("quotient", n, evals, t.z_inv, q, log_n)
        h = self._ntt(q, t.tw_inv, t.log_n)
        self._launch("scale_rows", n, h, t.from_coset, log_n, np.int32(1), np.int32(1))
        return h[0, : n - 1]


@dataclass
class _DeviceCsr:
    """One PCE matrix on the device, its values as val R^2 so that ``spmv`` leaves Montgomery form."""

    row_ptr: Any
    cols: Any
    vals: Any

    @classmethod
    def upload(cls, cupy: Any, csr: CSR) -> _DeviceCsr:
        return cls(
            cupy.asarray(np.frombuffer(csr.row_ptr, dtype=np.uint32)),
            cupy.asarray(np.frombuffer(csr.cols, dtype=np.uint32)),
            cupy.asarray(_mont(csr.vals, _MONT * _MONT)),
        )

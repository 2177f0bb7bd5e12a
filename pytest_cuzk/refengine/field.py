"""The BLS12-381 scalar field Fr as plain Python ints, with radix-2 FFTs.

Synthesis, witness maps and the QAP reduction run on Python ints mod ``R``:
CPython's big-int arithmetic is far faster for this than converting every
value to a native ``Scalar``. Only MSM inputs become ``Scalar`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "GENERATOR",
    "Domain",
    "R",
    "batch_inverse",
    "fr_from_bytes",
    "fr_to_bytes",
    "get_domain",
    "inv",
]

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
"""Order of the scalar field (the r of BLS12-381)."""
TWO_ADICITY = 32
GENERATOR = 7
"""A multiplicative generator of Fr*, also used as the coset shift."""


def inv(x: int) -> int:
    """Multiplicative inverse; raises ZeroDivisionError for zero, like any field would."""
    if x % R == 0:
        raise ZeroDivisionError("inverse of zero in Fr")
    return pow(x, -1, R)


def batch_inverse(xs: list[int], modulus: int = R) -> list[int]:
    """Invert many non-zero elements mod ``modulus`` (Fr by default) with one inversion (Montgomery)."""
    prefix = [1] * (len(xs) + 1)
    for i, x in enumerate(xs):
        prefix[i + 1] = prefix[i] * x % modulus
    acc = pow(prefix[-1], -1, modulus)
    out = [0] * len(xs)
    for i in range(len(xs) - 1, -1, -1):
        out[i] = acc * prefix[i] % modulus
        acc = acc * xs[i] % modulus
    return out


def fr_from_bytes(raw: bytes, what: str) -> int:
    """Decode a 32-byte little-endian field element; ``what`` names the field in the error."""
    if len(raw) != 32:
        raise ValueError(f"{what} must be exactly 32 bytes, got {len(raw)}")
    value = int.from_bytes(raw, "little")
    if value >= R:
        raise ValueError(f"{what} is not a valid field element (not below the BLS12-381 scalar modulus)")
    return value


def fr_to_bytes(value: int) -> bytes:
    """Encode a field element as 32 little-endian bytes (the commitment encoding Filecoin uses)."""
    return (value % R).to_bytes(32, "little")


@lru_cache(maxsize=64)
def _bitrev(n: int) -> tuple[int, ...]:
    bits = n.bit_length() - 1
    return tuple(int(f"{i:0{bits}b}"[::-1], 2) if bits else 0 for i in range(n))


@lru_cache(maxsize=128)
def _twiddles(omega: int, n: int) -> tuple[tuple[int, ...], ...]:
    """Per-stage twiddle factors, cached because every proof of a circuit reuses them."""
    stages = []
    m = 1
    while m < n:
        w_m = pow(omega, n // (2 * m), R)
        ws = [1] * m
        for j in range(1, m):
            ws[j] = ws[j - 1] * w_m % R
        stages.append(tuple(ws))
        m *= 2
    return tuple(stages)


def _fft(values: list[int], omega: int) -> list[int]:
    n = len(values)
    rev = _bitrev(n)
    a = [values[rev[i]] for i in range(n)]
    m = 1
    for ws in _twiddles(omega, n):
        for k in range(0, n, 2 * m):
            for j in range(m):
                t = ws[j] * a[k + j + m] % R
                u = a[k + j]
                a[k + j] = (u + t) % R
                a[k + j + m] = (u - t) % R
        m *= 2
    return a


@dataclass(frozen=True)
class Domain:
    """A multiplicative subgroup of size ``size`` (a power of two) and its coset ``GENERATOR * H``."""

    size: int
    omega: int
    omega_inv: int
    size_inv: int

    def fft(self, coeffs: list[int]) -> list[int]:
        """Coefficients (padded to ``size``) to evaluations on the subgroup."""
        return _fft(coeffs + [0] * (self.size - len(coeffs)), self.omega)

    def ifft(self, evals: list[int]) -> list[int]:
        """Evaluations on the subgroup to coefficients."""
        out = _fft(evals + [0] * (self.size - len(evals)), self.omega_inv)
        return [x * self.size_inv % R for x in out]

    def coset_fft(self, coeffs: list[int]) -> list[int]:
        """Coefficients to evaluations on the coset ``GENERATOR * H``."""
        return self.fft(_scale_powers(coeffs, GENERATOR))

    def coset_ifft(self, evals: list[int]) -> list[int]:
        """Evaluations on the coset back to coefficients."""
        return _scale_powers(self.ifft(evals), inv(GENERATOR))

    def vanishing_on_coset(self) -> int:
        """Z(x) = x^n - 1 is constant on the coset: GENERATOR^n - 1."""
        return (pow(GENERATOR, self.size, R) - 1) % R

    def lagrange_at(self, tau: int) -> list[int]:
        """All Lagrange basis polynomials L_i evaluated at ``tau`` (used by the trusted setup)."""
        z = (pow(tau, self.size, R) - 1) % R
        if z == 0:
            raise ValueError("tau lies in the evaluation domain; pick another tau")
        points = [1] * self.size
        for i in range(1, self.size):
            points[i] = points[i - 1] * self.omega % R
        denoms = batch_inverse([(tau - w) % R for w in points])
        scale = z * self.size_inv % R
        return [scale * w % R * d % R for w, d in zip(points, denoms, strict=True)]


def _scale_powers(values: list[int], g: int) -> list[int]:
    out = list(values)
    acc = 1
    for i in range(len(out)):
        out[i] = out[i] * acc % R
        acc = acc * g % R
    return out


@lru_cache(maxsize=32)
def get_domain(min_size: int) -> Domain:
    """The smallest power-of-two domain with at least ``min_size`` points."""
    size = 1
    while size < max(min_size, 2):
        size *= 2
    if size.bit_length() - 1 > TWO_ADICITY:
        raise ValueError(f"domain of {size} points exceeds Fr's two-adicity 2^{TWO_ADICITY}")
    omega = pow(GENERATOR, (R - 1) // size, R)
    return Domain(size=size, omega=omega, omega_inv=inv(omega), size_inv=inv(size))

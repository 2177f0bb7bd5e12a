"""R1CS to QAP reduction (libsnark's, as arkworks' ``LibsnarkReduction``).

Two halves: the setup evaluates every variable's QAP polynomials u_j, v_j, w_j
at the secret point tau; the prover's witness map turns the per-constraint
evaluations A·z, B·z, C·z into the coefficients of h(x) = (a(x)b(x) - c(x)) / Z(x)
with three iFFTs, three coset FFTs and one coset iFFT.
"""

from __future__ import annotations

from pytest_cuzk.refengine.field import Domain, R, get_domain, inv
from pytest_cuzk.refengine.r1cs import CSR, Matrices

__all__ = ["domain_for", "h_coefficients", "query_scalars"]


def domain_for(m: Matrices) -> Domain:
    """The evaluation domain: one point per constraint (input constraints included)."""
    return get_domain(m.num_constraints)


def query_scalars(m: Matrices, tau: int) -> tuple[list[int], list[int], list[int]]:
    """u_j(tau), v_j(tau), w_j(tau) for every variable j of z = (1, inputs, aux)."""
    lagrange = domain_for(m).lagrange_at(tau)
    nvars = m.num_inputs + m.num_aux
    return tuple(_column_sums(mat, lagrange, nvars) for mat in (m.a, m.b, m.c))  # type: ignore[return-value]


def _column_sums(mat: CSR, lagrange: list[int], nvars: int) -> list[int]:
    out = [0] * nvars
    rp, cols, vals = mat.row_ptr, mat.cols, mat.vals
    for i in range(len(rp) - 1):
        li = lagrange[i]
        for k in range(rp[i], rp[i + 1]):
            out[cols[k]] += vals[k] * li
    return [x % R for x in out]


def h_coefficients(a: list[int], b: list[int], c: list[int], domain: Domain) -> list[int]:
    """The witness map: coefficients h_0..h_{n-2} of h(x), from A·z, B·z, C·z on the domain."""
    ea, eb, ec = (domain.coset_fft(domain.ifft(v)) for v in (a, b, c))
    z_inv = inv(domain.vanishing_on_coset())
    h = domain.coset_ifft([(x * y - w) * z_inv % R for x, y, w in zip(ea, eb, ec, strict=True)])
    return h[: domain.size - 1]

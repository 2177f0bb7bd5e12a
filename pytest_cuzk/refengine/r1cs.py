"""A small rank-1 constraint system, in two modes that run the same circuit code.

Circuits are written once against ``Num`` (a value plus, when constraints are
being built, its linear combination). ``ConstraintSystem`` is the standard path
bellperson takes: it builds every linear combination, evaluates A·z, B·z, C·z
per constraint and records the rows, from which ``matrices()`` gives the CSR
form the PCE stores. ``WitnessCS`` is the PCE path's witness generator: the
same code with plain ints, no linear combinations, no constraints; A·z, B·z,
C·z then come from a sparse mat-vec with the pre-compiled matrices.

Variables: inputs are numbered 0.. (0 is the constant ONE), auxiliaries are
keyed ``-1-j`` inside linear combinations; in matrices the column of input i is
i and of auxiliary j is ``num_inputs + j`` (bellman's z = (1, x, w) order).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from pytest_cuzk.refengine.field import R

__all__ = [
    "CSR",
    "ConstraintSystem",
    "Evaluations",
    "Matrices",
    "Num",
    "WitnessCS",
    "alloc_bits",
    "enforce_equal",
    "mul",
    "pow5",
    "swap_if",
]

LC = dict[int, int]


class Num:
    """A field value and, under a ``ConstraintSystem``, the linear combination that carries it."""

    __slots__ = ("lc", "value")

    def __init__(self, value: int, lc: LC | None) -> None:
        self.value = value
        self.lc = lc

    def __add__(self, other: Num | int) -> Num:
        if isinstance(other, int):
            return Num((self.value + other) % R, _lc_add(self.lc, {0: other % R}))
        return Num((self.value + other.value) % R, _lc_add(self.lc, other.lc))

    def __sub__(self, other: Num | int) -> Num:
        return self + (-other)

    def __neg__(self) -> Num:
        return self.scale(R - 1)

    def scale(self, k: int) -> Num:
        """Multiply by a constant (free: only the linear combination changes)."""
        k %= R
        lc = None if self.lc is None else {v: c * k % R for v, c in self.lc.items()}
        return Num(self.value * k % R, lc)


def _lc_add(a: LC | None, b: LC | None) -> LC | None:
    if a is None or b is None:
        return None
    out = dict(a)
    for v, c in b.items():
        out[v] = (out.get(v, 0) + c) % R
    return out


class WitnessCS:
    """Witness generation only: allocations keep values, constraints are skipped."""

    builds_lcs = False

    def __init__(self) -> None:
        self.inputs: list[int] = [1]
        self.aux: list[int] = []

    def one(self) -> Num:
        """The constant 1."""
        return Num(1, {0: 1} if self.builds_lcs else None)

    def alloc(self, value: int) -> Num:
        """A private (auxiliary) variable."""
        self.aux.append(value % R)
        return Num(value % R, {-len(self.aux): 1} if self.builds_lcs else None)

    def alloc_input(self, value: int) -> Num:
        """A public input."""
        self.inputs.append(value % R)
        return Num(value % R, {len(self.inputs) - 1: 1} if self.builds_lcs else None)

    def enforce(self, a: Num, b: Num, c: Num) -> None:
        """Require a * b = c (nothing to do while only generating the witness)."""

    def finish(self) -> None:
        """Nothing to close: the input constraints live in the pre-compiled matrices."""

    def assignment(self) -> list[int]:
        """The full assignment z = (1, inputs..., aux...)."""
        return self.inputs + self.aux


class ConstraintSystem(WitnessCS):
    """The constraint-system path: builds and evaluates every constraint and records its rows."""

    builds_lcs = True

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[LC, LC, LC]] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.c: list[int] = []

    def enforce(self, a: Num, b: Num, c: Num) -> None:
        """Record the constraint and evaluate its three linear combinations on the assignment."""
        assert a.lc is not None and b.lc is not None and c.lc is not None
        self.rows.append((a.lc, b.lc, c.lc))
        self.a.append(self._eval(a.lc))
        self.b.append(self._eval(b.lc))
        self.c.append(self._eval(c.lc))

    def _eval(self, lc: LC) -> int:
        inputs, aux = self.inputs, self.aux
        return sum(c * (inputs[v] if v >= 0 else aux[-1 - v]) for v, c in lc.items()) % R

    def finish(self) -> None:
        """Append bellman's input constraints x_i * 0 = 0, which keep the input polynomials independent."""
        zero = Num(0, {})
        for i in range(len(self.inputs)):
            self.enforce(Num(self.inputs[i], {i: 1}), zero, zero)

    @property
    def num_constraints(self) -> int:
        """Constraints so far (``Matrices.num_constraints`` once finished)."""
        return len(self.a)

    def evaluations(self, seconds: float = 0.0) -> Evaluations:
        """What proving needs of this system, without the rows: small enough to leave a worker process."""
        return Evaluations(len(self.inputs), self.assignment(), self.a, self.b, self.c, seconds)

    def first_unsatisfied(self) -> int | None:
        """Index of the first constraint with a*b != c, or None when the witness satisfies them all."""
        for i, (x, y, z) in enumerate(zip(self.a, self.b, self.c, strict=True)):
            if x * y % R != z:
                return i
        return None

    def matrices(self) -> Matrices:
        """The recorded constraints as CSR matrices over z = (1, inputs, aux)."""
        ni = len(self.inputs)
        parts = []
        for which in range(3):
            row_ptr, cols, vals = array("I", [0]), array("I"), []
            for row in self.rows:
                for v, c in row[which].items():
                    if c:
                        cols.append(v if v >= 0 else ni - 1 - v)
                        vals.append(c)
                row_ptr.append(len(cols))
            parts.append(CSR(row_ptr, cols, vals))
        return Matrices(ni, len(self.aux), parts[0], parts[1], parts[2])


@dataclass(frozen=True)
class Evaluations:
    """A synthesized partition on the constraint-system path: z and its A·z, B·z, C·z per constraint."""

    num_inputs: int
    z: list[int]
    a: list[int]
    b: list[int]
    c: list[int]
    seconds: float = 0.0
    """How long the synthesis took where it ran (a worker): its own time, not the wait for it."""

    @property
    def num_constraints(self) -> int:
        """Constraints, input constraints included."""
        return len(self.a)


@dataclass(frozen=True)
class CSR:
    """A sparse matrix in compressed sparse row form; ``vals`` are field elements."""

    row_ptr: array
    cols: array
    vals: list[int]

    def matvec(self, z: list[int]) -> list[int]:
        """Each row's dot product with ``z``: A·z is all a constraint system needs per row."""
        rp, cols, vals = self.row_ptr, self.cols, self.vals
        out = [0] * (len(rp) - 1)
        for i in range(len(out)):
            acc = 0
            for k in range(rp[i], rp[i + 1]):
                acc += vals[k] * z[cols[k]]
            out[i] = acc % R
        return out


@dataclass(frozen=True)
class Matrices:
    """A whole R1CS: sizes and the A, B, C matrices (input constraints included)."""

    num_inputs: int
    num_aux: int
    a: CSR
    b: CSR
    c: CSR

    @property
    def num_constraints(self) -> int:
        """Rows, input constraints included."""
        return len(self.a.row_ptr) - 1

    @property
    def nnz(self) -> int:
        """Non-zero entries over A, B and C."""
        return len(self.a.vals) + len(self.b.vals) + len(self.c.vals)


# Gadgets shared by the hash and the circuits. Each takes the constraint system first.


def mul(cs: WitnessCS, x: Num, y: Num) -> Num:
    """Multiply: x * y as a new variable (one constraint)."""
    z = cs.alloc(x.value * y.value)
    cs.enforce(x, y, z)
    return z


def pow5(cs: WitnessCS, x: Num) -> Num:
    """The x^5 S-box: three constraints."""
    x2 = mul(cs, x, x)
    x4 = mul(cs, x2, x2)
    return mul(cs, x4, x)


def enforce_equal(cs: WitnessCS, x: Num, y: Num) -> None:
    """Require x = y, as (x - y) * 1 = 0."""
    cs.enforce(x - y, cs.one(), Num(0, {} if cs.builds_lcs else None))


def alloc_bits(cs: WitnessCS, packed: Num, nbits: int) -> list[Num]:
    """Decompose ``packed`` into ``nbits`` boolean variables, least significant first.

    Each bit gets b * (1 - b) = 0 and the bits must pack back to ``packed``, so a
    value of ``nbits`` or more bits leaves the system unsatisfied.
    """
    bits = []
    acc = Num(0, {} if cs.builds_lcs else None)
    for i in range(nbits):
        b = cs.alloc((packed.value >> i) & 1)
        cs.enforce(b, cs.one() - b, Num(0, {} if cs.builds_lcs else None))
        bits.append(b)
        acc = acc + b.scale(1 << i)
    enforce_equal(cs, acc, packed)
    return bits


def swap_if(cs: WitnessCS, bit: Num, x: Num, y: Num) -> tuple[Num, Num]:
    """(x, y) when bit = 0, (y, x) when bit = 1: one constraint, t = bit * (y - x)."""
    t = mul(cs, bit, y - x)
    return x + t, y - t

"""A Poseidon-style hash over Fr: native function and R1CS gadget from one parameter set.

Filecoin's circuits hash with Poseidon; the reference circuits use the same
construction — width-3 state, x^5 S-box, full rounds around partial rounds,
an MDS mix — so their constraint shape matches (3 constraints per S-box,
linear layers free). The round counts are deliberately small to keep the
reference circuits fast: they give the workload its shape, they are not a
security claim. Round constants come from SHA-256 of a fixed tag, the MDS
matrix is a Cauchy matrix, so everything is reproducible from this file.

``hash_n`` is a sponge: capacity initialised to the input count (domain
separation by length), two elements absorbed per permutation, output the first
rate element. ``hash_n_gadget`` computes the same inside a constraint system.
"""

from __future__ import annotations

import hashlib

from pytest_cuzk.refengine.field import R, batch_inverse
from pytest_cuzk.refengine.r1cs import Num, WitnessCS, pow5

__all__ = ["FULL_ROUNDS", "PARTIAL_ROUNDS", "WIDTH", "hash2", "hash_n", "hash_n_gadget", "permute"]

WIDTH = 3
FULL_ROUNDS = 4
PARTIAL_ROUNDS = 4
_TAG = b"cuzk-ref poseidon-style x5 w3"


def _round_constants() -> list[list[int]]:
    rounds = FULL_ROUNDS + PARTIAL_ROUNDS
    return [
        [int.from_bytes(hashlib.sha256(_TAG + bytes([r, i])).digest(), "little") % R for i in range(WIDTH)]
        for r in range(rounds)
    ]


def _mds() -> list[list[int]]:
    flat = batch_inverse([(i + WIDTH + j) % R for i in range(WIDTH) for j in range(WIDTH)])
    return [flat[i * WIDTH : (i + 1) * WIDTH] for i in range(WIDTH)]


ROUND_CONSTANTS = _round_constants()
MDS = _mds()
_HALF = FULL_ROUNDS // 2


def _is_full(rnd: int) -> bool:
    return rnd < _HALF or rnd >= _HALF + PARTIAL_ROUNDS


def permute(state: list[int]) -> list[int]:
    """The permutation on a width-3 state of ints."""
    s = list(state)
    for rnd, consts in enumerate(ROUND_CONSTANTS):
        s = [(x + c) % R for x, c in zip(s, consts, strict=True)]
        if _is_full(rnd):
            s = [pow(x, 5, R) for x in s]
        else:
            s[0] = pow(s[0], 5, R)
        s = [sum(m * x for m, x in zip(row, s, strict=True)) % R for row in MDS]
    return s


def permute_gadget(cs: WitnessCS, state: list[Num]) -> list[Num]:
    """The permutation as constraints: only S-boxes cost constraints."""
    s = list(state)
    for rnd, consts in enumerate(ROUND_CONSTANTS):
        s = [x + c for x, c in zip(s, consts, strict=True)]
        if _is_full(rnd):
            s = [pow5(cs, x) for x in s]
        else:
            s[0] = pow5(cs, s[0])
        s = [_dot(row, s) for row in MDS]
    return s


def _dot(row: list[int], s: list[Num]) -> Num:
    acc = s[0].scale(row[0])
    for m, x in zip(row[1:], s[1:], strict=True):
        acc = acc + x.scale(m)
    return acc


def hash_n(xs: list[int]) -> int:
    """Hash any number of field elements to one."""
    state = [len(xs) % R, 0, 0]
    for i in range(0, max(len(xs), 1), 2):
        chunk = [*xs[i : i + 2], 0, 0][:2]
        state = permute([state[0], (state[1] + chunk[0]) % R, (state[2] + chunk[1]) % R])
    return state[1]


def hash2(a: int, b: int) -> int:
    """Two-to-one compression, the Merkle tree node hash."""
    return hash_n([a, b])


def hash_n_gadget(cs: WitnessCS, xs: list[Num]) -> Num:
    """``hash_n`` inside a constraint system."""
    zero = Num(0, {} if cs.builds_lcs else None)
    state = [cs.one().scale(len(xs)), zero, zero]
    for i in range(0, max(len(xs), 1), 2):
        chunk = [*xs[i : i + 2], zero, zero][:2]
        state = permute_gadget(cs, [state[0], state[1] + chunk[0], state[2] + chunk[1]])
    return state[1]

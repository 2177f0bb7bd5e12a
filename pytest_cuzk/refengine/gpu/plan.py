"""The shape of a bucketed (Pippenger) MSM with signed digits, in plain Python.

The GPU kernels (``msm.cu``) compute exactly this: a scalar k < 2^256 is cut into
``num_windows(c)`` windows of c bits; each window's value plus the carry from the window
below becomes a digit in [-2^(c-1), 2^(c-1)] (a value above 2^(c-1) gives value - 2^c and
a carry of 1), so every window needs only 2^(c-1) buckets: the digit d puts the point, negated
when d < 0, in bucket |d| - 1. Because k < 2^255 (k < r) and c * windows >= 256, the top
window never carries out. This module chooses c and is the reference the tests hold the
kernels' digits against.
"""

from __future__ import annotations

__all__ = ["MAX_WINDOW_BITS", "MsmPlan", "signed_digits"]

MAX_WINDOW_BITS = 16
"""Largest window: 2^15 buckets a window bounds the bucket memory (16 windows x 2^15 x 192 bytes)."""
MIN_WINDOW_BITS = 4
SEGMENT = 16
"""Buckets one thread weighs in the bucket reduction (a power of two, as the bucket counts are)."""


class MsmPlan:
    """Window size, window count and bucket layout for an MSM of ``n`` points."""

    def __init__(self, n: int) -> None:
        self.n = n
        # About n / 8 buckets a window: bucket sums and the 2 * 2^(c-1) additions that weigh them
        # balance there, and each bucket keeps a thread busy for ~16 additions.
        self.c = max(MIN_WINDOW_BITS, min(MAX_WINDOW_BITS, max(n, 1).bit_length() - 3))
        self.windows = -(-256 // self.c)
        self.buckets_per_window = 1 << (self.c - 1)
        self.total_buckets = self.windows * self.buckets_per_window
        self.segment = min(SEGMENT, self.buckets_per_window)
        self.segments = self.windows * (self.buckets_per_window // self.segment)


def signed_digits(k: int, c: int, windows: int) -> list[int]:
    """The signed c-bit digits d_w of k, least significant first: sum(d_w * 2^(c*w)) == k."""
    if not 0 <= k < 1 << 255:
        raise ValueError("a scalar for the MSM must lie in [0, 2^255)")
    half, mask = 1 << (c - 1), (1 << c) - 1
    out, carry = [], 0
    for w in range(windows):
        d = ((k >> (c * w)) & mask) + carry
        carry = int(d > half)
        out.append(d - (1 << c) if carry else d)
    return out

"""Aligned text tables for the terminal summary and ``cuzk-perf`` (the one table renderer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["table"]


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], rule: bool = True) -> str:
    """Columns as wide as their widest cell; a header starting with ``>`` is right-aligned (numbers)."""
    right = [h.startswith(">") for h in headers]
    cells = [[h.removeprefix(">") for h in headers], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True))

    lines = (
        [line(cells[0])] + ([line(["-" * w for w in widths])] if rule else []) + [line(r) for r in cells[1:]]
    )
    return "\n".join(x.rstrip() for x in lines)

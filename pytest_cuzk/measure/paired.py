"""One A/B case's record: the control build's own figures and the paired change between the builds.

With ``--cuzk-ab`` a case measures two daemons through the same minutes, its windows in pairs
(one of each build, in a seeded random order). The candidate's figures stay the case's
``Figures``; this record, its ``ab``, holds the control build's (memory peaks included, each build's
its own), each pair's log-ratio, and the change they give with its interval and p-value, so the
gate, the summary, the HTML report and the results database read one thing. Stored (pytest-benchmark's
``extra_info``, the results database), the control's keys keep its former name, baseline, so that
runs saved before and after read alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.measure.figures import Figures

__all__ = ["CANDIDATE", "CONTROL", "PairedAB"]

# Letters of the order string, as stored: "BC CB" is the control first, then last (B: its former name).
CANDIDATE, CONTROL = "C", "B"
_STORED = {"control": "baseline", "control_build": "baseline_build"}  # field: its key in stored data


@dataclass(frozen=True)
class PairedAB:
    """The control build of an A/B case and how the candidate's throughput compares with it, pair by pair."""

    control: Figures
    candidate_build: str
    control_build: str
    layout: str  # "side by side", or "in turn" (one daemon up at a time, blocks of windows)
    seed: int
    order: str  # each pair's order, e.g. "BC CB CB BC"
    windows_per_block: int  # windows of one build in a row: 1 side by side, more in turn
    log_ratios: tuple[float, ...] = ()  # per pair: log(candidate's seconds per proof / the control's)
    throughput_ratio: float | None = None  # candidate / control, from the mean log-ratio
    throughput_ratio_ci: tuple[float, float] | None = None  # 95%, Student's t over the pairs
    p_value: float | None = None  # of no change
    wall_s: float = 0.0  # the A/B case from its first window to its last, restarts included

    @property
    def pairs(self) -> int:
        return len(self.log_ratios)

    @property
    def change_pct(self) -> float | None:
        """The candidate's throughput change against the control, in percent (negative: slower)."""
        return None if self.throughput_ratio is None else (self.throughput_ratio - 1) * 100

    @property
    def change_ci_pct(self) -> tuple[float, float] | None:
        ci = self.throughput_ratio_ci
        return None if ci is None else ((ci[0] - 1) * 100, (ci[1] - 1) * 100)

    @property
    def spread_pct(self) -> float | None:
        """How much the pairs' ratios vary (their log-ratios' standard deviation, in percent).

        The host's noise as the pairs see it, which sets how many pairs a verdict takes there.
        """
        if self.pairs < 2:
            return None
        return float(np.std(self.log_ratios, ddof=1)) * 100

    def how(self) -> str:
        """How the pairs were measured: their count and spread, the layout, the seed and the order."""
        layout = "side by side"
        if self.layout != "side-by-side":
            block = f"each block of {self.windows_per_block} windows"
            layout = f"in turn (one daemon up at a time, restarted for {block})"
        spread = self.spread_pct
        pairs = plural(self.pairs, "pair") + (f" (ratios' SD {spread:.1f}%)" if spread is not None else "")
        return f"{pairs}, {layout}, seed {self.seed}, order {self.order}"

    def describe(self) -> str:
        """The paired change in words: ``throughput -12.9% (95% CI -15.1% to -10.6%, p=2e-05)``."""
        if self.change_pct is None:
            return "throughput change n/a (no complete pair)"
        ci = self.change_ci_pct
        interval = (
            f"95% CI {ci[0]:+.1f}% to {ci[1]:+.1f}%" if ci is not None else "no interval: under 3 pairs"
        )
        p = f", p={self.p_value:.2g}" if self.p_value is not None else ""
        return f"throughput {self.change_pct:+.1f}% ({interval}{p})"

    def to_dict(self, with_control: bool = True) -> dict[str, Any]:
        """As stored; ``with_control=False`` leaves out the control's figures, for a store that keeps them."""
        fields = [f.name for f in dataclasses.fields(self) if with_control or f.name != "control"]
        out = {_STORED.get(name, name): getattr(self, name) for name in fields}
        if with_control:
            out[_STORED["control"]] = self.control.to_dict()
        out["log_ratios"] = list(self.log_ratios)
        ci = self.throughput_ratio_ci
        out["throughput_ratio_ci"] = list(ci) if ci is not None else None
        out["change_pct"], ci_pct = self.change_pct, self.change_ci_pct
        out["change_ci_pct"] = list(ci_pct) if ci_pct is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedAB:
        from pytest_cuzk.measure.figures import Figures

        keys = {_STORED.get(f.name, f.name): f.name for f in dataclasses.fields(cls)}
        values = {keys[k]: v for k, v in data.items() if k in keys}
        values["control"] = Figures.from_dict(data[_STORED["control"]])
        values["log_ratios"] = tuple(data.get("log_ratios") or ())
        ci = data.get("throughput_ratio_ci")
        values["throughput_ratio_ci"] = (float(ci[0]), float(ci[1])) if ci else None
        return cls(**values)

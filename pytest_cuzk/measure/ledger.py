"""How the daemons' counters moved over the run, summed across restarts and xdist workers.

The counters are the proofs completed and failed, and cuzk-ref's phase seconds. Beside them the
ledger counts the failures the suite causes on purpose (``PLANNED``: the malformed-input test's
truncated requests), so that a failure counter that moved is told apart from a daemon that failed.

The ledger reads a daemon's counters whenever a cuzk test starts or ends. Each daemon
process contributes its last reading minus its first, so a daemon stopped for a new
batch size loses nothing; one that crashed loses only what it counted after its last
reading. A restart is a new pid or address, or, where neither changes (an attached
daemon someone restarted), counters that went down. Workers send their totals to the controller in an
explicit wire format (``to_wire``/``merge_wire``).
"""

from __future__ import annotations

from typing import Any

from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.daemon.client import ProvingClient

__all__ = ["PLANNED", "MetricKey", "MetricLedger", "MetricValues", "series_name"]

MetricKey = tuple[str, tuple[tuple[str, str], ...]]
MetricValues = dict[MetricKey, float]
_Generation = tuple[str, int | None, str]
PLANNED: MetricKey = ("pytest_cuzk_planned_failures", ())  # the plugin's own count, not a daemon's


def series_name(key: MetricKey) -> str:
    """A counter as Prometheus writes it: ``name{label="value",...}``."""
    name, labels = key
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else "")


def read_counters(address: str) -> MetricValues:
    """The proof counters and cuzk-ref's phase seconds (gauges and the last-1000 summary do not add up)."""
    with ProvingClient(address) as client:
        samples = client.metric_samples(timeout=5.0)
    return {
        key: sample.value
        for key, sample in samples.by_key.items()
        if sample.name.startswith(("cuzk_proofs_completed", "cuzk_proofs_failed", "cuzk_ref_phase_seconds"))
    }


class MetricLedger:
    """Counter changes per daemon label."""

    def __init__(self) -> None:
        self._first: dict[_Generation, MetricValues] = {}
        self._last: dict[_Generation, MetricValues] = {}
        self._closed: dict[str, MetricValues] = {}  # restarted processes, and merged workers
        self.restarts_seen: list[str] = []

    def observe(self, backend: DaemonBackend) -> None:
        """Read the daemon's counters now; a daemon that does not answer is left for next time."""
        if not backend.address:
            return
        try:
            values = read_counters(backend.address)
        except CuzkError:
            return
        generation = (backend.label, backend.pid, backend.address)
        last = self._last.get(generation)
        if last is not None and any(values.get(k, 0.0) < v for k, v in last.items()):
            self._close(generation)
            self.restarts_seen.append(
                f"{backend.label}: its proof counters went down: it restarted outside the plugin "
                "(the totals add what it counted before and after)"
            )
        self._first.setdefault(generation, values)
        self._last[generation] = values

    def planned_failure(self, label: str) -> None:
        """A proof the suite made fail on purpose on the daemon ``label`` (summed like its counters)."""
        _add(self._closed.setdefault(label, {}), {PLANNED: 1.0})

    def _close(self, generation: _Generation) -> None:
        first, last = self._first.pop(generation), self._last.pop(generation)
        _add(self._closed.setdefault(generation[0], {}), {k: v - first.get(k, 0.0) for k, v in last.items()})

    def totals(self) -> dict[str, MetricValues]:
        """Per label: what the counters moved, this process's daemons and the merged workers' together."""
        out: dict[str, MetricValues] = {label: dict(values) for label, values in self._closed.items()}
        for generation, last in self._last.items():
            first = self._first[generation]
            _add(out.setdefault(generation[0], {}), {k: v - first.get(k, 0.0) for k, v in last.items()})
        return out

    def to_wire(self) -> dict[str, list[list[Any]]]:
        """JSON-able totals for an xdist worker's ``workeroutput``."""
        return {
            label: [
                [name, [list(pair) for pair in labels], value] for (name, labels), value in values.items()
            ]
            for label, values in self.totals().items()
        }

    def merge_wire(self, data: dict[str, list[list[Any]]]) -> None:
        """Add a finished worker's totals (``to_wire``'s format) to this ledger's."""
        for label, rows in data.items():
            values = {
                (str(name), tuple((str(k), str(v)) for k, v in labels)): float(value)
                for name, labels, value in rows
            }
            _add(self._closed.setdefault(label, {}), values)


def _add(totals: MetricValues, values: MetricValues) -> None:
    for key, value in values.items():
        totals[key] = totals.get(key, 0.0) + value

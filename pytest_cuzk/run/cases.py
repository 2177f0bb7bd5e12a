"""The suite's case matrix: daemon × kind × batch size × concurrency, with ids ``-k`` selects on.

Ids read ``porep-batch2-j1`` (``rtx4090-porep-batch2-j1`` with several daemons or labels),
however the daemon is reached: a baseline saved against a spawned daemon gates an attached one
of the same build. How it was reached is in the run's machine info (``cuzk.daemon_mode``).
The load scenarios have their own: ``test_server[porep-batch1]`` and ``test_sweep[porep-batch1]``
for a kind at a batch size (the sweep only for the throughput kinds, PoRep and SnapDeals),
``test_priority[winning-under-porep]`` for a PoSt kind under a throughput kind's load.
Tests are ordered by daemon and batch size, so a spawned daemon restarts once per size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.config.options import CASE_FIXTURES
from pytest_cuzk.vocab.kinds import KINDS, ProofKindInfo

if TYPE_CHECKING:  # settings are resolved only in a run that asks for cuzk
    from pytest_cuzk.config.settings import Settings

__all__ = ["Case", "case_params", "item_case", "order_items"]


@dataclass(frozen=True)
class Case:
    """One parametrized suite case."""

    label: str
    kind: ProofKindInfo
    batch_size: int
    concurrency: int
    show_label: bool = False
    background: ProofKindInfo | None = None  # the load a priority case's proofs run under
    axes: tuple[str, ...] = ("batch", "j")  # what the id names besides the kind

    @property
    def id(self) -> str:
        parts = [self.label] if self.show_label else []
        parts.append(f"{self.kind.name}-under-{self.background.name}" if self.background else self.kind.name)
        parts += [f"batch{self.batch_size}"] if "batch" in self.axes else []
        parts += [f"j{self.concurrency}"] if "j" in self.axes else []
        return "-".join(parts)

    @property
    def in_flight(self) -> int:
        return self.batch_size * self.concurrency

    def in_flight_said(self) -> str:
        """The wave's size and what to lower, for an error should the host not hold its requests."""
        return (
            f"{self.id}: {self.in_flight} proofs in flight (batch {self.batch_size} x concurrency "
            f"{self.concurrency}: lower --cuzk-batch-sizes or --cuzk-concurrency)"
        )

    @property
    def kinds(self) -> tuple[ProofKindInfo, ...]:
        """The kinds the case proves: its own, and its background's."""
        return (self.kind,) if self.background is None else (self.kind, self.background)


_Make = Callable[..., Case]


def _batches(kind: ProofKindInfo, settings: Settings) -> list[int]:
    return [b for b in settings.batch_sizes if b == 1 or kind.batchable]


def _matrix(make: _Make, kind: ProofKindInfo, settings: Settings) -> Iterator[Case]:
    for b in _batches(kind, settings):
        for j in settings.concurrency:
            yield make(kind, b, j)


def _per_kind(make: _Make, kind: ProofKindInfo, settings: Settings) -> Iterator[Case]:
    yield make(kind, 1, 1, axes=())


def _per_batch(make: _Make, kind: ProofKindInfo, settings: Settings) -> Iterator[Case]:
    for b in _batches(kind, settings):
        yield make(kind, b, 1, axes=("batch",))


def _throughput(make: _Make, kind: ProofKindInfo, settings: Settings) -> Iterator[Case]:
    if kind.batchable:
        yield from _per_batch(make, kind, settings)


def _under_load(make: _Make, kind: ProofKindInfo, settings: Settings) -> Iterator[Case]:
    if not kind.batchable:
        for background in (k for k in KINDS.values() if k.batchable):
            yield make(kind, 1, 1, background=background, axes=())


# What each suite fixture is parametrized with (its names are listed in options.CASE_FIXTURES).
_SHAPES: dict[str, Callable[[_Make, ProofKindInfo, Settings], Iterator[Case]]] = {
    "cuzk_case": _matrix,
    "cuzk_kind": _per_kind,
    "cuzk_server_case": _per_batch,
    "cuzk_sweep_case": _throughput,
    "cuzk_priority_case": _under_load,
}
assert set(_SHAPES) == set(CASE_FIXTURES), "every suite fixture has its cases"


def case_params(labels: Sequence[str], settings: Settings, fixture: str) -> list[Any]:
    """``pytest.param`` per case of the suite fixture ``fixture``, for each daemon in ``labels``."""
    show_label = len(labels) > 1 or bool(settings.labels)
    params = []
    for label in labels:
        make = functools.partial(Case, label, show_label=show_label)
        for kind in KINDS.values():
            params += [pytest.param(c, id=c.id) for c in _SHAPES[fixture](make, kind, settings)]
    return params


def item_case(item: pytest.Item) -> Case | None:
    """The case a collected suite test runs, None for any other test."""
    callspec = getattr(item, "callspec", None)
    for name in CASE_FIXTURES:
        if callspec is not None and name in callspec.params:
            case = callspec.params[name]
            return case if isinstance(case, Case) else None
    return None


def order_items(items: list[pytest.Item]) -> None:
    """Group suite tests by daemon (in the order given) and batch size in place; others keep their places."""
    slots = [i for i, item in enumerate(items) if item_case(item) is not None]
    labels: dict[str, int] = {}
    for i in slots:
        labels.setdefault(item_case(items[i]).label, len(labels))  # type: ignore[union-attr]

    def key(item: pytest.Item) -> tuple[int, int]:
        case = item_case(item)
        assert case is not None
        return labels[case.label], case.batch_size

    for i, item in zip(slots, sorted((items[i] for i in slots), key=key), strict=True):
        items[i] = item

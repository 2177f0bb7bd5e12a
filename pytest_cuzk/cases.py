"""The suite's case matrix: daemon × kind × batch size × concurrency, with ids ``-k`` selects on.

Ids read ``porep-batch2-j1`` (``rtx4090-porep-batch2-j1`` with several daemons or labels,
``...-attached`` for an attached daemon, so its baselines stay apart from a spawned one's).
Tests are ordered by daemon and batch size, so a spawned daemon restarts once per size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from .options import CASE_FIXTURES
from .wire.kinds import KINDS, ProofKindInfo

if TYPE_CHECKING:  # settings are resolved only in a run that asks for cuzk
    from .settings import Settings

__all__ = ["Case", "case_params", "item_case", "order_items"]


@dataclass(frozen=True)
class Case:
    """One parametrized suite case."""

    label: str
    kind: ProofKindInfo
    batch_size: int
    concurrency: int
    attached: bool = False
    show_label: bool = False

    @property
    def id(self) -> str:
        parts = [self.label] if self.show_label else []
        parts += [self.kind.name, f"batch{self.batch_size}", f"j{self.concurrency}"]
        if self.attached:
            parts.append("attached")
        return "-".join(parts)

    @property
    def in_flight(self) -> int:
        return self.batch_size * self.concurrency


def case_params(labels: Sequence[str], attached: bool, settings: Settings, per_kind: bool) -> list[Any]:
    """``pytest.param`` per case: the full matrix, or one case per kind and daemon (``per_kind``)."""
    show_label = len(labels) > 1 or bool(settings.labels)
    params = []
    for label in labels:
        for kind in KINDS.values():
            if per_kind:
                case = Case(label, kind, 1, 1, show_label=show_label)
                params.append(pytest.param(case, id="-".join(([label] if show_label else []) + [kind.name])))
                continue
            for b in settings.batch_sizes:
                for j in settings.concurrency:
                    if b > 1 and not kind.batchable:
                        continue
                    case = Case(label, kind, b, j, attached=attached, show_label=show_label)
                    params.append(pytest.param(case, id=case.id))
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

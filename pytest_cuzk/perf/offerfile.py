"""Marketplace offers as ``vastai search offers --raw`` prints them, or a CSV/JSON with its columns.

vast.ai writes ``cpu_ram`` (the RAM the offer comes with) and ``gpu_ram`` (per GPU) as "MB"; the
numbers are MiB: a 24 GiB RTX 4090 reads 24564, nvidia-smi's figure, and the RAM of a GPU share of
a 256 GiB machine is that share of its MemTotal in MiB. Only the fields below are read; the rest
of an offer is ignored.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..wire.units import MIB

__all__ = ["NEEDED", "Offer", "OfferFileError", "missing_fields", "read_offers"]

# field -> what goes unanswered without it
NEEDED = {
    "gpu_name": "no hosts like it can be found",
    "num_gpus": "no hosts like it can be found",
    "cpu_ram": "the RAM checks answer '?'",
    "dph_total": "no dollars per proof",
    "machine_id": "it cannot match a measured machine",
}


class OfferFileError(ValueError):
    """An offers file that cannot be read; the message names the file and what to do."""


@dataclass(frozen=True)
class Offer:
    """One offer: what it is, what it costs, and the machine it is on."""

    id: str
    machine_id: str | None = None
    host_id: str | None = None  # vast.ai's id of the provider, not of the machine
    gpu_name: str | None = None
    num_gpus: int | None = None
    gpu_ram_bytes: int | None = None  # per GPU
    ram_bytes: int | None = None
    cpu_cores: float | None = None
    dph: float | None = None  # dollars per hour, all in
    reliability: float | None = None
    geolocation: str | None = None
    driver_version: str | None = None

    @property
    def gpus(self) -> str:
        return f"{self.num_gpus if self.num_gpus is not None else '?'}x {self.gpu_name or '?'}"


def _text(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip()


def _mib(v: Any) -> int:
    return int(float(v) * MIB)


# Offer attribute -> (the marketplace's field, how its value is read)
FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "machine_id": ("machine_id", _text),
    "host_id": ("host_id", _text),
    "gpu_name": ("gpu_name", _text),
    "num_gpus": ("num_gpus", lambda v: int(float(v))),
    "gpu_ram_bytes": ("gpu_ram", _mib),
    "ram_bytes": ("cpu_ram", _mib),
    "cpu_cores": ("cpu_cores_effective", float),
    "dph": ("dph_total", float),
    "reliability": ("reliability2", float),
    "geolocation": ("geolocation", _text),
    "driver_version": ("driver_version", _text),
}


def _records(text: str, name: str) -> list[dict[str, Any]]:
    """The offers as dicts: a JSON list, the REST API's ``{"offers": [...]}``, or CSV rows."""
    if text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OfferFileError(f"{name}: not valid JSON ({exc})") from None
        if isinstance(data, dict) and isinstance(data.get("offers"), list):
            data = data["offers"]
        if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
            raise OfferFileError(
                f"{name}: expected a list of offers, as `vastai search offers --raw` prints it"
            )
        return data
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or ("gpu_name" not in rows[0] and "id" not in rows[0]):
        raise OfferFileError(
            f"{name}: neither JSON nor a CSV with a header of offer fields (id, gpu_name, num_gpus, "
            "cpu_ram, dph_total, ...)"
        )
    return [{k: v for k, v in r.items() if k and v not in (None, "")} for r in rows]


def _offer(record: dict[str, Any], n: int, name: str) -> Offer:
    ident = _text(record.get("id") or record.get("machine_id") or f"#{n}")
    values: dict[str, Any] = {}
    for attr, (key, read) in FIELDS.items():
        raw = record.get(key)
        if raw is None or raw == "":
            continue
        try:
            values[attr] = read(raw)
        except (TypeError, ValueError):
            raise OfferFileError(
                f"{name}: offer {ident} (number {n}): field {key} is {raw!r}, not a number"
            ) from None
    return Offer(id=ident, **values)


def read_offers(path: str) -> list[Offer]:
    """Offers from a file, or from standard input for ``-`` (a marketplace search piped in)."""
    name = "standard input" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise OfferFileError(f"cannot read the offers file {path}: {exc.strerror}") from None
    if not text.strip():
        raise OfferFileError(
            f"{name}: empty; pipe in `vastai search offers --raw ...` or pass its saved output"
        )
    return [_offer(r, n, name) for n, r in enumerate(_records(text, name), 1)]


def missing_fields(offers: list[Offer]) -> list[str]:
    """One line per needed field that some offers lack: which offers, and what that costs them."""
    attrs = {key: attr for attr, (key, _) in FIELDS.items()}
    out = []
    for key, cost in NEEDED.items():
        lacking = [o.id for o in offers if getattr(o, attrs[key]) is None]
        if lacking:
            which = (
                "every offer" if len(lacking) == len(offers) else f"{len(lacking)} of {len(offers)} offers"
            )
            shown = ", ".join(lacking[:5]) + (", ..." if len(lacking) > 5 else "")
            out.append(f"field {key} missing in {which} ({shown}): {cost}")
    return out

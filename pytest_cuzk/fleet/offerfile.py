"""Marketplace offers as ``vastai search offers --raw`` prints them, or a CSV/JSON with its columns.

vast.ai writes ``cpu_ram`` and ``gpu_ram`` (per GPU) as "MB"; the numbers are MiB: a 24 GiB
RTX 4090 reads 24564, nvidia-smi's figure. ``cpu_ram`` is the whole machine's: an offer of part
of a machine (``gpu_frac`` below 1) gets the share of its RAM that it gets of its CPUs,
``cpu_cores_effective / cpu_cores`` (vast.ai sizes an instance's RAM limit that way, and dstack's
gpuhunt reads offers so), and past that share the instance is OOM-killed. Prices are rebuilt
for the disk asked for: ``dph_total`` holds only the storage the search priced (5 GB by default),
so the machine's rate (``dph_base``, or ``discounted_dph_total`` reserved, less the searched
storage: ``storage_total_cost``, or else ``dph_total - dph_base``) gets ``storage_cost`` ($ per
GB, 10^9 bytes, and month, over 30 days) for that disk.
Only the fields below are read; the rest of an offer is ignored.
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

from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.vocab.units import MIB

__all__ = ["NEEDED", "Offer", "OfferFileError", "missing_fields", "read_offers"]

# field -> (whether an offer lacks it, what goes unanswered then)
NEEDED: dict[str, tuple[Callable[[Offer], bool], str]] = {
    "gpu_name": (lambda o: o.gpu_name is None, "no hosts like it can be found"),
    "num_gpus": (lambda o: o.num_gpus is None, "no hosts like it can be found"),
    "cpu_ram": (lambda o: o.machine_ram_bytes is None, "the RAM checks answer '?'"),
    "dph_total": (lambda o: o.dph_total is None and o.dph_base is None, "no dollars per proof"),
    "storage_cost": (lambda o: o.storage_cost is None, "its disk is priced as the search priced it"),
    "storage_total_cost": (
        lambda o: o.storage_cost is not None and o.searched_storage is None,
        "the storage its price holds is not known: its disk is priced as the search priced it",
    ),
    "machine_id": (lambda o: o.machine_id is None, "it cannot match a measured machine"),
}
RESERVED: tuple[str, tuple[Callable[[Offer], bool], str]] = (
    "discounted_dph_total",
    (lambda o: o.reserved_dph_total is None, "no reserved price: no dollars per proof"),
)
HOURS_PER_MONTH = 30 * 24  # what vast.ai's storage_total_cost divides a month's storage_cost by
GB = 10**9  # vast.ai prices storage per GB (its RAM "MB" are MiB, its disk GB are GB)


class OfferFileError(PerfError):
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
    machine_ram_bytes: int | None = None  # the whole machine's (cpu_ram)
    cpu_cores: float | None = None  # the offer's share (cpu_cores_effective)
    machine_cpu_cores: float | None = None
    gpu_frac: float | None = None
    dph_total: float | None = None  # dollars per hour, with the storage the search priced
    dph_base: float | None = None  # the same without storage
    reserved_dph_total: float | None = None  # discounted_dph_total: reserved (prepaid) rate
    storage_cost: float | None = None  # dollars per GB and month
    storage_total_cost: float | None = None  # dollars per hour of the storage the search priced
    reliability: float | None = None
    geolocation: str | None = None
    driver_version: str | None = None

    @property
    def gpus(self) -> str:
        return f"{self.num_gpus if self.num_gpus is not None else '?'}x {self.gpu_name or '?'}"

    @property
    def share(self) -> float:
        """The part of the machine rented: its CPUs' share, else its GPUs' (``gpu_frac``), else all."""
        if self.cpu_cores and self.machine_cpu_cores:
            return min(1.0, self.cpu_cores / self.machine_cpu_cores)
        return min(1.0, self.gpu_frac) if self.gpu_frac else 1.0

    @property
    def ram_bytes(self) -> int | None:
        """The RAM the instance may use: its share of the machine's."""
        return None if self.machine_ram_bytes is None else int(self.machine_ram_bytes * self.share)

    @property
    def searched_storage(self) -> float | None:
        """Dollars per hour of the storage the search priced into ``dph_total`` (and the reserved rate).

        ``storage_total_cost`` where given; else what ``dph_total`` holds beyond ``dph_base``.
        """
        if self.storage_total_cost is not None:
            return self.storage_total_cost
        if self.dph_total is not None and self.dph_base is not None:
            return max(0.0, self.dph_total - self.dph_base)
        return None

    def hourly(self, disk_bytes: int, reserved: bool = False) -> float | None:
        """Dollars per hour as rented: the machine at its on-demand or reserved rate, and the disk.

        A price whose searched storage is not known, or an offer without ``storage_cost``, is the
        price as the search priced it (said on stderr): the storage is never counted twice.
        """
        searched = self.searched_storage
        listed = self.reserved_dph_total if reserved else self.dph_total  # with the searched storage
        if reserved or self.dph_base is None:
            rate = None if listed is None or searched is None else listed - searched
        else:
            rate = self.dph_base
        if rate is not None and self.storage_cost is not None:
            return rate + self.storage_cost * disk_bytes / GB / HOURS_PER_MONTH
        if listed is not None:
            return listed
        return None if rate is None else rate + (searched or 0.0)


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
    "machine_ram_bytes": ("cpu_ram", _mib),
    "cpu_cores": ("cpu_cores_effective", float),
    "machine_cpu_cores": ("cpu_cores", float),
    "gpu_frac": ("gpu_frac", float),
    "dph_total": ("dph_total", float),
    "dph_base": ("dph_base", float),
    "reserved_dph_total": ("discounted_dph_total", float),
    "storage_cost": ("storage_cost", float),
    "storage_total_cost": ("storage_total_cost", float),
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


def missing_fields(offers: list[Offer], reserved: bool = False) -> list[str]:
    """One line per needed field that some offers lack: which offers, and what that costs them."""
    out = []
    for key, (lacks, cost) in [*NEEDED.items(), *([RESERVED] if reserved else [])]:
        lacking = [o.id for o in offers if lacks(o)]
        if lacking:
            which = (
                "every offer" if len(lacking) == len(offers) else f"{len(lacking)} of {len(offers)} offers"
            )
            shown = ", ".join(lacking[:5]) + (", ..." if len(lacking) > 5 else "")
            out.append(f"field {key} missing in {which} ({shown}): {cost}")
    return out

"""Parsers for one option's value each: a bad value is a ``pytest.UsageError`` naming its source.

Each takes ``where`` (the flag, variable or ini key the value came from) so the message can say
which to fix.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

import pytest

from pytest_cuzk.config.slo import Slo, parse_slo
from pytest_cuzk.host.limits import (
    Bound,
    address_space,
    available_memory,
    clock_resolution_s,
    thread_limit,
    wait_bound,
)
from pytest_cuzk.vocab.kinds import KINDS, UnknownKind, by_name
from pytest_cuzk.vocab.redact import redact
from pytest_cuzk.vocab.units import parse_size, parse_thresholds

__all__ = ["COMPARE_METRICS", "MAX_RUN_BUDGET_S", "MIN_INTERVAL_S", "THIS_DAEMON", "daemon_value"]  # parsers

MIN_INTERVAL_S = 0.005  # the memory sampler cannot sample faster
EXACT_WHOLE = 2**53  # the largest whole number a float (how options are read) holds exactly
PROOF_RECORD_BYTES = 4096
"""What the plugin keeps of one proof for the rest of its case (its outcome record, its samples): a
ceiling that tests/run checks against a real record, so that a proof count the host cannot hold is
refused at once."""


def _bounded(value: Any, shown: Any, where: str, bound: Bound | None, what: str = "number") -> None:
    if bound is not None and bound.refuses(value):
        raise pytest.UsageError(
            f"Invalid {what} {shown!r} from {where}: at most {bound.shown()}, as {bound.why}"
        )


MAX_RUN_BUDGET_S = 7 * 24 * 3600.0  # a week: anything longer is a typo (15h for 15m), not a plan
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", re.IGNORECASE)
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str, where: str) -> float | None:
    """Seconds from ``900``, ``900s``, ``15m`` or ``1.5h``; None for ``off``; bounded to (0, a week]."""
    if str(text).strip().lower() in ("off", "none"):
        return None
    m = _DURATION.fullmatch(str(text))
    if not m:
        raise pytest.UsageError(
            f"Invalid duration {text!r} from {where}: give seconds (900 or 900s), minutes (15m) or "
            "hours (1.5h), or off"
        )
    seconds = float(m[1]) * _UNIT_S[(m[2] or "s").lower()]
    if not 0 < seconds <= MAX_RUN_BUDGET_S:
        raise pytest.UsageError(
            f"Invalid duration {text!r} from {where}: it must be above 0 and at most a week (168h); "
            "use off for no budget"
        )
    return seconds


def size(text: str, where: str) -> int:
    if re.fullmatch(r"\s*[\d.]+\s*", str(text)):  # bytes by default: 200 would be 200 bytes, not 200 GiB
        raise pytest.UsageError(f"Invalid size {text!r} from {where}: give its unit, e.g. {text.strip()}GiB")
    try:
        value = parse_size(text, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    _bounded(value, text, where, address_space(), "size")
    return value


def kind_map(text: str | None, where: str, parse: Any) -> dict[str, Any]:
    """Parse ``KIND:VALUE,...`` (or a bare VALUE for every kind) into a dict keyed by kind name."""
    if not text:
        return {}
    out: dict[str, Any] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            name, value = part.split(":", 1)
            try:
                kind = by_name(name).name
            except UnknownKind as exc:
                raise pytest.UsageError(f"{where}: {exc}") from exc
            out[kind] = parse(value, where)
        else:
            out.update({k: parse(part, where) for k in KINDS})
    return out


def slo(text: str, where: str) -> Slo:
    try:
        bound = parse_slo(text, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    longest = wait_bound()
    if not math.isfinite(bound.seconds or bound.times_idle or 0.0):
        raise pytest.UsageError(f"Invalid latency bound {text!r} from {where}: must be a finite number")
    _bounded(bound.seconds or 0.0, text, where, longest, "latency bound")
    return bound


def throughput(text: str, where: str) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*/h\s*$", text)
    if not m:
        raise pytest.UsageError(
            f"Invalid throughput {text!r} from {where}: use proofs per hour, e.g. porep:50/h"
        )
    tick = clock_resolution_s()
    fastest = Bound(3600 / tick, f"no proof can take less than one {tick:g} s tick of this host's clock")
    _bounded(float(m.group(1)), text, where, fastest, "throughput")
    return float(m.group(1))


COMPARE_METRICS = (
    *("throughput", "rss_peak", "vram_peak", "p50", "p90", "p99"),
    *("gpu", "synthesis", "queue_wait"),  # the median proof's time in each of the daemon's stages
)


def compare_fail(text: str | None, where: str) -> dict[str, float]:
    try:
        return parse_thresholds(text or "", COMPARE_METRICS, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def ints(text: Any, where: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError as exc:
        raise pytest.UsageError(f"Invalid list {text!r} from {where}: use comma-separated integers") from exc
    if not values or min(values) < 1:
        raise pytest.UsageError(f"Invalid list {text!r} from {where}: integers must be 1 or more")
    return values


def in_flight(batch_sizes: tuple[tuple[int, ...], str], concurrency: tuple[tuple[int, ...], str]) -> None:
    """The most proofs a case keeps in flight (batch × concurrency) fit the threads this host allows.

    Each proof in flight is awaited on a thread of its own; what their requests take of memory is
    checked once the kind's request size is known (``run.execution``).
    """
    (batches, batch_where), (levels, level_where) = batch_sizes, concurrency
    most, limit = max(batches) * max(levels), thread_limit()
    if limit is not None and limit.refuses(most):
        raise pytest.UsageError(
            f"Invalid batch sizes and concurrency ({batch_where} {max(batches)} x {level_where} "
            f"{max(levels)}): {most} proofs in flight need a thread each; at most {limit.most:.0f}, "
            f"as {limit.why}"
        )


def number(text: Any, where: str, bound: Bound | None = None) -> float:
    """A finite number above 0 and within ``bound``."""
    try:
        value = float(text)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"Invalid number {text!r} from {where}") from exc
    if not math.isfinite(value):  # nan passes every comparison, inf waits forever: neither is a bound
        raise pytest.UsageError(f"Invalid number {text!r} from {where}: must be a finite number above 0")
    if value <= 0:
        raise pytest.UsageError(f"Invalid number {text!r} from {where}: must be above 0")
    _bounded(value, text, where, bound)
    return value


def seconds(text: Any, where: str) -> float:
    """A time: no longer than the host can wait."""
    return number(text, where, wait_bound())


def percent_band(text: Any, where: str) -> float:
    """A band around a mean, in percent: beyond 100 it admits a window with no proof at all."""
    return number(text, where, Bound(100, "a band wider than the mean itself admits a window of no proofs"))


def whole(text: Any, where: str, bound: Bound | None = None) -> int:
    value = number(text, where, Bound(EXACT_WHOLE, "a larger whole number is not read exactly"))
    if value != int(value):
        raise pytest.UsageError(f"Invalid number {value!r} from {where}: use a whole number")
    _bounded(value, text, where, bound)
    return int(value)


def proof_count(text: Any, where: str) -> int:
    """A number of proofs a case keeps records of: no more than the host's free memory holds."""
    free = available_memory()
    per_proof = f"{PROOF_RECORD_BYTES >> 10} KiB"
    holds = Bound(free.most // PROOF_RECORD_BYTES, f"{free.why}, for records of up to {per_proof} a proof")
    return whole(text, where, holds)


def interval(text: Any, where: str) -> float:
    value = seconds(text, where)
    if value < MIN_INTERVAL_S:
        raise pytest.UsageError(
            f"Invalid interval {text!r} from {where}: the sampler needs {MIN_INTERVAL_S}s or more"
        )
    return value


def pairs(values: Any, where: str, what: str) -> dict[str, str]:
    out = {}
    for item in values or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip() or not value.strip():
            raise pytest.UsageError(f"Invalid value {item!r} from {where}: use {what}")
        out[key.strip()] = value.strip()
    return out


THIS_DAEMON = ""  # the key of a bare --cuzk-label NAME or --cuzk-machine-id ID: the run's only daemon


def identities(values: Any, where: str, what: str, daemons: int) -> dict[str, str]:
    """``ADDR=VALUE`` per daemon, or a bare ``VALUE`` (kept under THIS_DAEMON) when there is one daemon."""
    bare = [v for v in values or () if "=" not in str(v) and str(v).strip()]
    if bare and daemons > 1:
        raise pytest.UsageError(f"Invalid value {bare[0]!r} from {where}: with several daemons use {what}")
    out = pairs([v for v in values or () if v not in bare], where, what)
    return out | ({THIS_DAEMON: str(bare[-1]).strip()} if bare else {})


def daemon_value(values: dict[str, str], address: str) -> str | None:
    """What ``--cuzk-label`` or ``--cuzk-machine-id`` says of the daemon at ``address``."""
    return values.get(address) or values.get(THIS_DAEMON)


def address(addr: str, where: str, hint: str) -> None:
    from pytest_cuzk.vocab.addresses import parse_address, shown_address

    try:
        parse_address(addr)
    except ValueError as exc:
        raise pytest.UsageError(
            f"Invalid address {shown_address(addr)!r} from {where}: {hint} ({exc})"
        ) from exc


def choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    text = str(value).strip()
    if text not in choices:
        guess = _did_you_mean(text, choices)
        raise pytest.UsageError(
            f"Invalid value {text!r} from {where}: {guess}use one of {', '.join(choices)}"
        )
    return text


def _did_you_mean(text: str, choices: tuple[str, ...]) -> str:
    """``did you mean auto? `` for a word one typo away from a choice; empty for anything else."""
    close = difflib.get_close_matches(text.lower(), choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


def results_db(value: Any, where: str) -> str:
    """``default``, a SQLAlchemy URL or a database file's path; a bare word is a typo, not a file name."""
    text = str(value).strip()
    if "://" in text:
        from sqlalchemy.exc import ArgumentError

        from pytest_cuzk.results.database import normalize_url

        try:
            normalize_url(text)
        except (ValueError, ArgumentError) as exc:  # a driver it lacks; a URL SQLAlchemy cannot parse
            problem = redact(f"Invalid results database {text!r} from {where}: {exc}")
            raise pytest.UsageError(problem) from None
        return text
    if text == "default" or "/" in text or text.endswith((".db", ".sqlite", ".sqlite3")):
        return text
    raise pytest.UsageError(
        f"Invalid results database {redact(text)!r} from {where}: use default, a SQLAlchemy URL "
        "(sqlite:///FILE, postgresql://USER@HOST/DB) or the path of a SQLite file (ending in .db)"
    )


def daemon(value: Any, where: str, modes: tuple[str, ...], addresses: str) -> tuple[str, tuple[str, ...]]:
    """A daemon named by mode or by address(es): (mode, addresses), the mode ``attach`` for addresses."""
    text = str(value).strip()
    if text.lower() in modes:
        return text.lower(), ()
    attach = tuple(a.strip() for a in text.split(",") if a.strip())
    if (guess := _did_you_mean(text, modes)) and ":" not in text:  # a mistyped mode, not an address
        raise pytest.UsageError(
            f"Invalid value {text!r} from {where}: {guess}use {', '.join(modes)} or {addresses}"
        )
    for addr in attach or (text,):
        address(addr, where, f"use {', '.join(modes)} or {addresses}")
    return "attach", attach

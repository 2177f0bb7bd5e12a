"""The test-data cache: find, verify and download each kind's data file, once across workers.

``DataStore.ensure`` finds the file next to the manifest or in the cache dir, checks it
and downloads what is missing (streamed, resumed with Range, renamed into place, under a
file lock shared by xdist workers). Hashing a 51 MB file every run is wasteful, so a
verified hash is remembered by (size, mtime_ns) in a sidecar. A manifest without a sha256
gets one pinned on first download so later runs are held to the same bytes. Everything that
cannot be had is a ``DataUnavailable`` saying how to produce it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from urllib3.exceptions import MaxRetryError
from urllib3.util import Retry

from pytest_cuzk.core.errors import DataDirUnwritable, DataUnavailable
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.data.connections import Deadline, session
from pytest_cuzk.data.download import Failed, SizeMismatch, Transfer, Transient, forget_part
from pytest_cuzk.data.manifest import DataEntry, Manifest
from pytest_cuzk.vocab.files import atomic_write, file_sha256
from pytest_cuzk.vocab.kinds import by_name
from pytest_cuzk.vocab.redact import redact
from pytest_cuzk.vocab.vanilla import format_problem, largest_file

__all__ = ["DataStore"]

log = logging.getLogger(__name__)

GEN_VANILLA = {"winning": "winning-post", "wpost": "window-post", "snap": "snap-prove"}
ATTEMPTS = 3
# Between attempts: none before the second, then 1 s, 2 s ... (urllib3's exponential backoff).
RETRIES = Retry(total=ATTEMPTS - 1, backoff_factor=0.5, backoff_max=30.0)


class DataStore:
    """Finds, verifies and downloads data files into a cache dir that parallel workers share.

    ``notes`` collects what a user should hear about (a pinned sha256, a corrupt copy replaced).
    """

    def __init__(
        self,
        cache_dir: Path,
        *,
        offline: bool = False,
        progress: ProgressLine | None = None,
        stall_s: float = 60.0,
        deadline_s: float = 3600.0,
    ) -> None:
        """``progress`` shows a download's progress and says what must be seen at once (a first pin)."""
        self.cache_dir = Path(cache_dir)
        self.offline = offline
        self.progress = progress if progress is not None else ProgressLine()
        self.transfer = Transfer(self.progress, stall_s, deadline_s)
        self.notes: list[str] = []

    def ensure_all(self, manifest: Manifest, kinds: Iterable[str]) -> dict[str, list[Path] | DataUnavailable]:
        """Ensure every sector of each kind; a kind with any sector that cannot be had maps to why."""
        out: dict[str, list[Path] | DataUnavailable] = {}
        for name in kinds:
            kind = by_name(name).name
            sectors = manifest.entries.get(kind)
            try:
                if sectors is None:
                    raise DataUnavailable(
                        kind,
                        "(none)",
                        manifest.path,
                        f"kinds.{kind}",
                        "the manifest has no entry for this kind",
                        f"add a [kinds.{kind}] table with file = ... or pass --cuzk-input {kind}=PATH",
                    )
                out[kind] = [self.ensure(entry, manifest) for entry in sectors]
            except DataUnavailable as exc:
                out[kind] = exc
        return out

    def ensure(self, entry: DataEntry, manifest: Manifest) -> Path:
        """Return a verified path to the entry's file, downloading it if needed; raise DataUnavailable.

        A cache that cannot be written (read-only, full) is a ``DataDirUnwritable`` naming the file.
        """
        with DataDirUnwritable.raised_for(self.cache_dir / entry.file):
            return self._ensure(entry, manifest)

    def _ensure(self, entry: DataEntry, manifest: Manifest) -> Path:
        local = manifest.dir / entry.file
        if local.is_file():
            problem = self._problem(local, entry, (entry.sha256, f"{entry.entry_key}.sha256"))
            if problem:
                raise self._unavailable(entry, manifest, f"{local} {problem}", f"replace or remove {local}")
            return local
        cached = self.cache_dir / entry.file
        cached.parent.mkdir(parents=True, exist_ok=True)
        # The deadline starts before the lock: waiting for another process's download is this one's.
        deadline = Deadline(self.transfer.deadline_s, self.transfer.stall_s)
        try:
            with FileLock(f"{cached}.lock", timeout=deadline.left()):
                missing = self._check_cached(cached, entry, manifest)
                if missing is None:
                    return cached
                if self.offline:
                    missing += " and offline mode (--cuzk-offline) forbids downloading"
                if self.offline or not entry.url:
                    raise self._unavailable(entry, manifest, missing, self._hint(entry, manifest))
                return self._download(entry, manifest, cached, entry.url, deadline)
        except Timeout:  # an OSError: caught here, not taken for an unwritable cache
            raise self._waited(entry, manifest, deadline) from None

    def _check_cached(self, cached: Path, entry: DataEntry, manifest: Manifest) -> str | None:
        """None when the cached copy is good; else why there is none (a bad copy is moved aside)."""
        pin = _read_json(_pin_path(cached))
        stale = None
        url = redact(entry.url or "")  # a pin keeps no password: it is compared as it is shown
        if pin is not None and entry.sha256 is None and pin.get("url") != url:
            _pin_path(cached).unlink()
            stale = f"came from {pin.get('url')}, but the manifest now says {url}"
        if not cached.is_file():
            return f"not found at {manifest.dir / entry.file} nor at {cached}"
        expected = self._expected(entry, cached)
        problem = stale or self._problem(cached, entry, expected)
        if problem is None:
            if expected[0] is None:
                self._pin(cached, entry, manifest, self._observed_sha(cached))
            return None
        aside = cached.with_name(cached.name + ".corrupt")
        os.replace(cached, aside)
        self._note(f"{cached} {problem}; moved it to {aside}")
        return f"the cached copy {problem} (moved to {aside})"

    def _expected(self, entry: DataEntry, cached: Path) -> tuple[str | None, str]:
        """Return the sha256 the file must have and where that requirement comes from."""
        if entry.sha256:
            return entry.sha256, f"{entry.entry_key}.sha256"
        pin = _read_json(_pin_path(cached)) or {}
        return pin.get("sha256"), f"pin file {_pin_path(cached)}"

    def _problem(self, path: Path, entry: DataEntry, expected: tuple[str | None, str]) -> str | None:
        size = path.stat().st_size
        if entry.size is not None and size != entry.size:
            return f"is {size} bytes, but {entry.entry_key}.size says {entry.size}"
        sha, source = expected
        if sha is not None and (got := self._observed_sha(path)) != sha:
            return f"has sha256 {got}, but {source} says {sha}"
        return None

    def _observed_sha(self, path: Path) -> str:
        """Return the file's sha256, hashing it only when its size or mtime changed since last time."""
        sidecar, stamp = self._stamp(path)
        record = _read_json(sidecar) or {}
        known = record.get("sha256")
        if {k: record.get(k) for k in stamp} == stamp and isinstance(known, str):
            return known
        sha = file_sha256(path)
        _write_json(sidecar, {**stamp, "sha256": sha})
        return sha

    def _stamp(self, path: Path) -> tuple[Path, dict[str, Any]]:
        """Return a file's verification sidecar and the (path, size, mtime_ns) its hash holds for."""
        st = path.stat()
        resolved = str(path.resolve())
        stamp = {"path": resolved, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        name = hashlib.sha256(resolved.encode()).hexdigest()[:32]
        return self.cache_dir / ".verified" / f"{name}.json", stamp

    def _pin(self, path: Path, entry: DataEntry, manifest: Manifest, sha: str) -> None:
        """Trust on first use: record the sha256 later runs are held to, and say so now."""
        pin = _pin_path(path)
        _write_json(pin, {"sha256": sha, "size": path.stat().st_size, "url": redact(entry.url or "")})
        message = (
            f"{entry.file}: {manifest.path} [{entry.entry_key}] has no sha256; trusting it on first use: "
            f'recorded sha256 {sha} in {pin} and later runs must match it (add sha256 = "{sha}" to the '
            "manifest to pin it for everyone)"
        )
        self.progress.say(redact(f"cuzk: {message}"))
        self._note(message)

    def _download(
        self, entry: DataEntry, manifest: Manifest, dest: Path, url: str, deadline: Deadline
    ) -> Path:
        """Download under one deadline for all attempts; a body is bounded by what a request can carry."""
        if not deadline.left():  # it passed while another process had the lock
            raise self._waited(entry, manifest, deadline)
        part = dest.with_name(dest.name + ".part")
        limit = entry.size if entry.size is not None else largest_file(entry.kind)
        retries = RETRIES
        wait = self.progress.stage(f"downloading {entry.file}", deadline.seconds)
        with session() as http, deadline, wait:
            while True:
                try:
                    announced = self.transfer.fetch(http, url, entry.file, part, deadline, limit, entry.size)
                    return self._place(part, dest, entry, manifest, announced)
                except Transient as exc:
                    try:
                        retries = retries.increment("GET", url, error=exc)
                    except MaxRetryError:
                        reason = f"the download from {url} failed {ATTEMPTS} times (the last: {exc})"
                        raise self._unavailable(entry, manifest, reason, self._hint(entry, manifest)) from exc
                    deadline.pause(retries.get_backoff_time())
                except SizeMismatch as exc:
                    fix = self._changed(entry, manifest, "size")
                    raise self._unavailable(entry, manifest, str(exc), fix) from exc
                except Failed as exc:
                    raise self._unavailable(entry, manifest, str(exc), self._hint(entry, manifest)) from exc

    def _place(
        self, part: Path, dest: Path, entry: DataEntry, manifest: Manifest, announced: int | None
    ) -> Path:
        """Check the ``.part`` against size, sha256 or (with neither pinned) its format; rename it into place.

        A file whose sha256 nothing pins is trusted on first use only when the server said how
        long it is and it parses as its kind's format: a cut transfer is never pinned. What
        fails here fails at once: fetching the same bytes again would not help.
        """
        got = file_sha256(part)
        sha, source = self._expected(entry, dest)
        size = part.stat().st_size
        if entry.size is not None and size != entry.size:
            problem = f"{entry.url} gave {size} bytes, but {entry.entry_key}.size says {entry.size}"
            fix = self._changed(entry, manifest, "size")
        elif sha is not None and got != sha:
            problem = f"{entry.url} gave a file with sha256 {got}, but {source} says {sha}"
            fix = self._changed(entry, manifest, "sha256", dest)
        elif sha is None and (why := self._untrusted(part, entry, announced)):
            problem = f"{entry.url} gave {size} bytes that cannot be trusted: {why}"
            fix = f"pin its sha256 or size in [{entry.entry_key}] of {manifest.path}"
        else:
            os.replace(part, dest)
            forget_part(part)
            sidecar, stamp = self._stamp(dest)
            _write_json(sidecar, {**stamp, "sha256": got})
            if sha is None:
                self._pin(dest, entry, manifest, got)
            return dest
        forget_part(part)
        raise self._unavailable(entry, manifest, problem, fix)

    @staticmethod
    def _changed(entry: DataEntry, manifest: Manifest, field: str, dest: Path | None = None) -> str:
        """What to do when the served file is not the one the manifest (or the first download) pinned.

        A sha256 only the first download pinned lives in the pin file beside the cached copy:
        removing it trusts the new file on first use. Everything else is a key of the manifest.
        """
        fix = f"update {entry.entry_key}.{field} in {manifest.path}"
        if field == "sha256" and entry.sha256 is None and dest is not None:
            fix = f"remove {_pin_path(dest)} (the sha256 its first download pinned)"
        return f"the file was not used; if {entry.url} changed on purpose, {fix}"

    @staticmethod
    def _untrusted(part: Path, entry: DataEntry, announced: int | None) -> str | None:
        if announced is None and entry.size is None:
            return "the server sent no Content-Length (pin sha256 or size in the manifest)"
        return format_problem(entry.kind, part.read_bytes())  # at most largest_file(kind) bytes

    def _hint(self, entry: DataEntry, manifest: Manifest) -> str:
        if manifest.engine and manifest.engine.get("name") == "cuzk-ref":
            return f"generate it with `cuzk-ref gen-data {manifest.dir}`"
        where = (
            f"put it at {manifest.dir / entry.file} or {self.cache_dir / entry.file}, "
            f"or pass --cuzk-input {entry.kind}=PATH"
        )
        if entry.url:
            return f"download {entry.url} and {where}"
        if entry.kind in GEN_VANILLA:
            cmd = f"cuzk-bench gen-vanilla {GEN_VANILLA[entry.kind]} ... -o {entry.file}"
            return f"produce it from a sealed sector with `{cmd}`, then {where}"
        return f"produce the C1 output wrapper JSON from a sealed sector, then {where}"

    def _waited(self, entry: DataEntry, manifest: Manifest, deadline: Deadline) -> DataUnavailable:
        reason = (
            f"another process was downloading it for all of --cuzk-download-timeout ({deadline.seconds:g} s) "
            "and it did not arrive"
        )
        return self._unavailable(entry, manifest, reason, self._hint(entry, manifest))

    def _unavailable(self, entry: DataEntry, manifest: Manifest, reason: str, hint: str) -> DataUnavailable:
        return DataUnavailable(entry.kind, entry.file, manifest.path, entry.entry_key, reason, hint)

    def _note(self, message: str) -> None:
        message = redact(message)
        self.notes.append(message)
        log.warning("%s", message)


def _pin_path(path: Path) -> Path:
    return path.with_name(path.name + ".pin.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return dict(value) if isinstance(value, Mapping) else None


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(value, indent=1))

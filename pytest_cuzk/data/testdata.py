"""The test data a daemon's tests use: its manifest, the data cache, and fresh requests.

Which manifest depends on the engine (generated data for the reference engine, the
shipped manifest for cuzk, or ``--cuzk-manifest``); a user's ``--cuzk-input KIND=PATH``
wins for its kind. Every request gets a unique id, because cuzk keeps results by id.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.errors import DataUnavailable
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.data.manifest import Manifest, load_manifest
from pytest_cuzk.data.store import DataStore
from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["DEFAULT_MANIFEST", "TestData"]

DEFAULT_MANIFEST = Path(__file__).resolve().parents[1] / "suite" / "manifest.toml"


class TestData:
    """Data files and requests for the daemons that share one manifest."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        settings: Settings,
        manifest: Path | None,
        progress: ProgressLine | None,
    ) -> None:
        """``progress``: where downloads show their progress (None: stderr)."""
        self.settings = settings
        self.manifest_path = settings.manifest or manifest or DEFAULT_MANIFEST
        self._progress = progress
        self._manifest: Manifest | None = None
        self._found: dict[str, list[Path] | DataUnavailable] = {}
        self._templates: dict[str, list[pb.SubmitProofRequest]] = {}
        self._turn: dict[str, itertools.count[int]] = {}
        self.notes: list[str] = []

    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = load_manifest(self.manifest_path)
        return self._manifest

    def paths(self, kind: ProofKindInfo) -> list[Path]:
        """Every sector's data file for ``kind`` (a user's --cuzk-input instead).

        Raises DataUnavailable, saying why and how to fix it, when they cannot be had.
        """
        if kind.name in self.settings.inputs:
            path = self.settings.inputs[kind.name]
            if path.is_file():
                return [path]
            reason, hint = "file not found", "fix the path in --cuzk-input"
            raise DataUnavailable(kind.name, str(path), path, f"--cuzk-input {kind.name}=", reason, hint)
        if kind.name not in self._found:
            s = self.settings
            store = DataStore(
                s.data_dir,
                offline=s.offline,
                progress=self._progress,
                stall_s=s.download_stall,
                deadline_s=s.download_timeout,
            )
            self._found.update(store.ensure_all(self.manifest(), [kind.name]))
            self.notes += store.notes
        found = self._found[kind.name]
        if isinstance(found, DataUnavailable):
            raise found
        return found

    def path(self, kind: ProofKindInfo) -> Path:
        """The first sector's data file for ``kind`` (DataUnavailable when it cannot be had)."""
        return self.paths(kind)[0]

    def available(self, kind: ProofKindInfo) -> bool:
        try:
            self.paths(kind)
        except DataUnavailable:
            return False
        return True

    def request(self, kind: ProofKindInfo, request_id: str | None = None) -> pb.SubmitProofRequest:
        """A fresh request for one proof of ``kind`` with a unique id, the sectors taken in turn.

        Each sector's request is built once (a PoRep C1 file is ~51 MB) and copied.
        DataUnavailable when the data cannot be had.
        """
        templates = self._templates.get(kind.name) or self._build(kind)
        turn = next(self._turn.setdefault(kind.name, itertools.count()))
        req = pb.SubmitProofRequest()
        req.CopyFrom(templates[turn % len(templates)])
        req.request_id = request_id or f"pytest-cuzk-{kind.name}-{uuid.uuid4()}"
        return req

    def sectors(self, kind: ProofKindInfo) -> int:
        """How many distinct sectors a kind's data has (a batch of more shares some)."""
        return len(self._templates.get(kind.name) or self._build(kind))

    def _build(self, kind: ProofKindInfo) -> list[pb.SubmitProofRequest]:
        paths = self.paths(kind)
        entries = self.manifest().entries.get(kind.name, ())
        built = []
        for i, path in enumerate(paths):
            entry = entries[i] if i < len(entries) else (entries[0] if entries else None)
            fields = dict(entry.request) if entry else {}
            where = f"{self.manifest_path} [{entry.entry_key if entry else f'kinds.{kind.name}'}]"
            built.append(build_request(kind, path, fields, where=where))
        self._templates[kind.name] = built
        return built

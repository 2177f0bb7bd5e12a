"""The test data a daemon's tests use: its manifest, the data cache, and fresh requests.

Which manifest depends on the engine (generated data for the reference engine, the
shipped manifest for cuzk, or ``--cuzk-manifest``); a user's ``--cuzk-input KIND=PATH``
wins for its kind. Every request gets a unique id, because cuzk keeps results by id.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from .datastore import DataStore
from .errors import DataUnavailable
from .inputs import build_request
from .manifest import Manifest, load_manifest
from .progress import Progress
from .proto import pb
from .settings import Settings
from .wire.kinds import ProofKindInfo

__all__ = ["DEFAULT_MANIFEST", "TestData"]

DEFAULT_MANIFEST = Path(__file__).resolve().parent.parent / "fixtures" / "manifest.toml"


class TestData:
    """Data files and requests for the daemons that share one manifest."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, settings: Settings, manifest: Path | None, progress: Progress | None) -> None:
        self.settings = settings
        self.manifest_path = settings.manifest or manifest or DEFAULT_MANIFEST
        self._progress = progress
        self._manifest: Manifest | None = None
        self._found: dict[str, Path | DataUnavailable] = {}
        self.notes: list[str] = []

    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = load_manifest(self.manifest_path)
        return self._manifest

    def path(self, kind: ProofKindInfo) -> Path | DataUnavailable:
        """The data file for ``kind`` (a user's --cuzk-input first), or why it cannot be had."""
        if kind.name in self.settings.inputs:
            path = self.settings.inputs[kind.name]
            if path.is_file():
                return path
            return DataUnavailable(
                kind.name,
                str(path),
                path,
                f"--cuzk-input {kind.name}=",
                "file not found",
                "fix the path in --cuzk-input",
            )
        if kind.name not in self._found:
            store = DataStore(self.settings.data_dir, offline=self.settings.offline, progress=self._progress)
            self._found.update(store.ensure_all(self.manifest(), [kind.name]))
            self.notes += store.notes
        return self._found[kind.name]

    def available(self, kind: ProofKindInfo) -> bool:
        return not isinstance(self.path(kind), DataUnavailable)

    def request(self, kind: ProofKindInfo, request_id: str | None = None) -> pb.SubmitProofRequest:
        """A fresh request for one proof of ``kind`` with a unique id; DataUnavailable when it cannot be."""
        path = self.path(kind)
        if isinstance(path, DataUnavailable):
            raise path
        entry = self.manifest().entries.get(kind.name)
        fields = dict(entry.request) if entry else {}
        rid = request_id or f"pytest-cuzk-{kind.name}-{uuid.uuid4()}"
        where = f"{self.manifest_path} [kinds.{kind.name}]"
        return build_request(kind, path, fields, request_id=rid, where=where)

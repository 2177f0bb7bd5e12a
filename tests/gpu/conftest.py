"""The GPU tests reuse the reference engine tests' fixtures and helpers (``tests/refengine``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_REFENGINE = Path(__file__).resolve().parents[1] / "refengine"
sys.path.insert(0, str(_REFENGINE))
_spec = importlib.util.spec_from_file_location("refengine_conftest_gpu", _REFENGINE / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
ref_data, ref_params, start_engine = _fixtures.ref_data, _fixtures.ref_params, _fixtures.start_engine

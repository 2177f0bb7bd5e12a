"""The per-user directories: platformdirs' rule for the cache and the data, one rule on every platform."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from pytest_cuzk.host.paths import user_cache_dir, user_data_dir
from pytest_cuzk.refengine.config import default_param_cache
from pytest_cuzk.results.database import default_url


def test_every_per_user_path_is_platformdirs_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Whatever the platform, the cache, the reference engine's params and the results database agree."""
    monkeypatch.setattr(platformdirs, "user_cache_path", lambda app, appauthor: tmp_path / "cache" / app)
    monkeypatch.setattr(platformdirs, "user_data_path", lambda app, appauthor: tmp_path / "data" / app)
    assert user_cache_dir() == tmp_path / "cache" / "pytest-cuzk"
    assert default_param_cache("default") == tmp_path / "cache" / "pytest-cuzk" / "ref-params-default"
    assert default_url() == f"sqlite:///{tmp_path / 'data' / 'pytest-cuzk' / 'results.db'}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG variables are Linux's")
def test_linux_follows_the_xdg_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert (user_cache_dir(), user_data_dir()) == (
        tmp_path / "cache" / "pytest-cuzk",
        tmp_path / "data" / "pytest-cuzk",
    )

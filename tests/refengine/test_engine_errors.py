"""Every exception class the reference engine defines derives from its one error base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest_cuzk.refengine as refengine
from pytest_cuzk.refengine.errors import RefEngineError


def _engine_modules():
    for info in pkgutil.walk_packages(refengine.__path__, prefix="pytest_cuzk.refengine."):
        if info.name in ("pytest_cuzk.refengine.gpu.msm", "pytest_cuzk.refengine.gpu.keys"):
            continue  # importable only where CuPy is; neither defines an error of its own
        yield importlib.import_module(info.name)


def test_every_error_the_engine_defines_is_a_ref_engine_error():
    defined = {
        obj
        for module in _engine_modules()
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == module.__name__
    }
    assert len(defined) >= 5, defined  # the config, param cache, PCE and job input errors, and the base
    assert {cls.__name__ for cls in defined if not issubclass(cls, RefEngineError)} == set()

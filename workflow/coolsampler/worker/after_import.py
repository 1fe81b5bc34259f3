"""Patch a module of verl or vLLM in whichever process first imports it, without importing it early.

The worker modules (``VERL_USE_EXTERNAL_MODULES``) are loaded by verl's own ``__init__`` in every one of
its processes; most of those never touch the module a work-around patches, and importing it there
would cost start-up (and, for vLLM, can import verl again half-initialised). ``patch_after_import``
patches at once when the module is already whole (a pre-importing parent such as
``coolsampler.worker.prefork`` had it), else right after its first import. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``fn(module)`` right after ``name`` is first imported."""

    def __init__(self, name: str, fn: Callable[[ModuleType], None]) -> None:
        self.name, self.fn = name, fn

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            self.fn(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def patch_after_import(name: str, fn: Callable[[ModuleType], None]) -> None:
    """``fn(module)`` now if ``name`` is imported and whole, else once, right after its import."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        fn(module)
    elif not any(isinstance(f, AfterImport) and f.name == name and f.fn is fn for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, fn))


__all__ = ["AfterImport", "patch_after_import"]

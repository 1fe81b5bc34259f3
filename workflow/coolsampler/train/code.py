"""What code a job runs, read from the source: the package modules a set of entry points reaches through
its imports, and the content of that code that can change a result.

Why here: two decisions rest on it. The training image (and with it every run's training key) is
built from exactly the modules verl's processes can import (``coolsampler.train.container``), and each
analysis job (parse, figure, table, claims) depends on exactly the modules its rule script reaches, so
editing a module reruns what imports it and nothing else. Both lists are derived here, never kept by
hand.

What counts as a change of code (``code_content``): a Python module's syntax tree without its
docstrings, so a comment or a docstring edit retrains nothing; any other file counts byte for byte.
Light: ``ast`` and ``hashlib`` only; nothing is imported to be read.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from coolsampler.spec.source import code_content

PACKAGE = "coolsampler"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
_DOTTED = re.compile(rf"^{PACKAGE}(\.[A-Za-z_]\w*)+$")


def _module_file(name: str, package_dir: Path) -> Path | None:
    """``coolsampler.a.b`` -> ``<package_dir>/a/b.py`` or ``.../a/b/__init__.py``; None if neither."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = package_dir.joinpath(*parts[1:])
    for cand in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if cand is not None and cand.is_file():
            return cand
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module name a module's source can import when it runs, read with ``ast``.

    Imports inside functions count (``coolsampler.worker.cpu_platform`` imports lazily), imports under
    ``if TYPE_CHECKING:`` do not (they never run). ``from a import b`` yields ``a`` and ``a.b`` (b
    may be a submodule; callers keep the names that are files). A string constant that is a whole
    dotted package name (``"coolsampler.worker.x.Cls"``, an ``importlib`` or verl-config target)
    counts too, since verl and ``importlib`` import those by name.
    """
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{node.module}" if node.module else parent
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for item in node.value.split(","):
                if _DOTTED.match(item.strip()):
                    names.add(item.strip())
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return names


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_files(roots: Iterable[str], package_dir: str | Path = PACKAGE_DIR) -> dict[str, Path]:
    """Module name -> file of every package module the roots reach through imports (parents included:
    importing ``coolsampler.worker.losses`` runs ``coolsampler/__init__.py`` and
    ``coolsampler/worker/__init__.py``)."""
    package_dir = Path(package_dir)
    todo = list(roots)
    found: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        for candidate in _with_parents(name):
            # "coolsampler.worker.x.Cls" names a class: its longest prefix that is a file is the module
            path = _module_file(candidate, package_dir)
            if path is None or candidate in found:
                continue
            found[candidate] = path
            todo.extend(imported_modules(path.read_text(), candidate, is_package=path.name == "__init__.py"))
    return dict(sorted(found.items()))


def script_code(script: str | Path, roots: Iterable[str] = (), package_dir: str | Path = PACKAGE_DIR) -> list[Path]:
    """A rule script and every package module it (and ``roots``, modules it loads by name) reaches: the
    code files an analysis job depends on."""
    script = Path(script)
    names = imported_modules(script.read_text(), "__main__") | set(roots)
    return [script, *module_files(sorted(names), package_dir).values()]


__all__ = ["PACKAGE", "PACKAGE_DIR", "code_content", "imported_modules", "module_files", "script_code"]

"""The package's layers and the one direction its imports point, checked from the source.

Every module of ``workflow/coolsampler`` is read with ``ast`` (never imported), and every import of a
package module counts: module-level, function-level and ``TYPE_CHECKING`` ones alike, since each of
them is a dependency a reader has to follow. The rules (docs/layers.md):

* ``spec``: fixed facts, the temperature grammar, runs, keys, studies, targets. Imports ``spec`` only.
* ``worker``: code verl runs in its own processes. Imports ``spec`` only (and itself).
* ``train``: verl overrides, the platform, the job. Imports ``spec`` and ``worker``.
* ``results``: metrics, analysis, claims. Imports ``spec``.
* ``paper``: labels, figures, tables, report. Imports ``spec`` and ``results``.
* ``world``: the generated worlds rules make (toy sums, chain worlds) and their probes. Imports ``spec``
  only; the rules, their scripts and ``testkit`` use it (``cli`` may), no training layer does (so it is
  no part of the training key).
* ``testkit``: instruments for tests and acceptance; every layer but ``cli`` may be below it, and no
  layer but ``cli`` imports it (so it never enters the image with the training code).
* ``cli``: one module per subcommand; may import every layer.

Plus: no import circle among modules, at most 12 modules at the package root, and the heavy stack
(verl, vLLM, torch) stays out of the light layers when they are imported for real.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "coolsampler"

# layer -> the layers it may import (besides itself)
MAY_IMPORT: dict[str, set[str]] = {
    "spec": set(),
    "worker": {"spec"},
    "train": {"spec", "worker"},
    "results": {"spec"},
    "paper": {"spec", "results"},
    "world": {"spec"},
    "testkit": {"spec", "worker", "train", "results", "paper", "world"},
    "cli": {"spec", "worker", "train", "results", "paper", "world", "testkit"},
}
HEAVY = {"torch", "verl", "vllm", "ray", "transformers"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def package_imports(path: Path, known: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere in its body (``from pkg import mod`` counts as mod)."""
    tree = ast.parse(path.read_text(), str(path))
    me = _module_name(path)
    here = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import mod`` depends on pkg.mod; on pkg itself only for a name defined there
            subs = [f"{mod}.{a.name}" for a in node.names]
            names = [s for s in subs if s in known] or [mod]
        else:
            continue
        for name in names:
            # the deepest package module the name refers to
            parts = name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != me and parts[0] == "coolsampler":
                out.add(".".join(parts))
    return out


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else None


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: {i for i in package_imports(p, known) if i != "coolsampler"} for m, p in mods.items()}


def test_every_module_belongs_to_a_layer_or_is_a_root_leaf():
    graph = import_graph()
    root = [m for m in graph if m.count(".") == 1 and layer_of(m) is None]
    assert len(root) <= 12, root
    for m in root:  # root modules are shared leaves: they import nothing of the package
        assert not graph[m], (m, graph[m])
    unknown = {m for m in graph if m.count(".") >= 2 and layer_of(m) not in MAY_IMPORT}
    assert not unknown, unknown


def test_imports_point_one_way():
    graph = import_graph()
    bad = []
    for mod, deps in graph.items():
        layer = layer_of(mod)
        if layer is None:
            continue
        for dep in deps:
            dl = layer_of(dep)
            if dl is None or dl == layer:
                continue
            if dl not in MAY_IMPORT[layer]:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the layer direction:\n" + "\n".join(sorted(bad))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    cycles = _cycles(import_graph())
    assert not cycles, cycles


def test_cycle_finder_finds_a_circle():
    """The checker itself: a two-module circle and a longer one are found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_reader_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "coolsampler"
    (pkg / "spec").mkdir(parents=True)
    (pkg / "paper").mkdir()
    for f in ("__init__.py", "spec/__init__.py", "paper/__init__.py", "spec/a.py"):
        (pkg / f).write_text("")
    (pkg / "spec" / "b.py").write_text("def f():\n    from coolsampler.paper import c\n    from . import a\n")
    (pkg / "paper" / "c.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    mods = modules()
    assert package_imports(mods["coolsampler.spec.b"], set(mods)) == {"coolsampler.paper.c", "coolsampler.spec.a"}


# --------------------------------------------------------------------------------------------------
# The heavy stack, when the light layers are imported for real


def _loaded_after_import(mods: list[str]) -> set[str]:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in mods)
        + "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


# the modules whose job is to drive verl itself: they import it (the rest of their layer must not)
VERL_DRIVERS = {"coolsampler.train.verl_config"}


@pytest.mark.parametrize("layer", ["spec", "train", "results", "paper", "world", "cli"])
def test_light_layers_import_no_heavy_stack(layer):
    """Studies, run keys, overrides, parsing, analysis, figures and the CLI run on a laptop with pandas; the
    worlds too, since Snakemake imports them to build the DAG (torch comes only where a model is made)."""
    mods = sorted(
        m for m in modules() if layer_of(m) == layer and m not in VERL_DRIVERS and not m.endswith(".__main__")
    )
    loaded = _loaded_after_import(mods)
    assert not loaded & HEAVY, (layer, loaded & HEAVY)


def test_worker_code_loads_no_analysis():
    """What verl's processes import stays out of the analysis and figure code (they would drag matplotlib
    and pandas into every worker)."""
    code = (
        "import sys, coolsampler.worker.losses, coolsampler.worker.controller, coolsampler.worker.rewards\n"
        "print(sorted(m for m in sys.modules if m.startswith(('coolsampler.results', 'coolsampler.paper'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

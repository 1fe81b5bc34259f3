"""Each verl patch reads in one screen and only calls the package: at most 120 changed lines, the
staleness gate (0001) the largest, each quoting the paper, and none deciding a refresh by step mod N or
reading a trainer key by hand (coolsampler.worker.trainer_keys reads them)."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import pytest

from coolsampler.worker.trainer_keys import NAMES

REPO = Path(__file__).resolve().parents[2]
PATCHES = sorted((REPO / "patches" / "verl").glob("*.patch"))
MAX_CHANGED = 120


def changed(patch: Path) -> list[str]:
    """The lines a patch adds or removes (not its file headers)."""
    return [
        line
        for line in patch.read_text().splitlines()
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- "))
    ]


@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_a_patch_reads_in_one_screen_and_quotes_the_paper(patch):
    assert len(changed(patch)) <= MAX_CHANGED, f"{patch.name}: {len(changed(patch))} changed lines"
    assert re.search(r'^Paper, [^\n]*"', patch.read_text(), re.M), f"{patch.name} quotes no paper sentence"


def test_the_staleness_gate_is_the_largest_patch():
    sizes = {p.name: len(changed(p)) for p in PATCHES}
    assert max(sizes, key=sizes.get) == "0001-staleness-gate.patch", sizes


def test_no_patch_reads_a_trainer_key_by_hand():
    added = "\n".join(line for p in PATCHES for line in changed(p) if line.startswith("+"))
    for name in NAMES:
        assert not re.search(rf"""get\(["']{name}["']""", added), name
    assert "assert " not in added and "print(" not in added  # clear errors and verl's logger


# What "a step" and "the refresh interval" are called where a refresh could be decided by step mod N
STEP_NAMES = {"global_steps", "global_step", "step", "steps"}
INTERVAL_NAMES = {"refresh_interval", "N"}


def _names(node: ast.AST) -> set[str]:
    """Every name an expression mentions, attribute chains included (``self.keys.refresh_interval``)."""
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    }


def step_mod_n(source: str) -> list[int]:
    """The lines of every ``%`` (a BinOp or ``%=``) whose operands mention a step and the refresh
    interval: a refresh decided by step mod N, read from the syntax, whatever the spelling."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            mentioned = _names(node.left) | _names(node.right)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mod):
            mentioned = _names(node.target) | _names(node.value)
        else:
            continue
        if mentioned & STEP_NAMES and mentioned & INTERVAL_NAMES:
            hits.append(node.lineno)
    return hits


def patched_files() -> list[Path]:
    """The verl files the patches touch, as the installed (patched) verl holds them."""
    verl = pytest.importorskip("verl")
    root = Path(verl.__file__).resolve().parents[1]
    listed = (root / "verl" / "coolsampler_patches.txt").read_text().splitlines()
    assert listed == [f"{p.name} {hashlib.sha256(p.read_bytes()).hexdigest()}" for p in PATCHES], (
        "the installed verl is not built from these patches (rerun workflow/tools/setup_env.sh)"
    )
    touched = {m for p in PATCHES for m in re.findall(r"^\+\+\+ b/(\S+\.py)", p.read_text(), re.M)}
    return sorted(root / t for t in touched)


def test_the_step_mod_n_check_sees_every_spelling():
    forms = [
        "stale = self.global_steps % self.coolsampler_keys.refresh_interval",  # the form the old regex missed
        "if (step - 1) % keys.refresh_interval == 0: pass",
        "x = self.global_steps % N",
        "self.global_steps %= self.config.trainer.refresh_interval",
    ]
    assert [bool(step_mod_n(f)) for f in forms] == [True] * len(forms)
    assert not step_mod_n("ok = self.global_steps % self.config.trainer.test_freq == 0")  # verl's own validation


def test_the_step_mod_n_check_finds_the_deliberate_fault():
    """testkit/faults.py breaks the gate on purpose with the fixed N's grid; the check must see it there."""
    faults = REPO / "workflow" / "coolsampler" / "testkit" / "faults.py"
    source = faults.read_text()
    assert [source.splitlines()[i - 1].strip() for i in step_mod_n(source)] == [
        "stale = self.global_steps % self.coolsampler_keys.refresh_interval  # the fault: a fixed N's grid"
    ]


def test_neither_the_patched_verl_nor_the_worker_code_decides_by_step_mod_n():
    """Which step refreshes is the gate's (coolsampler.spec.guard.RefreshGate): read from the syntax of
    every patched verl file and of the package's worker code, no ``%`` of a step by the refresh interval."""
    files = [*patched_files(), *sorted((REPO / "workflow" / "coolsampler" / "worker").glob("*.py"))]
    files.append(REPO / "workflow" / "coolsampler" / "spec" / "guard.py")
    found = {str(f): step_mod_n(f.read_text()) for f in files}
    assert {f: lines for f, lines in found.items() if lines} == {}
    assert len([f for f in files if "site-packages" in str(f) or "/verl/" in str(f)]) >= 5


def test_the_patch_page_describes_every_patch():
    page = (Path(__file__).resolve().parents[2] / "docs" / "patches.md").read_text()
    assert [p.stem for p in PATCHES if f"| `{p.stem}` |" not in page] == []

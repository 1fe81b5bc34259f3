"""The learner-sampler KL levels have one owner, ``coolsampler.spec.settings``: every text that names a
level (captions, figure labels, table columns, the CLI's lines) prints it from its constant."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from coolsampler.spec import diagnostics, settings

REPO = Path(__file__).resolve().parents[2]
CODE = [REPO / "workflow" / "coolsampler", REPO / "workflow" / "scripts"]
OWNER = REPO / "workflow" / "coolsampler" / "spec" / "settings.py"

# A KL level spelled in text: "KL > 0.1", "KL above 1", "1 nat", "0.1-nat".
SPELLED_LEVEL = re.compile(
    r"KL\s*(?:>|&gt;|above|over)\s*(?:0?\.1|1)(?![\d.])|(?<![\d.])(?:0?\.1|1(?:\.0)?)[ -]nats?\b"
)


def spelled_levels(source: str, name: str = "<source>") -> list[str]:
    """The string literals of ``source`` (the literal parts of f-strings included) that spell a KL level.
    Docstrings and comments are left out: they explain, and no figure, table or message prints them."""
    tree = ast.parse(source, name)
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    return [
        f"{name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and SPELLED_LEVEL.search(node.value)
    ]


def test_no_text_spells_a_kl_level() -> None:
    found = [
        hit
        for root in CODE
        for path in sorted(root.rglob("*.py"))
        if path != OWNER
        for hit in spelled_levels(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert not found, "a KL level spelled instead of taken from coolsampler.spec.settings:\n" + "\n".join(found)


def test_the_check_sees_a_spelled_level() -> None:
    source = (
        '"""Docstring: KL > 1 nat is fine here."""\n'
        "# a comment: 0.1 nat\n"
        'A = "first step with KL > 0.1"\n'
        'B = f"{x} at 1 nat"\n'
        'C = f"KL > {KL_LEAD_NAT:g}, {nat_text(KL_EARLY_NAT)}"\n'
        'D = "KL > 10, 11 nats, 0.15 nat"\n'
    )
    assert [hit.split(": ", 1)[0] for hit in spelled_levels(source)] == ["<source>:3", "<source>:4"]


def test_the_texts_follow_the_constants() -> None:
    """Other levels in the owner change every text that names one, and the lead table's KL threshold."""
    probe = (
        "import json\n"
        "import coolsampler.spec.settings as S\n"
        "S.KL_LEAD_NAT, S.KL_EARLY_NAT = 2.0, 0.25\n"
        "from coolsampler.spec import diagnostics as D\n"
        "from coolsampler.spec.targets import TARGETS\n"
        "from coolsampler.paper import plotting, tables\n"
        "print(json.dumps({'draws': {n: t.draws for n, t in TARGETS.items()},\n"
        "    'table2': tables.TABLE2_CAPTION, 'table4': tables.TABLE4_CAPTION,\n"
        "    'line': plotting.ONE_NAT_LABEL, 'kl': D.diagnostic('kl').threshold}))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, cwd=REPO)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout)
    assert got["line"] == "2 nat" and got["kl"] == 2.0
    assert "labelled 2 nat" in got["draws"]["fig1"] and "(log, 2 nat labelled)" in got["draws"]["fig8"]
    assert "the first step with KL > 0.25 nat" in got["draws"]["fig2"]
    assert "KL > 0.25 / KL > 2: first step" in got["table2"] and "above 0.25 / 2 nat per token" in got["table2"]
    assert "lead = onset - KL > 2 " in got["table2"] and "KL above 2 nat," in got["table4"]
    texts = [*got["draws"].values(), got["table2"], got["table4"]]
    assert not [t for t in texts if SPELLED_LEVEL.search(t)]


def test_the_texts_name_the_levels() -> None:
    assert settings.nat_text(settings.KL_LEAD_NAT) == "1 nat"
    assert settings.kl_above_text(settings.KL_EARLY_NAT) == "KL > 0.1"
    assert diagnostics.KL_NATS == settings.KL_LEAD_NAT

"""The correction registry is the one home of a correction: the study schema's choices come from it, and a
correction registered here (a dummy one) reaches the overrides, the guard's check, the tables' labels
and order, and the figures' colours, line styles and signal panel without any other module naming it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from matplotlib.figure import Figure

from coolsampler.paper import figures as F
from coolsampler.paper import labels as L
from coolsampler.paper import plotting as P
from coolsampler.paper.tables import table4_frames, table4_order
from coolsampler.spec import corrections
from coolsampler.spec.corrections import ROLLOUT_IS, Correction, FromRecipe, Signal
from coolsampler.spec.guard import check_signal_logged
from coolsampler.spec.settings import CORRECTIONS, PAPER_RECIPE
from coolsampler.spec.study import Run, Temperature
from coolsampler.spec.validate import StudyError, check_study, study_schema
from coolsampler.testkit.synthetic import make_metrics
from coolsampler.train.overrides import verl_overrides
from coolsampler.train.paths import RunPaths

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "workflow" / "coolsampler"
# The only modules that may name a correction: the registry, and the policy losses verl registers by name.
HOMES = {PACKAGE / "spec" / "corrections.py", PACKAGE / "worker" / "losses.py"}

DUMMY = Correction(
    name="dummy_seq",
    label="Dummy-IS",
    table_label="dummy",
    order=5,
    overrides={ROLLOUT_IS: "sequence", "algorithm.rollout_correction.rollout_is_threshold": FromRecipe("tis_cap")},
    is_weights=True,
    unlogged=("probs_diff",),
    signals=(Signal("veto_frac", "dummy vetoes", ("actor/dummy/veto",), ":", "dummy vetoes"),),
    colour="#123456",
    dashed="always",
)


@pytest.fixture
def dummy() -> Iterator[Correction]:
    corrections.register(DUMMY)
    try:
        yield DUMMY
    finally:
        corrections.unregister(DUMMY.name)


def run_with(correction: str, Tb: float = 1.0) -> Run:
    return Run("toy-qwen2", "arith", 4, PAPER_RECIPE["lr"], correction, Temperature("fixed", Tb), 1.0, 1, 16, 4)


def _schema_enums(schema: dict) -> list[list[str]]:
    """Every list of choices the study schema gives a run's ``correction``."""
    found: list[list[str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "correction" in node and isinstance(node["correction"], dict) and "anyOf" in node["correction"]:
                for alt in node["correction"]["anyOf"]:
                    found.append(alt["enum"] if "enum" in alt else alt["items"]["enum"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return found


def test_the_schema_takes_its_corrections_from_the_registry() -> None:
    # the schema file names none; what the validation reads is the registry's, in its order
    assert _schema_enums(yaml.safe_load((PACKAGE / "spec" / "schemas" / "study.schema.yaml").read_text())) == [[], []]
    found = _schema_enums(study_schema())
    assert found and all(enum == list(corrections.NAMES) for enum in found), found
    assert CORRECTIONS == corrections.NAMES == ("tis", "none", "mu_grpo")


def test_a_registered_correction_is_a_study_choice(dummy: Correction) -> None:
    entry = {"model": "toy-qwen2", "task": "arith", "N": 4, "lr": 1e-4, "Tb": 1.0, "seed": 1}
    study = {"name": "s", "runs": [{**entry, "correction": dummy.name}]}
    check_study(study, "s.yaml")  # accepted: the registry is the schema's list
    corrections.unregister(dummy.name)
    with pytest.raises(StudyError, match="correction"):
        check_study(study, "s.yaml")


def test_a_registered_correction_reaches_the_overrides(dummy: Correction) -> None:
    lines = verl_overrides(run_with(dummy.name), RunPaths("m", "t", "v", "/o"), platform="gpu")
    assert f"{ROLLOUT_IS}=sequence" in lines
    assert f"algorithm.rollout_correction.rollout_is_threshold={PAPER_RECIPE['tis_cap']}" in lines
    # and the built-in corrections keep theirs
    tis = verl_overrides(run_with("tis"), RunPaths("m", "t", "v", "/o"), platform="gpu")
    assert f"{ROLLOUT_IS}=token" in tis


def test_a_registered_correction_reaches_the_guard_check(dummy: Correction) -> None:
    with pytest.raises(ValueError, match="probs_diff is not logged under correction dummy_seq"):
        check_signal_logged("probs_diff", dummy.name)
    check_signal_logged("ess", dummy.name)  # its IS weights are logged


def test_a_registered_correction_reaches_labels_and_tables(dummy: Correction) -> None:
    settings = run_with(dummy.name).settings()
    assert L.correction_label(settings) == "Dummy-IS"
    assert L.table_correction_label(dummy.name) == "dummy"
    assert L.run_name(settings).endswith(", Dummy-IS")  # not the standard correction: named
    assert not L.run_name(run_with("tis").settings()).endswith("TIS")
    # ordered after every built-in correction (its order 5), before an unknown one
    orders = [table4_order(run_with(c).settings()) for c in ("tis", "mu_grpo", "none", dummy.name)]
    assert orders == sorted(orders)
    entries = [(run_with(c).settings(), make_metrics(4, 16, 4, correction=c), None) for c in (dummy.name, "tis")]
    data, shown = table4_frames(entries)
    assert list(data["correction"]) == ["tis", dummy.name]
    assert list(shown["Correction"]) == ["TIS", "dummy"]


def test_a_registered_correction_reaches_the_plots(dummy: Correction) -> None:
    settings = run_with(dummy.name).settings()
    assert P.run_colour(settings) == "#123456"
    assert F.default_linestyle(settings) == "--"
    assert F.default_linestyle(run_with("tis").settings()) == "-"
    metrics = make_metrics(4, 16, 4, correction=dummy.name)
    assert metrics["veto_frac"].notna().all()  # the synthetic log holds the signal its correction logs
    ax = Figure().subplots()
    F._signals_panel(ax, [(settings, metrics, None)], "(c)")
    assert [line.get_label() for line in ax.get_lines() if line.get_linestyle() == ":"] == ["Tb=1: dummy vetoes"]


def _names_a_correction(node: ast.AST, names: set[str]) -> bool:
    """A comparison with a correction's name, or a mapping keyed by two or more of them: the spellings a
    module uses to treat corrections apart (run data that merely *is* a name, like a study's runs, is not)."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        consts = [
            e.value
            for o in operands
            for e in ([o] if isinstance(o, ast.Constant) else getattr(o, "elts", []))
            if isinstance(e, ast.Constant)
        ]
        return any(c in names for c in consts)
    if isinstance(node, ast.Dict):
        return sum(isinstance(k, ast.Constant) and k.value in names for k in node.keys) >= 2
    return False


def test_no_module_but_the_registry_treats_a_correction_by_name() -> None:
    names = set(corrections.NAMES) - {"none"}  # "none" is also a word many options take
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in HOMES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Compare, ast.Dict)):
                continue
            if _names_a_correction(node, names) or (
                _names_a_correction(node, {"none"}) and "corr" in ast.unparse(node)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not offenders, "ask coolsampler.spec.corrections instead:\n" + "\n".join(offenders)


def test_the_check_sees_a_module_that_names_one() -> None:
    names = set(corrections.NAMES)
    assert _names_a_correction(ast.parse('x == "mu_grpo"').body[0].value, names)  # type: ignore[attr-defined]
    assert _names_a_correction(ast.parse('c not in (None, "tis")').body[0].value, names)  # type: ignore[attr-defined]
    assert _names_a_correction(ast.parse('{"tis": 0, "mu_grpo": 1}').body[0].value, names)  # type: ignore[attr-defined]
    assert not _names_a_correction(ast.parse('x == "fixed"').body[0].value, names)  # type: ignore[attr-defined]

"""Strict study configs: every bad study is refused before any job starts, in one line that names the
field and says what is allowed there; and no run key can smuggle shell or a path into a rule.

Each case is the smoke study (config/config.yaml) with one small edit, so a failure here means that
one edit, and nothing else, slipped through or produced an unhelpful message.
"""

from __future__ import annotations

import copy
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from coolsampler.spec.study import KEY_WILDCARD_RE, StudyError, parse_key, study_from_dict
from tests.dry_run import results_config

REPO = Path(__file__).resolve().parents[2]
SMOKE: dict[str, Any] = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

Edit = Callable[[dict[str, Any]], None]


def put(*path: str | int, value: Any) -> Edit:
    """An edit setting ``study[path...] = value``."""

    def edit(d: dict[str, Any]) -> None:
        for p in path[:-1]:
            d = d[p]
        d[path[-1]] = value

    return edit


def drop(*path: str | int) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for p in path[:-1]:
            d = d[p]
        del d[path[-1]]

    return edit


def both(*edits: Edit) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for e in edits:
            e(d)

    return edit


def bad_study(edit: Edit) -> dict[str, Any]:
    d = copy.deepcopy(SMOKE)
    edit(d)
    return d


ALLOWED = "allowed"
# (id, edit, a substring naming the field, a word saying what is allowed)
CASES: list[tuple[str, Edit, str, str]] = [
    # temperatures
    ("Tb zero", put("runs", 1, "Tb", value=0), "runs[1].Tb", ALLOWED),
    ("Tb negative", put("runs", 1, "Tb", value=-0.5), "runs[1].Tb", ALLOWED),
    ("Tb absurd", put("runs", 1, "Tb", value=5.0), "runs[1].Tb", ALLOWED),
    ("Tb absurd inside a grid", put("runs", 0, "Tb", value=[1.0, 3.0]), "runs[0].Tb[1]", ALLOWED),
    ("Tb text", put("runs", 1, "Tb", value="hot"), "runs[1].Tb", ALLOWED),
    ("Tb NaN", put("runs", 1, "Tb", value=math.nan), "runs[1].Tb", ALLOWED),
    ("Tl zero", put("defaults", "Tl", value=0), "defaults.Tl", ALLOWED),
    ("Tl absurd", put("defaults", "Tl", value=10), "defaults.Tl", ALLOWED),
    ("Tl misspelt tied", put("defaults", "Tl", value="tide"), "defaults.Tl", ALLOWED),
    # refresh interval
    ("N zero", put("runs", 1, "N", value=0), "runs[1].N", ALLOWED),
    ("N negative", put("runs", 1, "N", value=-4), "runs[1].N", ALLOWED),
    ("N fractional", put("runs", 1, "N", value=64.5), "runs[1].N", ALLOWED),
    ("N as a string", put("runs", 1, "N", value="64"), "runs[1].N", ALLOWED),
    ("N as a bool", put("runs", 1, "N", value=True), "runs[1].N", ALLOWED),
    # learning rate
    ("lr zero", put("defaults", "lr", value=0), "defaults.lr", ALLOWED),
    ("lr negative", put("defaults", "lr", value=-1e-3), "defaults.lr", ALLOWED),
    ("lr absurd", put("defaults", "lr", value=5.0), "defaults.lr", ALLOWED),
    ("lr infinite", put("defaults", "lr", value=math.inf), "defaults.lr", ALLOWED),
    ("lr as a bool", put("defaults", "lr", value=True), "defaults.lr", ALLOWED),
    ("lr as YAML text 1e-3", put("defaults", "lr", value="1e-3"), "defaults.lr", "decimal point"),
    # names
    ("unknown model", put("defaults", "model", value="gpt-5"), "defaults.model", ALLOWED),
    ("unknown task", put("defaults", "task", value="gsm9k"), "defaults.task", ALLOWED),
    ("unknown model in a run", put("runs", 1, "model", value="llama"), "runs[1].model", ALLOWED),
    ("unknown correction", put("runs", 1, "correction", value="ppo"), "runs[1].correction", ALLOWED),
    (
        "unknown correction in a grid",
        put("runs", 0, "correction", value=["tis", "ppo"]),
        "runs[0].correction[1]",
        ALLOWED,
    ),  # noqa: E501
    (
        "unknown controller",
        put("runs", 1, "Tb", value={"controller": "pid", "start": 0.8}),
        "runs[1].Tb.controller",
        ALLOWED,
    ),  # noqa: E501
    ("unknown replicate", put("runs", 1, "replicate", value="again"), "runs[1].replicate", ALLOWED),
    ("bad study name", put("name", value="../etc"), "name", ALLOWED),
    ("unknown profile", put("profile", value="tpu"), "profile", ALLOWED),
    # machines
    ("GPU memory zero", put("hardware", value={"gpu_memory_gib": 0}), "hardware.gpu_memory_gib", ALLOWED),
    ("unknown hardware key", put("hardware", value={"gpus": 8}), "hardware", ALLOWED),
    (
        "micro-batch zero",
        put("models", value={"qwen2.5-math-1.5b": {"micro_batch": 0}}),
        "models.qwen2.5-math-1.5b.micro_batch",
        ALLOWED,
    ),
    (
        "vLLM share above 1",
        put("models", value={"qwen2.5-math-1.5b": {"gpu_memory_utilization": 1.5}}),
        "models.qwen2.5-math-1.5b.gpu_memory_utilization",
        ALLOWED,
    ),
    # duplicates
    ("duplicate run entry", lambda d: d["runs"].append(copy.deepcopy(d["runs"][1])), "runs[2]", "replicate: cut|rerun"),  # noqa: E501
    ("duplicate inside a grid", put("runs", 0, "seed", value=[1, 1]), "runs[0]", "replicate: cut|rerun"),
    # figures
    ("figure selects nothing", put("figures", "fig1", "a", value={"N": 999}), "figures.fig1.a", ALLOWED),
    ("unknown figure target", put("figures", "fig9", value={"a": {"N": 4}}), "figures.fig9", ALLOWED),
    ("unknown setting in a filter", put("figures", "fig1", "a", value={"temperature": 0.8}), "figures.fig1.a", ALLOWED),  # noqa: E501
    ("bad Tb in a filter", put("figures", "fig1", "a", value={"Tb": "hot"}), "figures.fig1.a.Tb", ALLOWED),
    ("text lr in a filter", put("figures", "fig1", "a", value={"lr": "1e-3"}), "figures.fig1.a.lr", ALLOWED),
    ("TIS in a filter", put("figures", "fig1", "a", value={"correction": "TIS"}), "figures.fig1.a.correction", "mean"),
    ("quoted N in a filter", put("figures", "fig1", "a", value={"N": "4"}), "figures.fig1.a.N", "without quotes"),
    ("empty filter list", put("figures", "fig1", "a", value=[]), "figures.fig1.a", "non-empty"),
    ("figure as a list", put("figures", "fig1", value=[{"N": 4}]), "figures.fig1", ALLOWED),
    # options that contradict each other
    (
        "linear start == end",
        put("runs", 1, "Tb", value={"schedule": "linear", "start": 0.8, "end": 0.8}),
        "runs[1].Tb",
        ALLOWED,
    ),  # noqa: E501
    (
        "linear without end",
        put("runs", 1, "Tb", value={"schedule": "linear", "start": 0.8}),
        "runs[1].Tb.end",
        "required",
    ),  # noqa: E501
    ("Tl tied with a controller", put("runs", 1, "Tl", value="tied"), "runs[1].Tl", ALLOWED),
    (
        "kl_gate on kl_cooling",
        put("runs", 1, "Tb", value={"controller": "kl_cooling", "start": 0.8, "kl_gate": True}),
        "runs[1].Tb.kl_gate",
        ALLOWED,
    ),  # noqa: E501
    (
        "scope on kl_cooling",
        put("runs", 1, "Tb", value={"controller": "kl_cooling", "start": 0.8, "scope": "global"}),
        "runs[1].Tb.scope",
        ALLOWED,
    ),  # noqa: E501
    (
        "unknown saturation rule",
        put("runs", 1, "Tb", value={"controller": "saturation", "start": 0.8, "saturated": "all_wrong"}),
        "runs[1].Tb.saturated",
        ALLOWED,
    ),  # noqa: E501
    ("cut without a step count", put("runs", 1, "replicate", value="cut"), "runs[1].steps", ALLOWED),
    (
        "val_every > steps",
        both(put("runs", 1, "steps", value=20), put("runs", 1, "val_every", value=40)),
        "runs[1].val_every",
        ALLOWED,
    ),  # noqa: E501
    ("toy model with gsm8k", put("runs", 1, "task", value="gsm8k"), "runs[1]", ALLOWED),
    ("1.5B model with the toy task", put("runs", 1, "model", value="qwen2.5-math-1.5b"), "runs[1]", ALLOWED),
    ("stall limit above the timeout", put("stall_min", value=60), "stall_min", ALLOWED),
    # wrong types and bounds elsewhere
    (
        "list where a scalar is required",
        put("recipe", "prompts_per_step", value=[8]),
        "recipe.prompts_per_step",
        ALLOWED,
    ),  # noqa: E501
    ("replicate as a list", put("runs", 1, "replicate", value=["cut"]), "runs[1].replicate", ALLOWED),
    ("timeout as a list", put("timeout_min", value=[30]), "timeout_min", ALLOWED),
    ("timeout zero", put("timeout_min", value=0), "timeout_min", ALLOWED),
    ("one sample per prompt", put("recipe", "samples_per_prompt", value=1), "recipe.samples_per_prompt", ALLOWED),  # noqa: E501
    ("steps zero", put("runs", 1, "steps", value=0), "runs[1].steps", ALLOWED),
    ("negative seed", put("runs", 1, "seed", value=-1), "runs[1].seed", ALLOWED),
    ("run entry not a mapping", put("runs", value=["N64"]), "runs[0]", ALLOWED),
    ("runs as a mapping", put("runs", value={"a": 1}), "runs", ALLOWED),
    # unknown keys at every level
    ("unknown top-level key", put("learning_rate", value=1e-3), "learning_rate", ALLOWED),
    ("unknown recipe key", put("recipe", "batch_size", value=8), "recipe.batch_size", ALLOWED),
    ("unknown run-entry key", put("runs", 1, "temperature", value=0.8), "runs[1].temperature", ALLOWED),
    ("unknown defaults key", put("defaults", "sampler_T", value=0.8), "defaults.sampler_T", ALLOWED),
    (
        "unknown Tb mapping key",
        put("runs", 1, "Tb", value={"controller": "saturation", "gain": 2}),
        "runs[1].Tb.gain",
        ALLOWED,
    ),  # noqa: E501
    # empty and missing
    ("empty run list", put("runs", value=[]), "runs", "non-empty"),
    ("empty list value", put("runs", 0, "seed", value=[]), "runs[0].seed", "non-empty"),
    ("no name", drop("name"), "name", "required"),
    ("no seed anywhere", drop("runs", 1, "seed"), "runs[1]", "set it"),
]
# Tl tied is only contradictory with a controller Tb: give that case one.
CASES = [
    (
        (cid, both(put("runs", 1, "Tb", value={"controller": "saturation", "start": 0.8}), edit), field, word)
        if cid == "Tl tied with a controller"
        else (cid, edit, field, word)
    )
    for cid, edit, field, word in CASES
]


def test_the_smoke_study_itself_is_valid():
    assert len(study_from_dict(copy.deepcopy(SMOKE), origin="smoke").runs) == 9


def test_there_are_enough_cases():
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("edit", "field", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_study_is_refused_in_one_line(edit: Edit, field: str, word: str):
    with pytest.raises(StudyError) as ei:
        study_from_dict(bad_study(edit), origin="smoke")
    msg = str(ei.value)
    assert "\n" not in msg, msg
    assert msg.startswith("smoke: "), msg
    assert field in msg, f"field {field!r} not named in: {msg}"
    assert word.lower() in msg.lower(), f"{word!r} not in: {msg}"


def test_bad_model_in_a_run_is_named_where_written():
    """A name that comes from ``defaults`` is reported at ``defaults``, not at every run it reaches."""
    with pytest.raises(StudyError, match=r"^smoke: defaults\.model: 'gpt-5' is not valid; allowed: "):
        study_from_dict(bad_study(put("defaults", "model", value="gpt-5")), origin="smoke")


# --------------------------------------------------------------------------------------------------
# Snakemake stops before any job


SNAKEMAKE_CASES = ["N zero", "unknown correction", "figure selects nothing", "Tl tied with a controller"]


def _snakemake_dry_run(study: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump(study, sort_keys=False))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={cfg}", *results_config(tmp_path / "r")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize("case", SNAKEMAKE_CASES)
def test_snakemake_refuses_a_bad_study_before_any_job(case: str, tmp_path: Path):
    _cid, edit, field, word = next(c for c in CASES if c[0] == case)
    with pytest.raises(StudyError) as ei:
        study_from_dict(bad_study(edit), origin="smoke")
    res = _snakemake_dry_run(bad_study(edit), tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert str(ei.value) in out, out  # the same one line, whole
    line = next(ln for ln in out.splitlines() if str(ei.value) in ln)
    assert field in line and word.lower() in line.lower()
    assert "Job stats" not in out and not re.search(r"^rule \w+:", out, re.M), out


def test_snakemake_refuses_an_empty_run_list(tmp_path: Path):
    res = _snakemake_dry_run(bad_study(put("runs", value=[])), tmp_path)
    assert res.returncode != 0
    assert "runs: 'list' is not valid; allowed: a non-empty list" in res.stdout + res.stderr


# --------------------------------------------------------------------------------------------------
# Run keys: no shell, no path tricks

GOOD_KEY = "toy-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1"
BAD_KEYS = [
    GOOD_KEY + ";rm -rf ~",
    GOOD_KEY + "$(id)",
    GOOD_KEY + "${HOME}",
    GOOD_KEY + "`id`",
    GOOD_KEY + "|cat",
    GOOD_KEY + "&&ls",
    GOOD_KEY + "&",
    GOOD_KEY + " x",
    GOOD_KEY + "\tx",
    GOOD_KEY + "'",
    GOOD_KEY + '"',
    GOOD_KEY + "\nrm -rf ~",
    GOOD_KEY + "\n",
    GOOD_KEY + "\x00",
    GOOD_KEY + ">x",
    GOOD_KEY + "<x",
    GOOD_KEY + "*",
    GOOD_KEY + "_cut;x",
    "toy-qwen2/../N4_lr1e-3_tis_Tb1_Tl1_s1",
    "toy-qwen2/arith/../../etc/passwd",
    GOOD_KEY + "/../../x",
    "toy-qwen2//arith/N4_lr1e-3_tis_Tb1_Tl1_s1",
    "~/arith/N4_lr1e-3_tis_Tb1_Tl1_s1",
    "TOY-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1",
    "toy-qwen2/arith/N4_lr1e-3_tis_Tb1_Tl1_s1 ",
]
# Gaps found by this test and closed: '..' as a model, slashes around the key.
REGEX_GAPS = {"../arith/N4_lr1e-3_tis_Tb1_Tl1_s1": "the model part must not admit '..'"}
PARSE_GAPS = {
    "/" + GOOD_KEY: "a leading slash",
    GOOD_KEY + "/": "a trailing slash",
}


def test_the_good_key_passes_both_guards():
    assert re.fullmatch(KEY_WILDCARD_RE, GOOD_KEY)
    assert parse_key(GOOD_KEY).key == GOOD_KEY


@pytest.mark.parametrize("key", BAD_KEYS + list(PARSE_GAPS))
def test_wildcard_constraint_rejects(key: str):
    assert re.fullmatch(KEY_WILDCARD_RE, key) is None


@pytest.mark.parametrize("key", BAD_KEYS + list(REGEX_GAPS))
def test_parse_key_rejects(key: str):
    with pytest.raises(ValueError):
        parse_key(key)


@pytest.mark.parametrize(
    "key",
    list(REGEX_GAPS),
)
def test_wildcard_constraint_rejects_dot_dot_model(key: str):
    assert re.fullmatch(KEY_WILDCARD_RE, key) is None


@pytest.mark.parametrize(
    "key",
    list(PARSE_GAPS),
)
def test_parse_key_rejects_slashes_around_the_key(key: str):
    with pytest.raises(ValueError):
        parse_key(key)


@pytest.mark.parametrize(("kind", "value"), [("model", "gpt-5"), ("task", "gsm9k")])
def test_an_unknown_model_or_task_names_the_extension_point(kind: str, value: str) -> None:
    """The error says what is allowed and where a study defines its own, with an example that loads."""
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["defaults"][kind] = value
    with pytest.raises(StudyError) as err:
        study_from_dict(raw, origin="smoke")
    msg = str(err.value)
    assert f"in the study's {kind}s: block, e.g. {kind}s: {{" in msg and "\n" not in msg
    example = yaml.safe_load(msg.split(", e.g. ", 1)[1])  # the example is YAML a study can hold
    assert set(example) == {f"{kind}s"}

"""The Snakemake DAG: dry runs of the studies, and one real end-to-end run through the real stack."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from tests.dry_run import results_config, temp_results

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
FIG1_KEYS = {
    f"qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_{tb}_{tl}_s{s}"
    for tb, tl, s in [
        ("Tb1", "Tl1", 1),
        ("Tb1", "Tl1", 43),
        ("Tb1", "Tl1", 44),
        ("Tb0.8", "Tl1", 1),
        ("Tb0.8", "Tl1", 43),
        ("Tb0.8", "Tl1", 44),
        ("Tb0.8", "Tltied", 1),
        ("Tb0.9", "Tl1", 1),
    ]
}


def snakemake(
    *args: str,
    cwd: Path = REPO,
    results: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 120,
) -> subprocess.CompletedProcess:
    """``snakemake ARGS``; a dry run in the checkout must put the study's results at ``results`` (a
    temporary folder: tests/dry_run.py says why)."""
    if "-n" in args and cwd == REPO and results is None:
        raise AssertionError("a dry run in the checkout reads its results/: give results=<a temporary folder>")
    more = results_config(results) if results is not None else []
    return subprocess.run(
        [*SNAKEMAKE, *args, *more], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def jobs(out: str, rule: str, field: str = "output") -> list[str]:
    """The ``field`` line (output, input) of each job of ``rule`` in a ``snakemake -n`` listing."""
    found = []
    for block in re.split(r"\n(?=(?:localrule|rule) )", out):
        if re.match(rf"(?:localrule|rule) {rule}:", block):
            m = re.search(rf"{field}: ([^\n]+)", block)
            found.append(m.group(1) if m else "")
    return found


def trained_keys(out: str) -> set[str]:
    """Run keys of the training jobs in a ``snakemake -n`` listing."""
    return {re.search(r"results/runs/(.+?)/train\.jsonl", t).group(1) for t in jobs(out, "train")}


def test_dry_run_paper_fig1_lists_exactly_its_8_training_runs(tmp_path):
    R = temp_results(tmp_path)
    res = snakemake("-n", "--configfile=config/paper.yaml", f"{R}/fig1.pdf", results=R)
    assert res.returncode == 0, res.stderr
    assert trained_keys(res.stdout) == FIG1_KEYS
    assert len(jobs(res.stdout, "parse")) == 8
    # every training job takes the patched verl wheel as an input (built or not: the DAG says so)
    wheel = re.compile(r"results/build/verl-0\.9\.1\+coolsampler\.[0-9a-f]+-py3-none-any\.whl")
    inputs = jobs(res.stdout, "train", field="input")
    assert len(inputs) == 8 and all(wheel.search(i) for i in inputs), inputs


def test_dry_run_fig2_averages_no_doubled_lr_run_and_no_cut_run(tmp_path):
    """Fig 2's cooled GSM8K N=96 mean holds the 2e-6 seeds only; the cut 7B run is not a seed."""
    R = temp_results(tmp_path)
    res = snakemake("-n", "--configfile=config/paper.yaml", f"{R}/fig2.pdf", results=R)
    assert res.returncode == 0, res.stderr
    keys = trained_keys(res.stdout)
    assert len(keys) == 26
    assert "qwen2.5-math-1.5b/gsm8k/N96_lr4e-6_tis_Tb0.8_Tl1_s1" not in keys
    assert not [k for k in keys if k.endswith("_cut")]
    assert {k for k in keys if "lr4e-6" in k} == {
        f"qwen2.5-math-1.5b/math/N288_lr4e-6_tis_Tb{tb}_Tl1_s{s}" for tb in ("1", "0.8") for s in (1, 43)
    }


def test_dry_run_table2_depends_on_every_run_of_the_study(tmp_path):
    """Which runs degrade is read from the data, so Table 2 waits for every run."""
    from coolsampler.spec.study import load_study

    R = temp_results(tmp_path)
    res = snakemake("-n", "--configfile=config/paper.yaml", f"{R}/table2.csv", results=R)
    assert res.returncode == 0, res.stderr
    every = {r.key for r in load_study(REPO / "config/paper.yaml").runs}
    assert trained_keys(res.stdout) == every
    assert len(jobs(res.stdout, "parse")) == len(every)
    # the table job's parameters print short (its panel spec follows from its inputs), not every run's
    # settings again (Snakemake's report shows them; dry-run reasons once repeated them)
    assert "'settings':" not in res.stdout
    from coolsampler.spec.targets import PanelSpec

    spec = PanelSpec({"a": [{"settings": {"N": 32}}] * 4, "b": [{}] * 2})
    assert repr(spec) == str(spec) == "panels a: 4 runs, b: 2 runs" and dict(spec)["a"][0]["settings"]["N"] == 32


@pytest.mark.parametrize("target", [f"fig{i}" for i in range(1, 9)] + [f"table{i}" for i in range(1, 5)])
def test_dry_run_every_paper_target(target, tmp_path):
    suffix = ".pdf" if target.startswith("fig") else ".csv"
    R = temp_results(tmp_path)
    res = snakemake("-n", "--configfile=config/paper.yaml", f"{R}/{target}{suffix}", results=R)
    assert res.returncode == 0, res.stderr[-2000:]
    assert jobs(res.stdout, "train"), target


def test_the_paper_lead_table_reads_the_runs_that_exist_and_never_trains(tmp_path):
    """On the gpu platform rule diagnostic_leads reads the metrics tables that exist (none here), as rule
    claims does: building the lead table never starts a GPU run."""
    R = temp_results(tmp_path)
    res = snakemake("-n", "--configfile=config/paper.yaml", f"{R}/diagnostic_leads.html", results=R)
    assert res.returncode == 0, res.stderr[-2000:]
    assert jobs(res.stdout, "diagnostic_leads") and not jobs(res.stdout, "train") and not jobs(res.stdout, "parse")


def test_bad_study_stops_before_any_job(tmp_path):
    study = yaml.safe_load((REPO / "config/config.yaml").read_text())
    study["runs"][0]["Tb"] = [1.0, 0]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(study))
    res = snakemake("-n", f"--configfile={tmp_path / 'bad.yaml'}", results=temp_results(tmp_path))
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "runs[0].Tb[1]: 0 is not valid; allowed: number > 0 and <= 2" in out


def test_lint_and_format():
    """Lint clean but for the conda/container recommendation (reason: Snakefile header)."""
    res = snakemake("--lint")
    lints = [line.strip() for line in (res.stdout + res.stderr).splitlines() if line.startswith("    * ")]
    assert lints and all(x.startswith("* Specify a conda environment or container") for x in lints), lints
    fmt = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow/rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert fmt.returncode == 0, fmt.stderr
    for ruff_args in (["check", "."], ["format", "--check", "."]):
        ruff = subprocess.run(
            [sys.executable, "-m", "ruff", *ruff_args], cwd=REPO, capture_output=True, text=True, check=False
        )
        assert ruff.returncode == 0, (ruff_args, ruff.stdout)


def test_the_cliff_studies_plan_their_runs_and_rounds_1_2_share_one_world(tmp_path):
    """config/cliff-round2.yaml and config/cliff-calibration.yaml name the same world knob for knob: one
    world (data and warm-started model) serves both, and each plans exactly its own runs, its claims and
    Figure 1. Rounds 3 and 4 (config/cliff-round3.yaml, config/cliff.yaml) plan their world screen first, a
    probe of every candidate and of the reference world: their runs train only in the world the screen
    chooses. Round 4's stage L (config/cliff-long.yaml), round 5 and round 6 (config/cliff-round5.yaml,
    config/cliff-round6.yaml, no screen of their own) plan their runs in round 4's world, round 5 with a drift
    probe of each never-refreshed run, round 6 with none (its probe reads a collapse's onset after the fact)."""
    from coolsampler.spec.study import load_study
    from coolsampler.spec.world import study_screen
    from tests.stack import copy_repo

    work = copy_repo(tmp_path / "repo")
    idents = set()
    rounds = ("cliff", "cliff-round3", "cliff-long", "cliff-round5", "cliff-round6", "cliff-round2")
    for name in (*rounds, "cliff-calibration"):
        study = load_study(REPO / "config" / f"{name}.yaml")
        res = snakemake("-n", f"--configfile=config/{name}.yaml", "--cores", "2", cwd=work)
        assert res.returncode == 0, res.stderr[-2000:]
        planned = {re.search(r"results/[^/]+/runs/(.+?)/train\.jsonl", t).group(1) for t in jobs(res.stdout, "train")}
        screen = study_screen(study.raw, name)
        if screen is None:
            assert planned == {r.key for r in study.runs}, name
            assert f"results/{name}/claims.md" in res.stdout, name
            assert any(f"results/{name}/fig1.pdf" in o for o in jobs(res.stdout, "figure")), name
            assert len(jobs(res.stdout, "world_model")) == 1, name
            if name not in ("cliff-long", "cliff-round5", "cliff-round6"):  # rounds 1-2's world; these: round 4's
                idents |= {r.model for r in study.runs}
            if name == "cliff-round5":  # B2 reads the probe of each never-refreshed run
                assert len(jobs(res.stdout, "drift_probe")) == sum(r.N == 96 for r in study.runs) == 3
            if name == "cliff-round6":
                assert not jobs(res.stdout, "drift_probe") and len(planned) == 10
        else:  # the screen first: what trains is decided once it has run (a checkpoint)
            assert not planned and "checkpoint" in res.stdout
            assert len(jobs(res.stdout, "world_probe")) == len(screen.probed) == 5
            assert len(jobs(res.stdout, "world_model")) == 5 and "checkpoint world_screen:" in res.stdout
    assert len(idents) == 1


RULE_FILES = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]


def code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal in a rule file's code, f-strings whole: its comments and the
    Snakefile's header (which documents the scheme for people) are not code."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    strings = [t for t in tokens if t.type == tokenize.STRING or tokenize.tok_name[t.type] == "FSTRING_MIDDLE"]
    first = next(t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE))
    return [(t.start[0], t.string) for t in strings if t is not first]


def spelled_run_paths(path: Path) -> list[str]:
    """The strings of a rule file that spell a path through a run directory (…/runs/…) themselves."""
    from coolsampler.spec.layout import RUNS

    spelled = re.compile(rf"(?<![\w.-]){RUNS}/|/{RUNS}(?![\w.-])")
    return [f"{path.name}:{line}: {text}" for line, text in code_strings(path) if spelled.search(text)]


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_no_rule_spells_a_run_path(rule_file):
    """A rule takes its run paths from coolsampler.spec.layout (run_pattern, Layout): spelled in a rule,
    the scheme could drift from the one the scripts, the analysis and the CLI read."""
    assert not spelled_run_paths(rule_file)


def test_the_run_path_check_sees_a_spelled_path(tmp_path):
    """The check above reads strings and f-strings of rule code, and not its comments or the header."""
    rule = tmp_path / "x.smk"
    rule.write_text(
        '"""Header: R/runs/<key>/x."""\n# {root}/runs/{key}/x in a comment\n'
        'rule x:\n    output:\n        "{root}/runs/{key}/x",\n    log:\n        f"{R}/runs/{{key}}/x.log",\n'
        "    params:\n        runs=STUDY.runs,\n"
    )
    assert [s.split(": ", 1)[0] for s in spelled_run_paths(rule)] == ["x.smk:5", "x.smk:7"]


def test_every_file_a_rule_puts_in_a_run_directory_is_in_the_snakefile_header(tmp_path):
    """The header's list of a run directory's files is complete: every output, log and benchmark the
    smoke study's jobs (and rule supersede's marker) put in a run directory is named in it. Its results
    are a temporary folder: in the checkout, once the smoke study has trained, nothing is left to list."""
    from coolsampler.spec.layout import KEY_PARTS, Layout
    from coolsampler.spec.study import load_study
    from coolsampler.train.rerun import KEY_RE, key_markers

    R = temp_results(tmp_path, "results/smoke")
    study = load_study(REPO / "config" / "config.yaml", results=R)
    layout = Layout(str(study.results))
    marker = key_markers(layout.run_dir(study.runs[0].key), "0" * 12)["set_aside"]
    res = snakemake("-n", "all", marker, results=R)
    assert res.returncode == 0, res.stderr[-2000:]
    paths = [
        p for line in re.findall(r"^\s+(?:output|log|benchmark): (.+)$", res.stdout, re.M) for p in line.split(", ")
    ]
    names = {
        re.sub(KEY_RE, "<k>", "/".join(Path(p).relative_to(layout.runs).parts[KEY_PARTS:]))
        for p in paths
        if p.startswith(f"{layout.runs}/")
    }
    assert {"train.jsonl", "parse.log", "curves.png", "set-aside-<k>.json"} <= names
    header = (REPO / "Snakefile").read_text().split('"""')[1]
    missing = sorted(n for n in names if not re.search(rf"(?<![\w.<>-]){re.escape(n)}(?![\w.-])", header))
    assert not missing, f"the Snakefile header does not list {missing} in a run directory"


def test_a_results_path_with_a_tilde_is_the_home_folder_for_the_rules_too(tmp_path):
    """``results: ~/r`` is one folder for every command: the rules plan the runs in the home folder's r
    (once in a literal ``./~/r`` of the checkout), where ``coolsampler status`` looks for them."""
    from coolsampler.spec.study import load_study

    home = tmp_path / "home"
    home.mkdir()
    res = snakemake("-n", "--configfile=config/config.yaml", results="~/r", env={**os.environ, "HOME": str(home)})
    assert res.returncode == 0, res.stderr[-2000:]
    trained = jobs(res.stdout, "train")
    smoke = load_study(REPO / "config" / "config.yaml")
    assert trained and all(t.startswith(f"{home}/r/runs/") for t in trained), trained[:2]
    assert len(trained) == len(smoke.runs) and not (REPO / "~").exists()


# Tests that dry-run in the checkout without their own results folder, each with the reason it may.
DRY_RUN_IN_CHECKOUT_ALLOWED = {
    # the documented commands as written (their targets name results/...); it accepts "Nothing to be done"
    "tests/test_docs.py": "test_documented_snakemake_targets_dry_run",
}


def checkout_dry_runs(path: Path, root: Path = REPO) -> list[str]:
    """``file:line`` of each call in a test file that runs ``snakemake -n`` (or ``--dry-run``) with
    ``cwd=REPO`` and no ``results=`` config among its words."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        cwd = next((k.value for k in node.keywords if k.arg == "cwd"), None)
        if not (isinstance(cwd, ast.Name) and cwd.id == "REPO"):
            continue
        words = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        texts = words + [
            "".join(p.value for p in n.values if isinstance(p, ast.Constant))
            for n in ast.walk(node)
            if isinstance(n, ast.JoinedStr)
        ]
        if "snakemake" in words and {"-n", "--dry-run", "--dryrun"} & set(words):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if not any(t.startswith("results=") for t in texts) and "results_config" not in names:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_test_dry_runs_a_study_in_the_checkouts_results():
    """The README's order (set up, ``snakemake --cores 2``, then the tests) leaves the smoke study
    trained in results/smoke; a test that dry-runs a study there then finds nothing to plan. Every test
    that dry-runs in the checkout gives its study a temporary results folder (tests/dry_run.py), and
    this helper's own dry runs refuse to run without one."""
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        hits = checkout_dry_runs(path)
        if rel in DRY_RUN_IN_CHECKOUT_ALLOWED and len(hits) <= 1:
            continue
        found += hits
    assert not found, f"dry runs in the checkout's own results/: {found}"
    with pytest.raises(AssertionError, match="results="):
        snakemake("-n", "all")


def test_the_checkout_dry_run_check_sees_one(tmp_path):
    """The check above finds a dry run in the checkout without a results folder, and passes one with it."""
    (tmp_path / "tests").mkdir()
    bad = tmp_path / "tests" / "t.py"
    bad.write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'snakemake', '-n', 'all'], cwd=REPO)\n"
        "subprocess.run([sys.executable, '-m', 'snakemake', '-n', 'all', '--config', f'results={R}'], cwd=REPO)\n"
        "subprocess.run([sys.executable, '-m', 'snakemake', '-n', *results_config(R)], cwd=REPO)\n"
        "subprocess.run([sys.executable, '-m', 'snakemake', '-n'], cwd=work)\n"
    )
    assert checkout_dry_runs(bad, tmp_path) == ["tests/t.py:2"]

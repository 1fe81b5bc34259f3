"""Snakemake profiles, run records and a few flags as a researcher edits them, against ``plan`` and ``memory``.

A profile is a file one edits for one's cluster (its lines marked EDIT): a value of the wrong type, a
``mem_mb`` of 0, a ``runtime`` written the way Snakemake allows (``12h``), ``set-resources`` as a list, or
a study handed over in its place. Each is either read as Snakemake reads it or refused in one line,
``coolsampler <cmd>: <file>:<key>: <problem>``, exit 2, no traceback, before anything is printed. ``plan``
reads the shipped profiles (``--profile slurm``): here they are copies in a temporary folder. A finished
run whose ``run.yaml`` is no mapping is named in its own line, and the other runs are still planned.

The ``test_regression_*`` tests each pin one problem the code before the profile reader got wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import coolsampler.cli.plan as plan_cli
from coolsampler.cli.plan import make_plan
from coolsampler.spec.shipped import CONFIG, PROFILES
from coolsampler.spec.study import load_study
from coolsampler.train.platform import get_platform
from coolsampler.train.profile import load_profile, runtime_minutes
from tests.cli.test_fuzz_files import KEYS, MINI, _finished, assert_flag_refused, assert_one_line, cli, write

SLURM = PROFILES / "slurm" / "config.v8+.yaml"


def slurm_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: str | None = None, top: str = "") -> Path:
    """A copy of the shipped profiles that ``plan --profile slurm`` reads, its ``set-resources: train:``
    replaced by ``train`` (YAML under that key), or the whole file by ``top`` where given."""
    folder = tmp_path / "profiles"
    for name in ("slurm", "gpu-box"):
        (folder / name).mkdir(parents=True)
        (folder / name / "config.v8+.yaml").write_text((PROFILES / name / "config.v8+.yaml").read_text())
    path = folder / "slurm" / "config.v8+.yaml"
    if top:
        path.write_text(top)
    elif train is not None:
        text = SLURM.read_text()
        head = text[: text.index("set-resources:")]
        tail = text[text.index("\n# Training runs inside") :]
        path.write_text(f"{head}set-resources:\n  train:\n{train}{tail}")
    monkeypatch.setattr(plan_cli, "PROFILE_DIR", folder)
    return path


def snakemake_minutes(value: object) -> int | None:
    """The minutes Snakemake's own parser makes of a ``runtime`` value (None where it is not installed)."""
    try:
        from snakemake.resources import Resource
    except ImportError:
        return None
    got = Resource.parse_human_friendly("runtime", value)  # type: ignore[arg-type]
    return round(got) if isinstance(got, (int, float)) else None


# ------------------------------------------------------------------------------------------ regressions


def test_regression_plan_costs_a_cpu_study_on_slurm_as_cpu_runs(tmp_path: Path, capsys) -> None:
    """``plan --study config/config.yaml --profile slurm``: before, '9 run(s) to train on 4 GPU(s) each'
    (the gpu platform), though rule train submits the smoke study's runs as cpu runs (docs/platforms.md:
    one CPU, no GPU); the paper study on the same profile is still costed as 4-GPU runs."""
    study = CONFIG / "config.yaml"
    plan = make_plan(load_study(study), profile="slurm", results=tmp_path)
    assert plan.platform == get_platform("cpu") and plan.platform.gpus_per_run == 0
    assert all(g.gpus == 0 for g in plan.groups) and plan.parallel == 16  # the profile's jobs
    r = cli(capsys, "plan", "--study", str(study), "--profile", "slurm", "--results", str(tmp_path))
    assert r.rc == 0 and "Traceback" not in r.err, r.err
    assert r.out.startswith("plan: 9 run(s) to train, ") and "GPU" not in r.out.splitlines()[0], r.out
    assert "(platform cpu, 0 GPU(s) a run)" in r.out
    r = cli(capsys, "plan", "--study", "paper", "--profile", "slurm", "--results", str(tmp_path))
    assert r.rc == 0 and r.out.startswith("plan: 53 run(s) to train on 4 GPU(s) each, 852.0 GPU-hours"), r.out


def test_regression_a_profile_whose_set_resources_is_a_list_is_one_line(tmp_path: Path, capsys) -> None:
    """``set-resources: [train]``: before, an AttributeError traceback."""
    profile = write(tmp_path / "config.v8+.yaml", "set-resources: [train]\n")
    line = assert_one_line(cli(capsys, "memory", "--study", "paper", "--profile", str(profile)), "memory", profile)
    assert f"{profile}:set-resources:" in line and "RULE:RESOURCE=VALUE" in line, line


@pytest.mark.parametrize("mem_mb", ["0", "-5"])
def test_regression_a_mem_mb_of_zero_or_below_is_refused(mem_mb: str, tmp_path: Path, capsys) -> None:
    """``mem_mb: 0`` was read as unset (the host checked against the platform's 238 GiB), ``-5`` accepted."""
    profile = write(tmp_path / "config.v8+.yaml", f"set-resources:\n  train:\n    mem_mb: {mem_mb}\n")
    line = assert_one_line(cli(capsys, "memory", "--study", "paper", "--profile", str(profile)), "memory", profile)
    assert f"{profile}:set-resources.train.mem_mb: {mem_mb};" in line and "> 0" in line, line


def test_regression_a_runtime_of_12h_is_720_minutes(tmp_path: Path, monkeypatch, capsys) -> None:
    """``runtime: 12h``, which Snakemake accepts: before, "invalid literal for int() with base 10: '12h'",
    naming neither file nor key. It is 720 minutes, and the watchdog keeps its margin below it."""
    slurm_profile(tmp_path, monkeypatch, "    nodes: 1\n    runtime: 12h\n")
    plan = make_plan(load_study(CONFIG / "paper.yaml"), profile="slurm", results=tmp_path)
    assert plan.platform.runtime_min == 720 and plan.platform.timeout_min == 720 - 60
    r = cli(capsys, "plan", "--study", "paper", "--profile", "slurm", "--results", str(tmp_path))
    assert r.rc == 0 and "Traceback" not in r.err and "invalid literal" not in r.err, r.err


def test_regression_a_study_given_as_the_profile_is_refused(capsys) -> None:
    """``memory --profile config/paper.yaml``: before, read as a profile (its mem_mb the platform's)."""
    r = cli(capsys, "memory", "--study", "paper", "--profile", "paper")
    line = assert_one_line(r, "memory", (CONFIG / "paper.yaml").resolve())
    assert "this is a study" in line and "not a Snakemake profile" in line, line


def test_regression_plan_names_a_run_yaml_that_is_a_list_and_plans_the_others(tmp_path: Path, capsys) -> None:
    """A finished run whose ``run.yaml`` is a YAML list: before, an AttributeError traceback (analyze
    refused the same file in one line). Now its own line, its row marked, the other run measured."""
    study = write(tmp_path / "mini.yaml", MINI)
    results = tmp_path / "results"
    bad = _finished(results, KEYS[0], 1.5)
    (bad / "run.yaml").write_text("- platform: cpu\n- settings: {N: 4}\n")
    _finished(results, KEYS[1], 1.5)
    r = cli(capsys, "plan", "--study", str(study), "--results", str(results), "--runs")
    line = assert_one_line(r, "plan", bad / "run.yaml", quiet=False)
    assert "a list; expected a mapping" in line, line
    assert "measured (1 run)" in r.out and f"done  {KEYS[1]}  " in r.out, r.out
    assert f"done  {KEYS[0]}  " in r.out and "its files refused" in r.out, r.out


def test_regression_memory_measure_of_a_session_no_process_can_have(capsys) -> None:
    """``memory --measure 999999``: before, an empty table written, exit 0."""
    r = cli(capsys, "memory", "--measure", "999999")
    line = assert_one_line(r, "memory")
    assert "--measure 999999: " in line and "kinds" not in r.out, line


def test_regression_guard_threshold_window_below_one(tmp_path: Path, capsys) -> None:
    """``guard-threshold --window -2``: before, thresholds labelled 'window -2'."""
    r = cli(capsys, "guard-threshold", str(tmp_path), "--window", "-2")
    assert "whole number > 0" in assert_flag_refused(r, "guard-threshold", "--window")


# ------------------------------------------------------------------------------------------ fuzz: profiles

# (YAML of a whole profile, the key the refusal names, words it says)
PROFILE_CASES: dict[str, tuple[str, str, str]] = {
    "jobs-word": ("jobs: many\n", "jobs", "whole number > 0 or unlimited"),
    "jobs-zero": ("jobs: 0\n", "jobs", "whole number > 0"),
    "jobs-negative": ("jobs: -3\n", "jobs", "whole number > 0"),
    "jobs-bool": ("jobs: true\n", "jobs", "whole number > 0"),
    "jobs-fraction": ("jobs: 2.5\n", "jobs", "whole number > 0"),
    "jobs-list": ("jobs: [16]\n", "jobs", "whole number > 0"),
    "resources-gpu-word": ("resources: [gpu=four]\n", "resources", "whole number > 0"),
    "resources-gpu-zero": ("resources: {gpu: 0}\n", "resources", "whole number > 0"),
    "resources-no-value": ("resources: [gpu]\n", "resources", "NAME=VALUE"),
    "resources-number": ("resources: 4\n", "resources", "expected a mapping"),
    "set-resources-list": ("set-resources: [train]\n", "set-resources", "RULE:RESOURCE=VALUE"),
    "set-resources-list-no-value": ("set-resources: ['train:mem_mb']\n", "set-resources", "RULE:RESOURCE=VALUE"),
    "set-resources-list-no-rule": ("set-resources: ['mem_mb=8000']\n", "set-resources", "RULE:RESOURCE=VALUE"),
    "set-resources-list-of-maps": ("set-resources: [{train: {mem_mb: 1}}]\n", "set-resources", "RULE:RESOURCE"),
    "set-resources-word": ("set-resources: train\n", "set-resources", "RULE:RESOURCE=VALUE"),
    "set-resources-number": ("set-resources: 5\n", "set-resources", "write set-resources: {train:"),
    "train-list": ("set-resources:\n  train: [mem_mb]\n", "set-resources.train", "a mapping"),
    "train-number": ("set-resources:\n  train: 5\n", "set-resources.train", "a mapping"),
    "train-null": ("set-resources:\n  train:\n", "set-resources.train", "null"),
    "top-list": ("- jobs: 16\n", "1", "mapping of keys"),
}


@pytest.mark.parametrize("case", sorted(PROFILE_CASES))
def test_fuzz_profile_key(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """A profile key of the wrong type or value: one line naming the file and the key, from ``memory
    --profile FILE`` and from ``plan --profile slurm`` on that file, before anything is printed."""
    content, key, words = PROFILE_CASES[case]
    profile = write(tmp_path / "mine" / "config.v8+.yaml", content)
    line = assert_one_line(cli(capsys, "memory", "--study", "paper", "--profile", str(profile)), "memory", profile)
    assert f"{profile}:{key}: " in line and words in line, line
    shipped = slurm_profile(tmp_path, monkeypatch, top=content)
    line = assert_one_line(cli(capsys, "plan", "--study", "paper", "--profile", "slurm"), "plan", shipped)
    assert f"{shipped}:{key}: " in line and words in line, line


# runtime values Snakemake reads, and the minutes they are
GOOD_RUNTIMES: dict[str, tuple[object, int]] = {
    "12h": ("12h", 720),
    "30m": ("30m", 30),
    "1d": ("1d", 1440),
    "90-min": ("90 min", 90),
    "2-hours": ("2 hours", 120),
    "1.5h": ("1.5h", 90),
    "1w": ("1w", 7 * 1440),
    "upper-H": ("12H", 720),
    "3600s": ("3600s", 60),
    "text-720": ("720", 720),
    "int-720": (720, 720),
    "float-720.4": (720.4, 720),
}


@pytest.mark.parametrize("case", sorted(GOOD_RUNTIMES))
def test_fuzz_runtime_read_as_snakemake_reads_it(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """A ``runtime`` Snakemake accepts is the same minutes here (checked against Snakemake's own parser
    where it is installed), and plan runs on it."""
    value, minutes = GOOD_RUNTIMES[case]
    assert runtime_minutes(value) == minutes
    if (theirs := snakemake_minutes(value)) is not None:
        assert theirs == minutes, (value, theirs)
    slurm_profile(tmp_path, monkeypatch, f"    runtime: {yaml.safe_dump(value).split(chr(10))[0]}\n")
    assert plan_cli.profile_runtime("slurm") == minutes
    r = cli(capsys, "plan", "--study", str(write(tmp_path / "mini.yaml", MINI)), "--profile", "slurm")
    assert r.rc == 0 and "Traceback" not in r.err, r.err


# runtime values no training job's limit can be (YAML as written after `runtime:`), and words of the refusal
BAD_RUNTIMES: dict[str, tuple[str, str]] = {
    "two-units": ("12h30m", "not a duration"),
    "word": ("ten", "not a duration"),
    "negative-text": ("'-5h'", "not a duration"),
    "unknown-unit": ("12 parsecs", "not a duration"),
    "bare-fraction": ("'12.5'", "read as seconds"),
    "seconds-under-a-minute": ("30s", "under a minute"),
    "zero-hours": ("0h", "under a minute"),
    "zero": ("0", "> 0"),
    "negative": ("-60", "> 0"),
    "empty-text": ("''", "not a duration"),
    "unit-alone": ("h", "not a duration"),
    "bool": ("true", "not a duration"),
    "list": ("[720]", "not a duration"),
    "mapping": ("{h: 12}", "not a duration"),
    "nan": (".nan", "not a duration"),
    "inf": (".inf", "not a duration"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUNTIMES))
def test_fuzz_bad_runtime(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """A ``runtime`` that is no time limit: one line naming the file and set-resources.train.runtime."""
    value, words = BAD_RUNTIMES[case]
    shipped = slurm_profile(tmp_path, monkeypatch, f"    runtime: {value}\n")
    line = assert_one_line(cli(capsys, "plan", "--study", "paper", "--profile", "slurm"), "plan", shipped)
    assert f"{shipped}:set-resources.train.runtime: " in line and words in line, line
    assert "invalid literal" not in line


# mem_mb values: (YAML after `mem_mb:`, the MB read, or None where refused)
MEM_CASES: dict[str, tuple[str, int | None]] = {
    "paper": ("192000", 192000),
    "fraction-rounded": ("8000.6", 8001),
    "null-is-unset": ("null", None),
    "zero": ("0", None),
    "negative": ("-5", None),
    "text-number": ("'8000'", None),  # Snakemake refuses text for a suffixed size resource
    "text-size": ("8G", None),
    "bool": ("true", None),
    "nan": (".nan", None),
    "inf": (".inf", None),
    "list": ("[8000]", None),
}


@pytest.mark.parametrize("case", sorted(MEM_CASES))
def test_fuzz_mem_mb(case: str, tmp_path: Path, capsys) -> None:
    """``set-resources: train: mem_mb:`` read as a job's MB, or refused naming the file and the key; an
    unset one (null) is the platform's. The memory fit is checked against what is read."""
    value, mb = MEM_CASES[case]
    profile = write(tmp_path / "slurm" / "config.v8+.yaml", f"set-resources:\n  train:\n    mem_mb: {value}\n")
    r = cli(capsys, "memory", "--study", "paper", "--profile", str(profile))
    if mb is None and case != "null-is-unset":
        line = assert_one_line(r, "memory", profile)
        assert f"{profile}:set-resources.train.mem_mb: " in line and "MB > 0" in line, line
        return
    assert "Traceback" not in r.err and r.rc in (0, 1), r.err
    read = load_profile(profile).mem_mb
    assert read == mb
    gib = (mb or get_platform("gpu").mem_mb) * 10**6 / 1024**3
    assert f"| SLURM mem_mb (slurm profile) | {gib:.1f} |" in r.out, r.out


# set-resources written as Snakemake's command-line list: the same as the mapping
def test_fuzz_set_resources_list_form_is_the_mapping(tmp_path: Path) -> None:
    listed = write(tmp_path / "a.yaml", "set-resources: ['train:mem_mb=100000', 'train:runtime=12h', 'parse:x=1']\n")
    mapped = write(tmp_path / "b.yaml", "set-resources:\n  train: {mem_mb: 100000, runtime: 12h}\n  parse: {x: 1}\n")
    a, b = load_profile(listed), load_profile(mapped)
    assert (a.mem_mb, a.runtime_min) == (b.mem_mb, b.runtime_min) == (100000, 720)


# files that are a study, an overlay or a claims file, not a profile
NOT_PROFILES = ("paper.yaml", "config.yaml", "hardware/80gb.yaml", "claims.yaml")


@pytest.mark.parametrize("name", NOT_PROFILES)
def test_fuzz_a_study_as_the_profile(name: str, capsys) -> None:
    path = CONFIG / name
    line = assert_one_line(cli(capsys, "memory", "--study", "paper", "--profile", str(path)), "memory", path)
    assert "not a Snakemake profile" in line, line


# ------------------------------------------------------------------------------------- fuzz: run.yaml shapes

# (the run.yaml's content, words of its refusal)
RUN_YAML_CASES: dict[str, tuple[str | bytes, str]] = {
    "list": ("- platform: cpu\n", "a list; expected a mapping"),
    "scalar": ("just some text\n", "a str; expected a mapping"),
    "number": ("42\n", "a int; expected a mapping"),
    "not-yaml": ("platform: [cpu\n", "not valid YAML"),
    "tag": ("platform: !!python/object:os.system cpu\n", "not valid YAML"),
    "not-utf8": (b"platform: \xff\xfe cpu\n", "not UTF-8"),
    "directory": ("", "a directory"),
}


@pytest.mark.parametrize("case", sorted(RUN_YAML_CASES))
def test_fuzz_plan_run_yaml_shape(case: str, tmp_path: Path, capsys) -> None:
    """A finished run's ``run.yaml`` that is no mapping of settings: one line naming it, exit 2; the other
    finished run still measures the plan and every run is still listed."""
    content, words = RUN_YAML_CASES[case]
    study = write(tmp_path / "mini.yaml", MINI)
    results = tmp_path / "results"
    bad = _finished(results, KEYS[0], 1.5)
    (bad / "run.yaml").unlink()
    if case == "directory":
        (bad / "run.yaml").mkdir()
    else:
        write(bad / "run.yaml", content)
    _finished(results, KEYS[1], 1.5)
    r = cli(capsys, "plan", "--study", str(study), "--results", str(results), "--runs")
    line = assert_one_line(r, "plan", bad / "run.yaml", quiet=False)
    assert words in line, line
    assert "measured (1 run)" in r.out and all(f"  {k}  " in r.out for k in KEYS), r.out


@pytest.mark.parametrize("sid", ["999999", "99999999999", "0", "-4", "abc"])
def test_fuzz_memory_measure_session(sid: str, capsys) -> None:
    """A ``--measure`` session no process has or can have: one line, exit 2, no table."""
    r = cli(capsys, "memory", "--measure", sid)
    if sid.lstrip("-").isdigit() and int(sid) > 0:
        assert_one_line(r, "memory")
    else:
        assert_flag_refused(r, "memory", "--measure")


@pytest.mark.parametrize("window", ["-2", "0", "2.5", "five"])
def test_fuzz_guard_threshold_window(window: str, tmp_path: Path, capsys) -> None:
    assert_flag_refused(
        cli(capsys, "guard-threshold", str(tmp_path), "--window", window), "guard-threshold", "--window"
    )

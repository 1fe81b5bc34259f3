"""Results that travel: a fresh clone with the results copied in trains nothing again.

A committed copy of this working tree is cloned with ``git clone`` (every source file gets a new
file time), and a results folder is copied in, with ``cp -a`` (times kept: older than the clone's
sources) or by a plain copy (new times, in copy order), each with and without Snakemake's metadata
(``.snakemake/``). ``snakemake -n`` must then plan no ``train`` and no ``verl_wheel`` job. The other
direction is tested too: a patch or a training-side source that really changes plans every run again.

The results are fabricated, not trained (dry runs only, a few seconds each): every file rule train
declares or reads (train.jsonl, run.yaml with its training key, the wheel, the data, the toy model),
written as coolsampler.spec.provenance.run_record writes run.yaml.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.provenance import run_record
from coolsampler.spec.study import load_study
from coolsampler.train.paths import Layout
from coolsampler.train.platform import get_platform
from coolsampler.train.rerun import code_files, file_digests, training_key

REPO = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
DAY = 86400


def _git(cwd: Path, *args: str) -> str:
    res = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return res.stdout


def _snakemake(cwd: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd / "workflow")}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def planned(out: str) -> dict[str, int]:
    """rule -> number of jobs in a ``snakemake -n`` job-stats table (empty: nothing to do)."""
    stats = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal", out, re.S)
    if not stats:
        assert "Nothing to be done" in out, out[-3000:]
        return {}
    return {name: int(n) for name, n in re.findall(r"^(\S+)\s+(\d+)$", stats.group(1), re.M)}


def committed_copy(dest: Path) -> Path:
    """This working tree (tracked and untracked, not ignored files) as a fresh repository, committed."""
    files = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_symlink():  # as git keeps it: the link (coolsampler.spec.shipped's links to config/, profiles/)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dest / name)
        elif src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "state under test")
    return dest


def fabricate_results(repo: Path) -> list[str]:
    """A finished smoke study in ``repo/results`` without training: what rule train reads and writes.

    The run.yaml of each run records the training key computed from ``repo``'s sources, as a real run
    does; every file is dated two days back (results older than any source, as after a real study).
    Returns the run keys."""
    study = load_study(repo / "config/config.yaml")
    layout = Layout.from_config(study.raw, study.results)
    version = subprocess.run(
        [sys.executable, "workflow/scripts/build_verl.py", "--print-version"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    key = training_key(
        verl=version,
        recipe=study.recipe,
        platform="cpu",
        code=file_digests(repo, code_files(repo)),
        numerics=get_platform("cpu").numerics(),
    )
    files = {
        f"{layout.build}/verl-{version}-py3-none-any.whl": b"wheel",
        f"{layout.model_dir('toy-qwen2')}/model.safetensors": b"weights",
        **{path: b"parquet" for path in layout.data_files("arith").values()},
    }
    for run in study.runs:
        record = run_record(
            study=study.name,
            settings=run.settings(),
            source=run.source,
            overrides=["actor_rollout_ref.actor.optim.lr=0.0001", "trainer.n_gpus_per_node=1", "trainer.nnodes=1"],
            platform="cpu",
            verl=version,
            image=None,
            env={},
            training_key=key,
            cwd=repo,
        )
        files[layout.run_file(run.key, "run.yaml")] = yaml.safe_dump(record, sort_keys=False).encode()
        files[layout.run_file(run.key, "train.jsonl")] = b'{"step": 1}\n'
        files[layout.run_file(run.key, "checkpoints/latest_checkpointed_iteration.txt")] = b"64"
    past = time.time() - 2 * DAY
    for rel, data in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (past, past))
    return [r.key for r in study.runs]


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A committed tree with a finished (fabricated) smoke study and Snakemake's metadata of it."""
    src = committed_copy(tmp_path_factory.mktemp("origin"))
    keys = fabricate_results(src)
    # Snakemake's metadata for every output, as a real study leaves it (--touch records it too)
    outputs = [f"results/smoke/runs/{k}/{f}" for k in keys for f in ("train.jsonl", "run.yaml")]
    res = _snakemake(src, "--touch", "--cores", "1", "--forcerun", "train", "--", *outputs)
    assert res.returncode == 0, res.stderr[-3000:]
    assert any((src / ".snakemake" / "metadata").iterdir())
    past = time.time() - 2 * DAY  # --touch dated the outputs now: back to the study's time
    for path in (src / "results").rglob("*"):
        os.utime(path, (past, past))
    return src, keys


def clone_with_results(origin: Path, dest: Path, *, keep_times: bool, metadata: bool) -> Path:
    """``git clone`` of the origin, then its results (and optionally .snakemake) copied in."""
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True, capture_output=True)
    copy = shutil.copy2 if keep_times else shutil.copyfile
    shutil.copytree(origin / "results", dest / "results", copy_function=copy)
    if metadata:
        shutil.copytree(origin / ".snakemake", dest / ".snakemake", copy_function=copy)
    return dest


@pytest.mark.parametrize("keep_times", [True, False], ids=["cp-a", "plain-copy"])
@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "no-metadata"])
def test_fresh_clone_with_copied_results_trains_nothing(origin, tmp_path, keep_times, metadata):
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=keep_times, metadata=metadata)
    res = _snakemake(work, "-n")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = planned(res.stdout)
    assert "train" not in jobs and "verl_wheel" not in jobs and "supersede" not in jobs, jobs


def test_a_changed_patch_trains_every_run_again(origin, tmp_path):
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=False)
    patch = sorted((work / "patches/verl").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")  # new content: a new wheel name
    jobs = planned(_snakemake(work, "-n").stdout)
    assert jobs.get("verl_wheel") == 1 and jobs.get("train") == len(keys), jobs


def test_changed_training_code_trains_every_run_again_from_step_0(origin, tmp_path):
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=True)
    # a file image_sources() finds (coolsampler.worker.rewards runs inside verl): training-side code
    rewards = work / "workflow/coolsampler/worker/rewards.py"
    rewards.write_text(rewards.read_text() + "\nCHANGED = 1\n")  # code, not prose
    res = _snakemake(work, "-n")
    jobs = planned(res.stdout)
    assert jobs.get("train") == len(keys) and jobs.get("supersede") == len(keys), jobs
    assert "verl_wheel" not in jobs
    # One run through real Snakemake jobs, verl replaced by a stand-in that writes run.yaml as rule
    # train does (coolsampler.spec.provenance.run_record with the rule's training_key): the stale
    # checkpoints are set aside first (no resume from another code's state), the new key is
    # recorded, and then nothing is left to do.
    (work / "workflow/scripts/train.py").write_text(STAND_IN_TRAIN)
    run_dir = work / "results/smoke/runs" / keys[0]
    target = f"results/smoke/runs/{keys[0]}/run.yaml"
    res = _snakemake(work, "--cores", "1", "--", target)
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (run_dir / "checkpoints").exists()
    assert list((run_dir / "superseded").glob("*/checkpoints/latest_checkpointed_iteration.txt"))
    record = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert record["training_key"]["key"] != yaml.safe_load((src / target).read_text())["training_key"]["key"]
    assert record["repository"]["commit"] == _git(work, "rev-parse", "--short", "HEAD").strip()
    assert record["repository"]["dirty"] is True  # rewards.py and train.py differ from HEAD
    for meta in (False, True):  # with the metadata this run left, and without any
        if not meta:
            shutil.rmtree(work / ".snakemake")
        res = _snakemake(work, "-n", "--", target)
        assert planned(res.stdout) == {}, res.stdout[-3000:]


STAND_IN_TRAIN = """
from pathlib import Path
import yaml
from coolsampler.spec.provenance import run_record

smk = snakemake  # noqa: F821
run = smk.params.run
Path(smk.output.jsonl).write_text('{"step": 1}\\n')
record = run_record(
    study=smk.params.study, settings=run.settings(), source=run.source, overrides=[],
    platform=smk.params.platform, verl="stand-in", image=None, env={},
    training_key=smk.params.training_key,
)
Path(smk.output.settings).write_text(yaml.safe_dump(record, sort_keys=False))
"""


def test_analysis_code_plans_no_training(origin, tmp_path):
    """Editing the plotting code (not training-side) trains nothing."""
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=False, metadata=True)
    plotting = work / "workflow/coolsampler/paper/plotting.py"
    plotting.write_text(plotting.read_text() + "\n# an edit\n")
    jobs = planned(_snakemake(work, "-n").stdout)
    assert "train" not in jobs and jobs.get("figure"), jobs


def test_analysis_only_never_plans_training(origin, tmp_path):
    """analysis_only=true: rule train does not exist; missing runs are listed, the rest is drawn."""
    src, keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=False)
    missing = work / "results/smoke/runs" / keys[0]
    shutil.rmtree(missing)
    patch = sorted((work / "patches/verl").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")  # would retrain everything without the switch
    res = _snakemake(work, "-n", "--config", "analysis_only=true")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = planned(res.stdout)
    assert "train" not in jobs and "verl_wheel" not in jobs, jobs
    assert jobs.get("parse") == len(keys) - 1 and jobs.get("figure") == 2 and jobs.get("table") == 3, jobs
    assert f"1 of {len(keys)} runs of study smoke" in res.stderr and keys[0] in res.stderr


# --------------------------------------------------------------------------------------------------
# coolsampler figures RESULTS_DIR: everything drawn from run directories alone, verl unimportable.


def synthetic_study_results(repo: Path, *, skip: int = 1) -> list[str]:
    """The smoke study's run directories with synthetic metrics (coolsampler.testkit.synthetic), the first
    ``skip`` runs absent; the logs older than their metrics, as after a real parse."""
    from coolsampler.results.metrics import write_metrics
    from coolsampler.spec.metrics_schema import RunStatus
    from coolsampler.testkit.synthetic import make_metrics

    study = load_study(repo / "config/config.yaml")
    layout = Layout.from_config(study.raw, study.results)
    past = time.time() - DAY
    for i, run in enumerate(study.runs[skip:]):
        d = repo / layout.run_dir(run.key)
        d.mkdir(parents=True)
        for name, text in (("train.jsonl", '{"step": 1}\n'), ("run.yaml", yaml.safe_dump({"study": study.name}))):
            (d / name).write_text(text)
            os.utime(d / name, (past, past))
        df = make_metrics(run.N, run.steps, run.val_every, run.Tb.initial, seed=i, correction=run.correction)
        write_metrics(df, RunStatus(True, run.steps, run.steps, []), d / "metrics.parquet", d / "status.json")
    return [r.key for r in study.runs]


@pytest.mark.slow  # draws five targets and the report for real: about a minute
@pytest.mark.timeout(900)
def test_figures_command_draws_everything_from_run_directories_alone(tmp_path):
    repo = committed_copy(tmp_path / "repo")
    keys = synthetic_study_results(repo)
    # any import of verl (or vLLM, torch) in the command or its jobs fails them
    block = tmp_path / "block"
    for name in ("verl", "vllm", "torch"):
        (block / name).mkdir(parents=True)
        (block / name / "__init__.py").write_text(f"raise ImportError('{name} imported by coolsampler figures')\n")
    env = {**os.environ, "PYTHONPATH": f"{block}:{repo / 'workflow'}"}
    res = subprocess.run(
        [sys.executable, "-m", "coolsampler.cli", "figures", "results/smoke"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    smoke = repo / "results/smoke"
    for name in ("fig1.pdf", "fig1.png", "fig6.pdf", "table1.md", "table2.csv", "table4.tex", "claims.md"):
        assert (smoke / name).stat().st_size > 0, name
    assert (smoke / "report.html").stat().st_size > 10_000
    # each present run's staleness diagnostics, and the study's lead table
    assert all((smoke / "runs" / k / "diagnostics.png").stat().st_size > 10_000 for k in keys[1:])
    assert not (smoke / "runs" / keys[0]).exists()
    assert "Staleness diagnostics against the onset" in (smoke / "diagnostic_leads.md").read_text()
    assert "rule train:" not in out and "localrule parse:" not in out  # drawn, nothing trained or parsed
    assert keys[0] in out  # the missing run is named
    assert "missing" in (smoke / "logs/figure/fig1.log").read_text()


# --------------------------------------------------------------------------------------------------
# What a run records (run.yaml) and what decides that it trains again


def test_run_yaml_records_the_effective_recipe_not_the_papers_defaults():
    """A cpu smoke run: lr 1e-4 and one process; a gpu paper run: 2e-6 and 4 GPUs."""
    from coolsampler.spec.provenance import effective_recipe
    from coolsampler.train.overrides import overrides_for

    smoke = effective_recipe(overrides_for("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1", REPO / "config/config.yaml"))
    assert smoke["lr"] == 1e-4 and smoke["gpus_per_run"] == 1 and smoke["prompts_per_step"] == 8
    assert smoke["tis_cap"] == 2.0 and smoke["max_response_length"] == 8 and smoke["steps"] == 64
    key = "qwen2.5-math-1.5b/gsm8k/N64_lr2e-6_none_Tb1_Tl1_s1"
    paper = effective_recipe(overrides_for(key, REPO / "config/paper.yaml", "gpu"))
    assert paper["lr"] == 2e-6 and paper["gpus_per_run"] == 4 and paper["tis_cap"] is None


def test_run_record_holds_commit_dirty_flag_and_versions(tmp_path):
    record = run_record(
        study="s",
        settings={"N": 4},
        source="x",
        overrides=["actor_rollout_ref.actor.optim.lr=1e-06", "trainer.n_gpus_per_node=4", "trainer.nnodes=1"],
        platform="gpu",
        verl="0.9.1+coolsampler.abc",
        image=None,
        env={"A": "1"},
        cwd=tmp_path,  # not a git tree
    )
    assert record["recipe"]["lr"] == 1e-6 and record["recipe"]["gpus_per_run"] == 4
    assert record["repository"] == {"commit": "unknown", "dirty": "unknown"}
    assert set(record["packages"]) == {"verl", "vllm", "torch", "transformers", "coolsampler"}
    assert record["packages"]["coolsampler"]  # installed (editable) in the test environment
    assert list(record)[:6] == ["study", "settings", "source", "recipe", "platform", "verl"]
    yaml.safe_dump(record)  # plain data


def test_figures_stamp_the_commit_of_the_code_that_drew_them(tmp_path):
    """Run from inside another git repository, the stamp is still this package's tree's commit."""
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q")
    (other / "f").write_text("x")
    _git(other, "add", "f")
    _git(other, "commit", "-qm", "other")
    code = "from coolsampler.spec.provenance import Provenance; print(Provenance.here('s').revision)"
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=other, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    head = _git(REPO, "rev-parse", "--short", "HEAD").strip()
    dirty = bool(_git(REPO, "status", "--porcelain", "--untracked-files=no").strip())
    assert out == head + ("+dirty" if dirty else "")
    assert _git(other, "rev-parse", "--short", "HEAD").strip() not in out


def test_training_key_follows_training_code_content_only(tmp_path):
    def key(repo: Path) -> str:
        return training_key(verl="v", recipe={"lr": 1}, platform="cpu", code=file_digests(repo, code_files(repo)))[
            "key"
        ]

    a = committed_copy(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b, copy_function=shutil.copyfile)  # elsewhere, new file times
    assert key(a) == key(b)
    (b / "workflow/coolsampler/paper/plotting.py").write_text("# analysis code is not training code\n")
    assert key(a) == key(b)
    pyproject = b / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text + "\n[tool.coolsampler-test]\nx = 1\n")  # a tool setting: not training code
    assert key(a) == key(b)
    pyproject.write_text(text.replace("dependencies = [", 'dependencies = [\n  "left-pad",', 1))
    assert key(a) != key(b)  # the package's requirements are
    pyproject.write_text(text)
    assert key(a) == key(b)
    (b / "workflow/coolsampler/worker/losses.py").write_text("# training code\n")
    assert key(a) != key(b)
    assert "workflow/coolsampler/worker/losses.py" in code_files(b)


def test_prose_of_training_code_retrains_nothing_and_its_code_retrains_all(tmp_path):
    """The training key hashes the code, not its prose: a docstring or comment edit of a worker module
    (or of a spec module the workers import) leaves every key as it was; a code edit changes it."""

    def key(repo: Path) -> str:
        return training_key(verl="v", recipe={}, platform="gpu", code=file_digests(repo, code_files(repo)))["key"]

    a = committed_copy(tmp_path / "a")
    before = key(a)
    tap = a / "workflow/coolsampler/worker/controller.py"
    text = tap.read_text()
    prose = text.replace('"""Sampler-temperature', '"""An edited docstring. Sampler-temperature', 1)
    prose = prose.replace("\nimport math\n", "\n# a new comment\nimport math  # and another\n", 1)
    assert prose != text
    tap.write_text(prose)
    spec = a / "workflow/coolsampler/spec/temperature.py"
    spec.write_text(spec.read_text().replace('    """The sampler temperature Tb of a run.', '    """Tb.', 1))
    assert key(a) == before
    tap.write_text(prose.replace("\nimport math\n", "\nimport math\nimport os\n", 1) + "\nX = 1\n")
    assert key(a) != before


def test_a_docstring_edit_of_worker_code_plans_no_training(origin, tmp_path):
    """Through Snakemake: finished runs stay finished when only prose of the training code changed."""
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=True)
    losses = work / "workflow/coolsampler/worker/losses.py"
    losses.write_text(losses.read_text().replace('"""', '"""Edited prose. ', 1) + "\n# a trailing comment\n")
    jobs = planned(_snakemake(work, "-n").stdout)
    assert "train" not in jobs and "supersede" not in jobs, jobs


def test_figure_jobs_depend_on_every_module_the_labels_import(origin, tmp_path):
    """The figure and table jobs' code is derived from imports (coolsampler.train.code.script_code): the
    labels module and every module it imports are inputs of every figure job (so an edit of any of them
    redraws the figures, Snakemake's mtime rule), training code is not."""
    src, _keys = origin
    work = clone_with_results(src, tmp_path / "clone", keep_times=True, metadata=True)
    out = _snakemake(work, "-n", "--", "results/smoke/fig1.pdf").stdout
    inputs = [line for block in out.split("rule figure:")[1:] for line in block.splitlines() if "input:" in line]
    assert inputs, out[-2000:]
    # labels.py and what it imports (coolsampler.spec.metrics_schema, .settings, .temperature)
    imported = {"paper/labels.py", "spec/temperature.py", "spec/settings.py", "spec/metrics_schema.py"}
    for line in inputs:
        for m in imported:
            assert f"workflow/coolsampler/{m}" in line, (m, line[:300])
        assert "workflow/coolsampler/worker/" not in line

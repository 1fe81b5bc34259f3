"""``coolsampler analyze`` and ``parse`` against odd and hostile logs, run.yaml files and directory shapes,
all built from the shipped example logs (``examples/verl-logs``).

The contract every case holds: a bad input gets one line on stderr, ``coolsampler <cmd>: <file>[:<where>]:
<problem>``, never a traceback; ``analyze`` goes on with the other inputs (they still reach Table 1) and
exits 1 where it reported one; ``parse``, whose one input is the whole job, exits 2. Nothing is counted
twice, and no step number, however large, costs memory in proportion to it.

The first part holds one regression test per problem met; the second generates the cases, family by
family. Every case runs the CLI in-process (``coolsampler.cli.main``), so the suite stays fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coolsampler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "verl-logs"
STABLE = EXAMPLES / "stable"
DEGRADES = EXAMPLES / "degrades"
PLAIN = EXAMPLES / "plain-verl"
WORKFLOW = ROOT / "workflow"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def table1(out: str) -> list[str]:
    """The rows of the printed Table 1 (after its header and rule)."""
    if "Summary (Table 1 style" not in out:
        return []
    return out.split("Summary (Table 1 style")[1].split("\n\n")[0].splitlines()[3:]


def run_copy(tmp: Path, src: Path = STABLE, name: str = "run", *, run_yaml: str | None = None) -> Path:
    """A copy of an example run directory; ``run_yaml`` replaces its run.yaml (None: keep the example's)."""
    d = tmp / name
    d.mkdir(parents=True)
    shutil.copy(src / "train.jsonl", d / "train.jsonl")
    if run_yaml is not None:
        (d / "run.yaml").write_text(run_yaml)
    elif (src / "run.yaml").exists():
        shutil.copy(src / "run.yaml", d / "run.yaml")
    return d


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out, cap.err


def error_lines(err: str, cmd: str = "analyze") -> list[str]:
    """stderr's lines, each of which must be one of the command's error lines."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert all(ln.startswith(f"coolsampler {cmd}: ") for ln in lines), err
    return lines


def subprocess_cli(*argv: str, timeout: float = 60, limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    """The CLI in a child process: to bound its time (a walk that would hang) or its address space (a
    reader that would build a range of 10^11 steps)."""
    pre = ""
    if limit_bytes is not None:
        pre = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n"
    code = pre + "import sys\nfrom coolsampler.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "PYTHONPATH": str(WORKFLOW), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


# ==================================================================================================
# Regression tests: one per problem met


# 1. One run counted several times


def test_the_same_path_given_twice_is_one_run_not_two_seeds(capsys) -> None:
    rc, out, _ = cli(capsys, "analyze", str(STABLE), str(STABLE))
    rows = table1(out)
    assert rc == 0 and len(rows) == 1
    assert "0/2" not in rows[0] and "| 0/1 |" in rows[0]


def test_a_symlink_back_to_an_ancestor_is_not_followed(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path / "tree", name="a/run")
    (tmp_path / "tree" / "latest").symlink_to(".")
    (d / "again").symlink_to("..")
    rc, out, _ = cli(capsys, "analyze", str(tmp_path / "tree"))
    assert rc == 0 and len(table1(out)) == 1
    assert out.count("== ") == 1


def test_two_links_to_a_parent_do_not_make_the_walk_exponential(tmp_path: Path) -> None:
    run_copy(tmp_path / "tree", name="a/b/run")
    for d in (tmp_path / "tree" / "a", tmp_path / "tree" / "a" / "b"):
        (d / "up1").symlink_to("..")
        (d / "up2").symlink_to("..")
    proc = subprocess_cli("analyze", str(tmp_path / "tree"), timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert len(table1(proc.stdout)) == 1


def test_a_symlinked_log_is_read_once_by_its_resolved_path(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path, name="run")
    (tmp_path / "alias").symlink_to(d)
    rc, out, _ = cli(capsys, "analyze", str(tmp_path))
    assert rc == 0 and len(table1(out)) == 1 and out.count("== ") == 1


# 2. One absurd step number takes all the memory


def _with_step(src: Path, step: int, dst: Path) -> Path:
    """The example log with one more training line, at ``step``."""
    rows = lines_of(src)
    rec = json.loads(rows[-1])
    rec["step"] = step
    rec["data"]["training/global_step"] = step
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("\n".join([*rows, json.dumps(rec)]) + "\n")
    return dst


def test_a_step_past_ten_million_of_unknown_length_is_reported_and_skipped(tmp_path: Path, capsys) -> None:
    log = _with_step(PLAIN / "train.jsonl", 10**7, tmp_path / "big" / "train.jsonl")
    rc, out, _ = cli(capsys, "analyze", str(log))
    assert rc == 0
    assert "steps up to 64 " in out and "10000000 (all" not in out
    assert re.search(r"log: 1 step\(s\) past 10000000 .*skipped \(first: step 10000000\)", out), out


def test_a_step_past_the_runs_known_length_is_reported_and_skipped(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path)
    _with_step(STABLE / "train.jsonl", 80, d / "train.jsonl")
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0 and "steps up to 64 " in out
    assert re.search(r"log: 1 step\(s\) past the run's 64 steps .*skipped \(first: step 80\)", out), out


@pytest.mark.parametrize("fmt", ["jsonl", "console", "wandb"])
def test_one_step_at_1e11_is_read_under_a_1_gib_address_space(tmp_path: Path, fmt: str) -> None:
    log = _with_step(PLAIN / "train.jsonl", 10**11, tmp_path / "log" / "train.jsonl")
    if fmt == "console":
        recs = [json.loads(x) for x in lines_of(log)]
        text = "".join(
            f"step:{r['step']} - " + " - ".join(f"{k}:{v}" for k, v in r["data"].items()) + "\n" for r in recs
        )
        log = tmp_path / "job.log"
        log.write_text(text)
    elif fmt == "wandb":
        import pandas as pd

        recs = [json.loads(x) for x in lines_of(log)]
        log = tmp_path / "history.csv"
        pd.DataFrame([{"_step": r["step"], **r["data"]} for r in recs]).to_csv(log, index=False)
    proc = subprocess_cli("analyze", str(log), "--N", "1", "--Tb", "1", limit_bytes=1 << 30, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "steps up to 64 " in proc.stdout and "skipped (first: step 100000000000)" in proc.stdout


# 3. run.yaml, the file written by hand


RUN_YAML_SHAPES = {
    "invalid YAML": "N: [1, 2\nTb: 1.0\n",
    "a list": "- N: 32\n- Tb: 1.0\n",
    "a scalar": "just some text\n",
    "settings: null": "settings: null\n",
    "settings: a list": "settings:\n  - N: 32\n",
    "a tag": "N: !!python/object/apply:os.system ['true']\n",
    "a custom tag": "N: !mytag 32\n",
}


@pytest.mark.parametrize("shape", list(RUN_YAML_SHAPES))
def test_a_run_yaml_of_a_bad_shape_is_one_line_and_the_other_logs_go_on(tmp_path: Path, capsys, shape: str) -> None:
    bad = run_copy(tmp_path, name="bad", run_yaml=RUN_YAML_SHAPES[shape])
    rc, out, err = cli(capsys, "analyze", str(bad), str(DEGRADES))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith(f"coolsampler analyze: {bad / 'run.yaml'}")
    assert len(table1(out)) == 1 and "degrades" in out


def test_a_run_yaml_that_is_a_directory_is_one_line(tmp_path: Path, capsys) -> None:
    bad = run_copy(tmp_path, name="bad", run_yaml=None)
    (bad / "run.yaml").unlink()
    (bad / "run.yaml").mkdir()
    rc, out, err = cli(capsys, "analyze", str(bad), str(DEGRADES))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1 and f"{bad / 'run.yaml'}: " in lines[0] and "directory" in lines[0]
    assert len(table1(out)) == 1


def test_a_wrong_type_in_run_yaml_names_the_file_and_drops_no_other_log(tmp_path: Path, capsys) -> None:
    bad = run_copy(tmp_path, name="bad", run_yaml="N: abc\nTb: 1.0\nsteps: 64\n")
    rc, out, err = cli(capsys, "analyze", str(bad), str(DEGRADES), str(PLAIN))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith(f"coolsampler analyze: {bad / 'run.yaml'}:N: 'abc' is not valid; allowed:")
    assert len(table1(out)) == 2


# the values `runs --study` refuses for a run, refused in run.yaml with the study's own words
IMPOSSIBLE = {
    "N: -5": ("N", "-5"),
    "N: true": ("N", "True"),
    "N: 0": ("N", "0"),
    "Tb: -1": ("Tb", "-1"),
    "Tb: 0": ("Tb", "0"),
    "Tb: .nan": ("Tb", "not a finite number"),
    "Tb: .inf": ("Tb", "not a finite number"),
    "steps: -10": ("steps", "-10"),
    "val_every: 0": ("val_every", "0"),
    "seed: -1": ("seed", "-1"),
    "N: [1, 2]": ("N", "one value"),
}


@pytest.mark.parametrize("line", list(IMPOSSIBLE))
def test_an_impossible_run_yaml_value_is_refused_as_runs_refuses_it(tmp_path: Path, capsys, line: str) -> None:
    key, said = IMPOSSIBLE[line]
    base = {"N": 32, "Tb": 1.0, "steps": 64, "val_every": 8}
    text = "".join(f"{k}: {v}\n" for k, v in base.items() if k != key) + line + "\n"
    bad = run_copy(tmp_path, name="bad", run_yaml=text)
    rc, out, err = cli(capsys, "analyze", str(bad), str(DEGRADES))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"coolsampler analyze: {bad / 'run.yaml'}:{key}: ") and said in lines[0]
    assert "missing settings" not in lines[0]
    assert len(table1(out)) == 1


def test_run_yaml_refuses_what_a_study_refuses_in_the_same_words(tmp_path: Path, capsys) -> None:
    """The same value through `runs --study` and through run.yaml: one rule, one wording."""
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: s\nruns:\n  - {model: toy-qwen2, task: arith, N: -5, lr: 1.0e-4, correction: none, Tb: 1.0, seed: 1}\n"
    )
    rc, _, err = cli(capsys, "runs", "--study", str(study))
    assert rc == 2
    allowed = err.split("is not valid; ", 1)[1].strip()
    bad = run_copy(tmp_path, name="bad", run_yaml="N: -5\nTb: 1.0\n")
    rc, _, err = cli(capsys, "analyze", str(bad))
    assert rc == 1 and err.strip().endswith(f"-5 is not valid; {allowed}")


def test_a_run_yaml_with_steps_shorter_than_the_log_skips_the_steps_past_it(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path, run_yaml="N: 32\nTb: 1.0\nsteps: 40\nval_every: 8\n")
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0 and "steps up to 40 " in out
    assert "log: 24 step(s) past the run's 40 steps (run.yaml), skipped (first: step 41)" in out


# Also wrong


def test_a_utf16_log_is_refused_in_one_line_not_judged_stable(tmp_path: Path, capsys) -> None:
    d = tmp_path / "run"
    d.mkdir()
    (d / "train.jsonl").write_bytes((STABLE / "train.jsonl").read_text().encode("utf-16"))
    rc, out, err = cli(capsys, "analyze", str(d / "train.jsonl"), str(DEGRADES))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1 and "not UTF-8; UTF-16?" in lines[0]
    assert "stable" not in out.split("== degrades")[0] if "== degrades" in out else True
    assert len(table1(out)) == 1


def test_a_latin1_log_is_refused_naming_the_line(tmp_path: Path, capsys) -> None:
    rows = lines_of(STABLE / "train.jsonl")
    rows.insert(5, "Warnung: Größe überschritten")
    log = tmp_path / "latin.jsonl"
    log.write_bytes("\n".join(rows).encode("latin-1"))
    rc, _, err = cli(capsys, "analyze", str(log), "--N", "32", "--Tb", "1")
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1 and lines[0].startswith(f"coolsampler analyze: {log}:6: not UTF-8")


def test_a_utf8_bom_log_reads_as_the_log_without_it(tmp_path: Path, capsys) -> None:
    log = tmp_path / "bom" / "train.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"\xef\xbb\xbf" + (STABLE / "train.jsonl").read_bytes())
    _, plain, _ = cli(capsys, "analyze", str(STABLE / "train.jsonl"), "--N", "32", "--Tb", "1", "--steps", "64")
    rc, out, _ = cli(capsys, "analyze", str(log), "--N", "32", "--Tb", "1", "--steps", "64")
    assert rc == 0 and table1(out)[0].split("|")[2:] == table1(plain)[0].split("|")[2:]


def test_a_log_of_only_the_step_0_validation_is_not_judged(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path)
    (d / "train.jsonl").write_text(lines_of(STABLE / "train.jsonl")[0] + "\n")
    rc, out, err = cli(capsys, "analyze", str(d), str(DEGRADES))
    assert "stable" not in out.split("== ", 2)[1]
    assert rc == 1 and "not judged" in err and len(error_lines(err)) == 1
    assert len(table1(out)) == 1


@pytest.mark.parametrize("step", ["3.5", "-2", '"7"', "true"])
def test_a_step_that_is_not_an_integer_is_refused_and_counted(tmp_path: Path, capsys, step: str) -> None:
    rows = lines_of(STABLE / "train.jsonl")
    rows[10] = re.sub(r'^\{"step":\d+', '{"step":' + step, rows[10])
    d = run_copy(tmp_path)
    (d / "train.jsonl").write_text("\n".join(rows) + "\n")
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0
    assert re.search(r"log: 1 line\(s\) with a step that is not an integer >= 0 \(line 11: .+\), skipped", out), out
    assert "logged more than once" not in out


@pytest.mark.parametrize(("value", "shown"), [('"0.9"', "'0.9'"), ("true", "True")])
def test_a_validation_value_that_is_not_a_number_is_refused_and_not_used(
    tmp_path: Path, capsys, value: str, shown: str
) -> None:
    key = "val-core/arith/acc/mean@1"
    rows = lines_of(DEGRADES / "train.jsonl")
    at = next(i for i, r in enumerate(rows) if json.loads(r)["step"] == 24)
    rows[at] = re.sub(re.escape(f'"{key}":') + r"[-0-9.e]+", f'"{key}":{value}', rows[at])
    d = run_copy(tmp_path, DEGRADES)
    (d / "train.jsonl").write_text("\n".join(rows) + "\n")
    _, before, _ = cli(capsys, "analyze", str(DEGRADES))
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0
    assert f"log: 1 value(s) not a number, skipped (val_acc at step 24: {shown})" in out
    assert "NaN/inf val_acc" not in out
    # the onset and the peak of the run without that validation
    peak = re.search(r"peak \S+ at step \d+", before)[0]
    assert peak in out and "1.000" not in out.split("Summary")[0]


def test_parse_reads_the_flat_jsonl_analyze_reads(tmp_path: Path, capsys) -> None:
    flat = tmp_path / "flat.jsonl"
    flat.write_text(
        "".join(
            json.dumps({"step": json.loads(r)["step"], **json.loads(r)["data"]}) + "\n"
            for r in lines_of(PLAIN / "train.jsonl")
        )
    )
    rc, out, err = cli(capsys, "parse", str(flat))
    assert rc == 0, err
    assert "64 training steps" in out and "validation: 9 points" in out


def test_a_metrics_csv_with_a_text_cell_is_one_line(tmp_path: Path, capsys) -> None:
    d = tmp_path / "run"
    d.mkdir()
    assert main(["parse", str(STABLE / "train.jsonl"), "--out", str(d / "metrics.csv")]) == 0
    capsys.readouterr()
    text = (d / "metrics.csv").read_text().splitlines()
    cells = text[5].split(",")
    cells[text[0].split(",").index("val_acc")] = "oops"
    text[5] = ",".join(cells)
    (d / "metrics.csv").write_text("\n".join(text) + "\n")
    rc, out, err = cli(capsys, "analyze", str(d), str(DEGRADES))
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1 and lines[0].startswith(f"coolsampler analyze: {d / 'metrics.csv'}:6: ")
    assert "val_acc" in lines[0] and "'oops'" in lines[0]
    assert len(table1(out)) == 1


def test_an_mlflow_run_with_a_malformed_metric_file_is_read_and_the_file_named(tmp_path: Path, capsys) -> None:
    src = ROOT / "tests" / "fixtures" / "own-logs" / "mlruns"
    shutil.copytree(src, tmp_path / "mlruns")
    run = next(p.parent for p in (tmp_path / "mlruns").rglob("meta.yaml") if (p.parent / "metrics").is_dir())
    metric = next(p for p in sorted((run / "metrics").rglob("*")) if p.is_file())
    metric.write_text(metric.read_text() + "garbage here\n")
    rc, out, err = cli(capsys, "analyze", str(run), "--N", "1", "--Tb", "1")
    assert "a directory holding no run log" not in out + err
    assert rc == 0 and len(table1(out)) == 1
    assert re.search(r"log: 1 line\(s\) of .*metrics/.* not 'timestamp value step', skipped", out), out


def test_a_group_that_matches_nothing_is_refused(capsys) -> None:
    rc, _, err = cli(capsys, "analyze", str(STABLE), str(DEGRADES), "--group", "mine=*nomatch*")
    assert rc == 2
    assert error_lines(err) == [
        "coolsampler analyze: --group mine=*nomatch*: matches none of the runs given (stable, degrades)"
    ]


def test_a_group_that_pools_runs_of_different_N_is_refused(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path, name="other", run_yaml="N: 8\nTb: 1.0\nsteps: 64\nval_every: 8\n")
    rc, out, err = cli(capsys, "analyze", str(STABLE), str(d), "--group", "mine=*")
    lines = error_lines(err)
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith("coolsampler analyze: --group mine=*: pools runs of different N")
    assert len(table1(out)) == 2  # each its own row, not one arm


def test_the_readme_light_path_still_reads_the_examples(tmp_path: Path, capsys) -> None:
    rc, out, err = cli(capsys, "analyze", str(EXAMPLES))
    assert rc == 0 and err == "" and len(table1(out)) == 3

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
DEGRADES_ARM = "toy-qwen2/arith/N32_lr1e-4_none_Tb1_Tl1_s1"  # its row in Table 1 (its run.yaml's key)


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
    assert re.search(r"log: 1 step\(s\) at or past 10000000, skipped \(first: step 10000000\)", out), out


def test_a_step_past_the_runs_known_length_is_reported_and_skipped(tmp_path: Path, capsys) -> None:
    d = run_copy(tmp_path)
    _with_step(STABLE / "train.jsonl", 80, d / "train.jsonl")
    rc, out, _ = cli(capsys, "analyze", str(d))
    assert rc == 0 and "steps up to 64 " in out
    assert re.search(r"log: 1 step\(s\) past the run's 64 steps, skipped \(first: step 80\)", out), out


def test_one_step_at_1e11_is_read_under_a_1_gib_address_space(tmp_path: Path) -> None:
    """The same log as verl's JSONL, its console and a wandb CSV, in one child process (one start)."""
    import pandas as pd

    log = _with_step(PLAIN / "train.jsonl", 10**11, tmp_path / "log" / "train.jsonl")
    recs = [json.loads(x) for x in lines_of(log)]
    console = tmp_path / "job.log"
    console.write_text(
        "".join(f"step:{r['step']} - " + " - ".join(f"{k}:{v}" for k, v in r["data"].items()) + "\n" for r in recs)
    )
    wandb = tmp_path / "history.csv"
    pd.DataFrame([{"_step": r["step"], **r["data"]} for r in recs]).to_csv(wandb, index=False)
    logs = [log, console, wandb]
    proc = subprocess_cli("analyze", *map(str, logs), "--N", "1", "--Tb", "1", limit_bytes=1 << 30, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocks = [b for b in proc.stdout.split("\n\n") if b.startswith("== ")]
    assert len(blocks) == 3
    for block in blocks:
        assert "steps up to 64 " in block and "skipped (first: step 100000000000)" in block, block


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
    assert "log: 24 step(s) past the run's 40 steps, skipped (first: step 41)" in out


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


# ==================================================================================================
# Generated cases, family by family. Each builds one odd input beside a good one (the example run that
# degrades) and names what must come of it:
#   ("ok", text):   read, exit 0, nothing on stderr, ``text`` in the output (the problem said in the run's block)
#   ("bad", text):  one line on stderr naming the odd file, with ``text``; exit 1; the good run still analysed
#   ("flag", text): a flag refused before any log is read: one line, exit 2


MEAN1 = "val-core/arith/acc/mean@1"


def _mutate_line(index: int, edit) -> callable:
    """A case that rewrites line ``index`` of the stable example's log with ``edit(line) -> str``."""

    def build(tmp: Path) -> list[str]:
        d = run_copy(tmp, name="odd")
        rows = lines_of(d / "train.jsonl")
        rows[index] = edit(rows[index])
        (d / "train.jsonl").write_text("\n".join(rows) + "\n")
        return [str(d)]

    return build


def _set_step(value: str):
    return lambda row: re.sub(r'^\{"step":\d+', '{"step":' + value, row)


def _set_value(key: str, value: str):
    return lambda row: re.sub(re.escape(f'"{key}":') + r"[-0-9.eE]+", f'"{key}":{value}', row, count=1)


KL = "actor/kl_loss"
JSONL_CASES = {
    "stray text line": (_mutate_line(5, lambda r: "WARNING: something printed into the log"), ("ok", "stray line")),
    "truncated last line": (_mutate_line(-1, lambda r: r[: len(r) // 2]), ("ok", "truncated log?")),
    "duplicated line": (_mutate_line(9, lambda r: r + "\n" + r), ("ok", "logged more than once")),
    "data is a list": (_mutate_line(7, lambda r: '{"step":7,"data":[1,2]}'), ("ok", "stray line")),
    "data is null": (_mutate_line(7, lambda r: '{"step":7,"data":null}'), ("ok", "stray line")),
    "no step key": (_mutate_line(7, lambda r: r.replace('"step":7', '"stp":7')), ("ok", "stray line")),
    "a JSON list line": (_mutate_line(7, lambda r: "[1, 2, 3]"), ("ok", "stray line")),
    "a JSON string line": (_mutate_line(7, lambda r: '"step"'), ("ok", "stray line")),
    "a JSON number line": (_mutate_line(7, lambda r: "42"), ("ok", "stray line")),
    "deep brackets": (_mutate_line(7, lambda r: "[" * 100_000), ("ok", "stray line")),
    "step 3.5": (_mutate_line(7, _set_step("3.5")), ("ok", "not an integer >= 0 (line 8: 3.5)")),
    "step -1": (_mutate_line(7, _set_step("-1")), ("ok", "not an integer >= 0 (line 8: -1)")),
    "step string": (_mutate_line(7, _set_step('"7"')), ("ok", "not an integer >= 0 (line 8: '7')")),
    "step true": (_mutate_line(7, _set_step("true")), ("ok", "not an integer >= 0 (line 8: True)")),
    "step null": (_mutate_line(7, _set_step("null")), ("ok", "not an integer >= 0 (line 8: None)")),
    "step NaN": (_mutate_line(7, _set_step("NaN")), ("ok", "not an integer >= 0 (line 8: nan)")),
    "step Infinity": (_mutate_line(7, _set_step("Infinity")), ("ok", "not an integer >= 0 (line 8: inf)")),
    "step 1e11 float": (_mutate_line(-1, _set_step("1e11")), ("ok", "past the run's 64 steps")),
    "step 2**70": (_mutate_line(-1, _set_step(str(2**70))), ("ok", "past the run's 64 steps")),
    "step 7.0 is step 7": (_mutate_line(7, _set_step("7.0")), ("ok", "steps up to 64 (complete)")),
    "kl as string": (_mutate_line(9, _set_value(KL, '"0.1"')), ("ok", "value(s) not a number")),
    "kl as true": (_mutate_line(9, _set_value(KL, "true")), ("ok", "value(s) not a number")),
    "kl as list": (_mutate_line(9, _set_value(KL, "[0.1]")), ("ok", "value(s) not a number")),
    "kl as object": (_mutate_line(9, _set_value(KL, '{"v":0.1}')), ("ok", "value(s) not a number")),
    "kl null": (_mutate_line(9, _set_value(KL, "null")), ("ok", "NaN/inf")),
    "kl NaN": (_mutate_line(9, _set_value(KL, "NaN")), ("ok", "NaN/inf")),
    "kl Infinity": (_mutate_line(9, _set_value(KL, "Infinity")), ("ok", "NaN/inf")),
    "val as string": (_mutate_line(8, _set_value(MEAN1, '"0.9"')), ("ok", "(val_acc at step 8: '0.9')")),
    "val as false": (_mutate_line(8, _set_value(MEAN1, "false")), ("ok", "(val_acc at step 8: False)")),
    "val null": (_mutate_line(8, _set_value(MEAN1, "null")), ("ok", "NaN/inf val_acc")),
    "val 1e308*10": (_mutate_line(8, _set_value(MEAN1, "1e999")), ("ok", "NaN/inf val_acc")),
    "CRLF line ends": (
        lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b.replace(b"\n", b"\r\n")))],
        ("ok", "steps up to 64 (complete)"),
    ),
    "UTF-8 BOM": (
        lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b"\xef\xbb\xbf" + b))],
        ("ok", "steps up to 64 (complete)"),
    ),
    "only step 0": (
        lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b.split(b"\n")[0] + b"\n"))],
        ("bad", "not judged: the log holds no training step"),
    ),
    "only stray lines": (
        lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b"hello\nworld\n"))],
        ("bad", "no training records found"),
    ),
    "only blank lines": (
        lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b"\n\n\n"))],
        ("bad", "no training records found"),
    ),
    "empty log": (lambda tmp: [str(_rewrite(run_copy(tmp, name="odd"), lambda b: b""))], ("bad", "empty file")),
}


def _rewrite(run_dir: Path, edit) -> Path:
    log = run_dir / "train.jsonl"
    log.write_bytes(edit(log.read_bytes()))
    return run_dir


def _encoded(encoding: str, *, bom: bytes = b""):
    def build(tmp: Path) -> list[str]:
        d = run_copy(tmp, name="odd")
        (d / "train.jsonl").write_bytes(bom + (STABLE / "train.jsonl").read_text().encode(encoding))
        return [str(d / "train.jsonl")]

    return build


def _bytes_log(data: bytes, name: str = "train.jsonl"):
    def build(tmp: Path) -> list[str]:
        d = run_copy(tmp, name="odd")
        (d / "train.jsonl").unlink()
        (d / name).write_bytes(data)
        return [str(d / name)]

    return build


_LATIN = "\n".join([*lines_of(STABLE / "train.jsonl")[:5], "Größe: ü", *lines_of(STABLE / "train.jsonl")[5:]])
ENCODING_CASES = {
    "UTF-16": (_encoded("utf-16"), ("bad", "not UTF-8; UTF-16?")),
    "UTF-16-LE no BOM": (_encoded("utf-16-le"), ("bad", "not UTF-8; UTF-16?")),
    "UTF-16-BE no BOM": (_encoded("utf-16-be"), ("bad", "not UTF-8; UTF-16?")),
    "UTF-32": (_encoded("utf-32"), ("bad", "not UTF-8")),
    "latin-1 line": (_bytes_log(_LATIN.encode("latin-1")), ("bad", ":6: not UTF-8 (byte 0xf6)")),
    "cp1252 quote": (_bytes_log("\u201cstep\u201d\n".encode("cp1252")), ("bad", ":1: not UTF-8")),
    "gzip bytes": (_bytes_log(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4), ("bad", "not UTF-8")),
    "random binary": (_bytes_log(bytes((i * 37) % 256 for i in range(5000))), ("bad", "not UTF-8")),
    "UTF-16 console log": (
        _bytes_log("step:1 - actor/kl_loss:0.1\nstep:2 - actor/kl_loss:0.2\n".encode("utf-16"), "job.log"),
        ("bad", "not UTF-8; UTF-16?"),
    ),
    "UTF-16 wandb CSV": (_bytes_log("_step,actor/kl_loss\n1,0.1\n".encode("utf-16"), "h.csv"), ("bad", "UTF-16?")),
    "UTF-8 BOM console log": (
        _bytes_log(b"\xef\xbb\xbf" + b"step:1 - actor/kl_loss:0.1 - critic/score/mean:0.5\n", "job.log"),
        ("ok", "read as verl console"),
    ),
}


def _with_run_yaml(text: str, src: Path = STABLE):
    def build(tmp: Path) -> list[str]:
        return [str(run_copy(tmp, src, name="odd", run_yaml=text))]

    return build


def textwrap_indent(text: str) -> str:
    return "".join("  " + line + "\n" for line in text.splitlines())


def _dir_run_yaml(d: Path) -> Path:
    (d / "run.yaml").unlink()
    (d / "run.yaml").mkdir()
    return d


def _with_run_yaml_bytes(data: bytes):
    def build(tmp: Path) -> list[str]:
        d = run_copy(tmp, name="odd")
        (d / "run.yaml").write_bytes(data)
        return [str(d)]

    return build


GOOD = "N: 32\nTb: 1.0\nsteps: 64\nval_every: 8\n"
LAUGHS = "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)
RUN_YAML_CASES = {
    "flat, hand-written": (_with_run_yaml(GOOD), ("ok", "N=32, Tb=1.0 (run.yaml")),
    "under settings:": (_with_run_yaml("settings:\n" + textwrap_indent(GOOD)), ("ok", "N=32, Tb=1.0 (run.yaml")),
    # no settings: the log gives N (its refreshes) but not Tb, which the run is then refused for
    "empty file": (_with_run_yaml(""), ("bad", "missing settings: Tb")),
    "null document": (_with_run_yaml("null\n"), ("bad", "missing settings: Tb")),
    "comments only": (_with_run_yaml("# nothing\n"), ("bad", "missing settings: Tb")),
    "BOM": (_with_run_yaml("\ufeff" + GOOD), ("ok", "N=32, Tb=1.0 (run.yaml")),
    "unknown keys kept out": (_with_run_yaml(GOOD + "notes: hello\nkey: mine\n"), ("ok", "N=32")),
    "invalid YAML": (_with_run_yaml("N: [32\n"), ("bad", "not valid YAML")),
    "tab indentation": (_with_run_yaml("settings:\n\tN: 32\n"), ("bad", "not valid YAML")),
    "a list": (_with_run_yaml("- 1\n- 2\n"), ("bad", "a list; expected a mapping")),
    "a scalar": (_with_run_yaml("42\n"), ("bad", "a int; expected a mapping")),
    "a string": (_with_run_yaml("hello\n"), ("bad", "a str; expected a mapping")),
    "settings: null": (_with_run_yaml("settings:\n"), ("bad", ":settings: null; expected a mapping")),
    "settings: list": (_with_run_yaml("settings: [1]\n"), ("bad", ":settings: a list")),
    "settings: scalar": (_with_run_yaml("settings: 3\n"), ("bad", ":settings: a int")),
    "python tag": (_with_run_yaml("N: !!python/object/apply:os.system ['echo hi']\n"), ("bad", "not valid YAML")),
    "custom tag": (_with_run_yaml("N: !thing 3\n"), ("bad", "not valid YAML")),
    "billion laughs": (_with_run_yaml(LAUGHS + "N: *i\n"), ("bad", ":N: more than 10000 values")),
    "anchor cycle": (_with_run_yaml("N: &x [*x]\n"), ("bad", ":N: refers to itself")),
    "N: abc": (_with_run_yaml("N: abc\nTb: 1.0\n"), ("bad", ":N: 'abc' is not valid")),
    "N: 3.5": (_with_run_yaml("N: 3.5\nTb: 1.0\n"), ("bad", ":N: 3.5 is not valid")),
    "N: -5": (_with_run_yaml("N: -5\nTb: 1.0\n"), ("bad", ":N: -5 is not valid")),
    "N: true": (_with_run_yaml("N: true\nTb: 1.0\n"), ("bad", ":N: True is not valid")),
    "N: null": (_with_run_yaml("N: null\nTb: 1.0\n"), ("bad", ":N: None is not valid")),
    "N: a list": (_with_run_yaml("N: [8, 16]\nTb: 1.0\n"), ("bad", ":N: a list")),
    "N: a mapping": (_with_run_yaml("N: {a: 1}\nTb: 1.0\n"), ("bad", ":N")),
    "Tb: 0": (_with_run_yaml("N: 32\nTb: 0\n"), ("bad", ":Tb: 0 is not valid")),
    "Tb: -1": (_with_run_yaml("N: 32\nTb: -1\n"), ("bad", ":Tb: -1 is not valid")),
    "Tb: 5": (_with_run_yaml("N: 32\nTb: 5\n"), ("bad", ":Tb: 5 is not valid")),
    "Tb: .nan": (_with_run_yaml("N: 32\nTb: .nan\n"), ("bad", ":Tb: not a finite number")),
    "Tb: .inf": (_with_run_yaml("N: 32\nTb: .inf\n"), ("bad", ":Tb: not a finite number")),
    "Tb: text": (_with_run_yaml("N: 32\nTb: hot\n"), ("bad", ":Tb: 'hot' is not valid")),
    "steps: -10": (_with_run_yaml("N: 32\nTb: 1.0\nsteps: -10\n"), ("bad", ":steps: -10 is not valid")),
    "steps: 0": (_with_run_yaml("N: 32\nTb: 1.0\nsteps: 0\n"), ("bad", ":steps: 0 is not valid")),
    "steps: 1e3 text": (_with_run_yaml("N: 32\nTb: 1.0\nsteps: 1e3\n"), ("bad", "YAML reads 1e3 as text")),
    "steps shorter than the log": (_with_run_yaml("N: 32\nTb: 1.0\nsteps: 40\n"), ("ok", "past the run's 40 steps")),
    "val_every: 0": (_with_run_yaml("N: 32\nTb: 1.0\nval_every: 0\n"), ("bad", ":val_every: 0 is not valid")),
    "seed: -1": (_with_run_yaml("N: 32\nTb: 1.0\nseed: -1\n"), ("bad", ":seed: -1 is not valid")),
    "lr: 1": (_with_run_yaml("N: 32\nTb: 1.0\nlr: 1\n"), ("bad", ":lr: 1 is not valid")),
    "correction: bogus": (_with_run_yaml("N: 32\nTb: 1.0\ncorrection: x\n"), ("bad", ":correction: 'x' is not valid")),
    "a directory": (
        lambda tmp: [str(_dir_run_yaml(run_copy(tmp, name="odd")))],
        ("bad", "run.yaml: a directory"),
    ),
    "latin-1 run.yaml": (_with_run_yaml_bytes("N: 32\n# Größe\n".encode("latin-1")), ("bad", "run.yaml: not UTF-8")),
}


def _tree(build_links):
    """A directory holding the stable run (``top/a/run``), shaped further by ``build_links(top)``."""

    def build(tmp: Path) -> list[str]:
        top = tmp / "top"
        run_copy(top, name="a/run")
        return build_links(top)

    return build


def _links(*pairs: tuple[str, str]):
    def shape(top: Path) -> list[str]:
        for link, target in pairs:
            (top / link).parent.mkdir(parents=True, exist_ok=True)
            (top / link).symlink_to(target)
        return [str(top)]

    return shape


def _mkdir(d: Path, files: dict[str, str] | None = None) -> Path:
    d.mkdir(parents=True)
    for name, text in (files or {}).items():
        (d / name).write_text(text)
    return d


def _utf16_in_dir(tmp: Path) -> list[str]:
    """A console log saved as UTF-16 (PowerShell's redirection), in a directory given to analyze."""
    d = _mkdir(tmp / "logs")
    (d / "job.log").write_bytes("step:1 - actor/entropy:0.5 - training/global_step:1\n".encode("utf-16"))
    return [str(d)]


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


DIR_CASES = {
    "latest -> .": (_tree(_links(("latest", "."))), ("ok", "| 0/1 |")),
    "a/back -> ..": (_tree(_links(("a/back", ".."))), ("ok", "| 0/1 |")),
    "two links up": (_tree(_links(("a/u1", ".."), ("a/u2", ".."), ("a/run/u3", "../.."))), ("ok", "| 0/1 |")),
    "link to the run": (_tree(_links(("alias", "a/run"))), ("ok", "| 0/1 |")),
    "link to the log": (_tree(_links(("copy.jsonl", "a/run/train.jsonl"))), ("ok", "| 0/1 |")),
    "link to the root's parent": (_tree(_links(("up", "../.."))), ("ok", "| 0/1 |")),
    "self loop link": (_tree(_links(("loop", "loop"))), ("ok", "| 0/1 |")),
    "broken link": (_tree(_links(("gone", "nowhere"))), ("ok", "| 0/1 |")),
    "the dir twice": (_tree(lambda top: [str(top), str(top)]), ("ok", "| 0/1 |")),
    "dir and its log": (_tree(lambda top: [str(top / "a/run"), str(top / "a/run/train.jsonl")]), ("ok", "| 0/1 |")),
    "dir with a trailing slash and without": (
        _tree(lambda top: [str(top / "a/run") + "/", str(top / "a/run")]),
        ("ok", "| 0/1 |"),
    ),
    "relative and absolute": (
        _tree(lambda top: [str(top / "a/run"), os.path.relpath(top / "a/run")]),
        ("ok", "| 0/1 |"),
    ),
    "a dotted path": (_tree(lambda top: [str(top / "a/run/../run")]), ("ok", "| 0/1 |")),
    "a UTF-16 console log in a directory": (_utf16_in_dir, ("bad", "job.log: not UTF-8; UTF-16?")),
    "empty directory": (lambda tmp: [str(_mkdir(tmp / "empty"))], ("bad", "a directory holding no run log")),
    "only a run.yaml": (
        lambda tmp: [str(_mkdir(tmp / "cfg", {"run.yaml": GOOD}))],
        ("bad", "a directory holding no run log"),
    ),
    "train.jsonl is a directory": (
        lambda tmp: [str(_mkdir(tmp / "r" / "train.jsonl").parent)],
        ("bad", "a directory holding no run log"),
    ),
    "missing path": (lambda tmp: [str(tmp / "absent")], ("bad", "no such file")),
    "a fifo is not read": (lambda tmp: [_fifo(tmp / "pipe.jsonl")], ("bad", "not a regular file")),
}


def _console(tmp: Path, lines: list[str]) -> list[str]:
    rows = [json.loads(x) for x in lines_of(PLAIN / "train.jsonl")]
    text = [f"step:{r['step']} - " + " - ".join(f"{k}:{v}" for k, v in r["data"].items()) for r in rows]
    text += lines
    log = tmp / "job.log"
    log.write_text("\n".join(text) + "\n")
    return [str(log), "--N", "1", "--Tb", "1"]


def _wandb(tmp: Path, edit) -> list[str]:
    import pandas as pd

    rows = [json.loads(x) for x in lines_of(PLAIN / "train.jsonl")]
    df = pd.DataFrame([{"_step": r["step"], **r["data"]} for r in rows])
    df = edit(df) if edit is not None else df
    log = tmp / "history.csv"
    if isinstance(df, str):
        log.write_text(df)
    else:
        df.to_csv(log, index=False)
    return [str(log), "--N", "1", "--Tb", "1"]


def _set_cell(col: str, row: int, value):
    def edit(df):
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
        return df

    return edit


def _metrics_csv(tmp: Path, col: str, row: int, value: str) -> list[str]:
    d = tmp / "table"
    d.mkdir()
    assert main(["parse", str(STABLE / "train.jsonl"), "--out", str(d / "metrics.csv")]) == 0
    text = (d / "metrics.csv").read_text().splitlines()
    cells = text[row].split(",")
    cells[text[0].split(",").index(col)] = value
    text[row] = ",".join(cells)
    (d / "metrics.csv").write_text("\n".join(text) + "\n")
    return [str(d), "--N", "32", "--Tb", "1"]


def _mlflow(tmp: Path, edit) -> list[str]:
    shutil.copytree(ROOT / "tests" / "fixtures" / "own-logs" / "mlruns", tmp / "mlruns")
    run = next(p.parent for p in (tmp / "mlruns").rglob("meta.yaml") if (p.parent / "metrics").is_dir())
    metric = next(p for p in sorted((run / "metrics").rglob("*")) if p.is_file())
    edit(metric)
    return [str(run), "--N", "1", "--Tb", "1"]


def _append(text: str):
    return lambda f: f.write_text(f.read_text() + text)


FORMAT_CASES = {
    "console: a string value": (
        lambda t: _console(t, ["step:65 - actor/kl_loss:abc"]),
        ("ok", "value(s) not a number"),
    ),
    "console: True value": (lambda t: _console(t, ["step:65 - actor/kl_loss:True"]), ("ok", "value(s) not a number")),
    "console: step 1e11": (
        lambda t: _console(t, ["step:100000000000 - actor/kl_loss:0.1 - training/global_step:1"]),
        ("ok", "at or past 10000000"),
    ),
    "console: step 3.5 line skipped": (
        lambda t: _console(t, ["step:3.5 - actor/kl_loss:0.1"]),
        ("ok", "steps up to 64"),
    ),
    "console: junk lines": (
        lambda t: _console(t, ["Traceback (most recent call last):", "  oops"]),
        ("ok", "verl console"),
    ),
    "wandb: text in a metric": (
        lambda t: _wandb(t, _set_cell("actor/entropy", 5, "abc")),
        ("ok", "1 value(s) not a number, skipped (actor/entropy at step 5: 'abc')"),
    ),
    "wandb: text step": (
        lambda t: _wandb(t, _set_cell("_step", 5, "five")),
        ("ok", "1 line(s) with a step that is not an integer >= 0 (line 7: 'five')"),
    ),
    "wandb: fractional step": (lambda t: _wandb(t, _set_cell("_step", 5, 5.5)), ("ok", "not an integer >= 0")),
    "wandb: negative step": (lambda t: _wandb(t, _set_cell("_step", 5, -5)), ("ok", "not an integer >= 0")),
    "wandb: step 1e11": (lambda t: _wandb(t, _set_cell("_step", 64, 10**11)), ("ok", "at or past 10000000")),
    "wandb: ragged row": (lambda t: _wandb(t, lambda df: "_step,a\n1,2\n3,4,5,6\n"), ("bad", ":3: not a CSV table")),
    "wandb: header only": (lambda t: _wandb(t, lambda df: "_step,actor/kl_loss\n"), ("bad", "no training records")),
    "metrics.csv: text val_acc": (
        lambda t: _metrics_csv(t, "val_acc", 9, "oops"),
        ("bad", "metrics.csv:10: val_acc: 'oops' is not a number"),
    ),
    "metrics.csv: text kl": (lambda t: _metrics_csv(t, "kl", 3, "high"), ("bad", ":4: kl: 'high' is not a number")),
    "metrics.csv: text step": (lambda t: _metrics_csv(t, "step", 3, "three"), ("bad", ":4: step: 'three'")),
    "metrics.csv: step 1e11": (lambda t: _metrics_csv(t, "step", 64, "100000000000"), ("bad", ":65: step:")),
    "metrics.csv: negative step": (lambda t: _metrics_csv(t, "step", 3, "-3"), ("bad", ":4: step: -3")),
    "metrics.csv: fractional step": (lambda t: _metrics_csv(t, "step", 3, "2.5"), ("bad", ":4: step: 2.5")),
    "mlflow: a garbage line": (lambda t: _mlflow(t, _append("garbage here\n")), ("ok", "not 'timestamp value step'")),
    "mlflow: a text value": (lambda t: _mlflow(t, _append("1 abc 3\n")), ("ok", "not 'timestamp value step'")),
    "mlflow: a negative step": (lambda t: _mlflow(t, _append("1 0.5 -3\n")), ("ok", "not 'timestamp value step'")),
    "mlflow: a fractional step": (lambda t: _mlflow(t, _append("1 0.5 2.5\n")), ("ok", "not 'timestamp value step'")),
    "mlflow: step 1e11": (lambda t: _mlflow(t, _append("1 0.5 100000000000\n")), ("ok", "at or past 10000000")),
    "mlflow: an empty metric file": (lambda t: _mlflow(t, lambda f: f.write_text("")), ("ok", "MLflow")),
    "mlflow: latin-1 metric file": (
        lambda t: _mlflow(t, lambda f: f.write_bytes(b"1 0.5 \xff\n")),
        ("bad", "not UTF-8"),
    ),
}


def _group_case(*flags: str, rows: int | None = None):
    def build(tmp: Path) -> list[str]:
        other = run_copy(tmp, name="other", run_yaml="N: 8\nTb: 1.0\nsteps: 64\nval_every: 8\n")
        hot = run_copy(tmp, name="hot", run_yaml="N: 4\nTb: 0.5\nsteps: 64\nval_every: 8\n")
        return [str(STABLE), str(other), str(hot), *flags]

    return build


def _twin_case(line: str):
    """The stable run beside a copy whose run.yaml writes one setting another way, pooled as one arm."""

    def build(tmp: Path) -> list[str]:
        settings = {"N": "4", "Tb": "1.0", "steps": "64", "val_every": "8"}
        key = line.split(":")[0]
        text = "".join(f"{k}: {v}\n" for k, v in settings.items() if k != key) + line + "\n"
        twin = run_copy(tmp, name="twin", run_yaml=text)
        return [str(STABLE), str(twin), "--group", "g=*[et][bw]*"]

    return build


GROUP_CASES = {
    "a glob matching nothing": (_group_case("--group", "x=*zzz*"), ("flag", "--group x=*zzz*: matches none")),
    "no '='": (_group_case("--group", "justtext"), ("flag", "write LABEL=GLOB")),
    "empty glob": (_group_case("--group", "x="), ("flag", "write LABEL=GLOB")),
    "empty label": (_group_case("--group", "=*"), ("flag", "write LABEL=GLOB")),
    "mixing N": (_group_case("--group", "g=*"), ("bad", "--group g=*: pools runs of different N")),
    "mixing Tb": (_group_case("--group", "g=[sh]*"), ("bad", "pools runs of different Tb")),
    "one of two globs matches nothing": (
        _group_case("--group", "g=*stable*", "--group", "h=*nope*"),
        ("flag", "--group h=*nope*: matches none"),
    ),
    "a group of one": (_group_case("--group", "g=*stable*"), ("ok", "| g |")),
    "Tb 1 and Tb 1.0 are one arm": (_twin_case("Tb: 1"), ("ok", "| g | 1.0 | 4 |")),
    # JSON Schema, and so a study, takes 4.0 for the integer 4
    "N 4 and N 4.0 are one arm": (_twin_case("N: 4.0"), ("ok", "| g |")),
}


def _flags(*flags: str):
    return lambda tmp: [str(STABLE), *flags]


# the settings given as flags, refused by the rules run.yaml and a study's runs are refused by
FLAG_CASES = {
    "--N -5": (_flags("--N", "-5"), ("flag", "--N: -5 is not valid; allowed: integer >= 1")),
    "--N 0": (_flags("--N", "0"), ("flag", "--N: 0 is not valid")),
    "--Tb 0": (_flags("--Tb", "0"), ("flag", "--Tb: 0.0 is not valid")),
    "--Tb -1": (_flags("--Tb", "-1"), ("flag", "--Tb: -1.0 is not valid")),
    "--Tb nan": (_flags("--Tb", "nan"), ("flag", "--Tb: not a finite number")),
    "--Tb inf": (_flags("--Tb", "inf"), ("flag", "--Tb: not a finite number")),
    "--steps -10": (_flags("--steps", "-10"), ("flag", "--steps: -10 is not valid")),
    "--val-every 0": (_flags("--val-every", "0"), ("flag", "--val-every: 0 is not valid")),
}


FAMILIES = {
    "jsonl": JSONL_CASES,
    "encoding": ENCODING_CASES,
    "run.yaml": RUN_YAML_CASES,
    "directory": DIR_CASES,
    "format": FORMAT_CASES,
    "group": GROUP_CASES,
    "flags": FLAG_CASES,
}
CASES = [(f"{fam}: {name}", build, want) for fam, cases in FAMILIES.items() for name, (build, want) in cases.items()]


@pytest.mark.parametrize(("case", "build", "want"), CASES, ids=[c[0] for c in CASES])
def test_every_odd_input_gets_one_line_and_the_good_one_is_still_analysed(
    tmp_path: Path, capsys, monkeypatch, case: str, build, want: tuple[str, str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = build(tmp_path)
    odd = [a for a in argv if not a.startswith("-") and a not in (str(STABLE), str(DEGRADES))][:1]
    flags = [a for a in argv if a.startswith("--")]
    good = [] if "--N" in flags else [str(DEGRADES)]  # a run of its own settings beside the odd one
    rc, out, err = cli(capsys, "analyze", *good, *argv)
    kind, text = want
    lines = error_lines(err)
    if kind == "ok":
        assert rc == 0 and lines == [], err
        assert text in out, out
    elif kind == "bad":
        assert rc == 1 and len(lines) == 1, err
        assert text in lines[0], lines[0]
        if odd and "--group" not in flags:
            assert lines[0].startswith(f"coolsampler analyze: {odd[0].rstrip('/')}") or "run.yaml" in lines[0]
    else:
        assert rc == 2 and len(lines) == 1 and text in lines[0], err
        return
    if good:
        assert any(DEGRADES_ARM in row for row in table1(out)), out


def test_the_generated_cases_cover_every_family_and_are_enough() -> None:
    assert len(CASES) >= 100
    assert all(len(cases) >= 5 for cases in FAMILIES.values())

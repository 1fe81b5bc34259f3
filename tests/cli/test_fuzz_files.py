"""The commands against odd and hostile input files and output flags, run in-process.

Every case is a file or flag a researcher could hand the tools by mistake (or an attacker on purpose):
study, claims and overlay files that are cyclic, bombs, duplicated, tagged, binary, empty or
directories; output flags naming a directory, a file's child, a read-only place or a bad format; a
``--study NAME`` with a folder of that name where the command runs; and numeric flags and logged
step times that are negative, zero, NaN, infinite or huge. Each must give one line,
``coolsampler <cmd>: <file>[:<line>]: <problem>`` (argparse's ``error:`` line for a bad flag value),
exit 2 and no traceback, before any work is done; where a command reads several inputs, the good
ones are still read. The cases that once hung or recursed assert they are refused within a second.

The ``test_regression_*`` tests each pin one problem that today's code (before the safe YAML reader,
the output check and the numeric checks) got wrong.
"""

from __future__ import annotations

import json
import math
import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from coolsampler.cli import main
from coolsampler.spec.inputs import one_line
from tests.cli.test_cli_edges import bare_log
from tests.cli.test_status_plan import write_log

MINI = (
    "name: mini\n"
    "profile: cpu\n"
    "defaults: {model: toy-qwen2, task: arith, lr: 1.0e-4, Tl: 1.0, correction: tis, Tb: 1.0}\n"
    "runs:\n"
    "  - {N: 4, seed: 1}\n"
    "  - {N: 32, seed: 2}\n"
)
KEYS = ("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1", "toy-qwen2/arith/N32_lr1e-4_tis_Tb1_Tl1_s2")


@dataclass
class Result:
    rc: int | str | None
    out: str
    err: str
    seconds: float


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """``coolsampler ARGV`` in-process: its exit status, stdout, stderr (with any traceback that escaped
    ``main``, so that a crash fails an assertion instead of erroring the test) and wall time."""
    capsys.readouterr()
    tb = ""
    t0 = time.process_time()  # this process's CPU time: a bound that holds on a loaded 2-core machine
    try:
        rc: int | str | None = main(list(argv))
    except SystemExit as e:
        rc = e.code
    except Exception:  # what a user would see as a traceback
        rc, tb = "raised", traceback.format_exc()
    seconds = time.process_time() - t0
    out, err = capsys.readouterr()
    return Result(rc, out, err + tb, seconds)


def assert_one_line(r: Result, command: str, file: str | Path | None = None, *, quiet: bool = True, rc: int = 2) -> str:
    """Exit ``rc`` (2), no traceback, and the refusal in one line of stderr: ``coolsampler COMMAND: `` naming
    ``file``; ``quiet``: nothing else on stderr or stdout (the refusal came before any work)."""
    text = r.out + r.err
    assert "Traceback" not in text, text
    assert r.rc == rc, (r.rc, text)
    lines = [x for x in r.err.splitlines() if x.startswith(f"coolsampler {command}: ")]
    assert len(lines) == 1, r.err
    if file is not None:
        assert str(file) in lines[0], lines[0]
    if quiet:
        assert r.err.strip() == lines[0] and not r.out, text
    return lines[0]


def assert_flag_refused(r: Result, command: str, flag: str) -> str:
    """A bad flag value: argparse's own refusal (usage, then ``coolsampler CMD: error: argument FLAG: ...``),
    exit 2, no traceback, nothing done."""
    assert "Traceback" not in r.out + r.err, r.out + r.err
    assert r.rc == 2, (r.rc, r.out, r.err)
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"coolsampler {command}: error: argument {flag}"), r.err
    assert not r.out
    return last


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Import every command these cases run once, so a case's time is its own work, not first imports."""
    import coolsampler.cli.claims  # noqa: F401
    import coolsampler.cli.memory  # noqa: F401
    import coolsampler.cli.parse  # noqa: F401
    import coolsampler.cli.plan  # noqa: F401
    import coolsampler.cli.runs  # noqa: F401


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def laughs(levels: int = 9) -> str:
    """The billion-laughs file: each anchor a list of nine aliases of the one before (9**9 strings)."""
    lines = ["name: bomb", 'lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    lines.append(f"runs: *l{levels - 1}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- regressions


def test_regression_study_anchor_cycle_is_one_line_not_a_recursion_error(tmp_path: Path, capsys) -> None:
    """A study whose runs alias themselves: today a RecursionError traceback from the schema check."""
    study = write(tmp_path / "cycle.yaml", MINI.replace("runs:\n", "runs: &r\n") + "  - *r\n")
    r = cli(capsys, "runs", "--study", str(study))
    line = assert_one_line(r, "runs", study)
    assert "cycle" in line and r.seconds < 1, (line, r.seconds)


@pytest.mark.timeout(30)
def test_regression_study_alias_bomb_is_refused_within_a_second(tmp_path: Path, capsys) -> None:
    """A 400-byte billion-laughs study: today `runs` walks its 387 million strings for minutes."""
    study = write(tmp_path / "bomb.yaml", laughs())
    assert study.stat().st_size < 1024
    r = cli(capsys, "runs", "--study", str(study))
    line = assert_one_line(r, "runs", study)
    assert "expand" in line and r.seconds < 1, (line, r.seconds)


def test_regression_study_duplicate_runs_key_is_refused(tmp_path: Path, capsys) -> None:
    """A second ``runs:`` block: today YAML keeps the last one and the first block's runs are silently gone."""
    study = write(tmp_path / "dup.yaml", MINI + "runs:\n  - {N: 8, seed: 3}\n")
    r = cli(capsys, "runs", "--study", str(study))
    line = assert_one_line(r, "runs", f"{study}:7")
    assert "duplicate key 'runs'" in line and "line 4" in line


def test_regression_figure_naming_a_directory_is_refused_before_the_report(tmp_path: Path, capsys) -> None:
    """``--figure`` naming a directory: today the report is printed, then a traceback from matplotlib."""
    log = bare_log(tmp_path / "run.jsonl", 30)
    (tmp_path / "fig.png").mkdir()
    r = cli(capsys, "analyze", str(log), "--figure", str(tmp_path / "fig.png"))
    assert "directory" in assert_one_line(r, "analyze", tmp_path / "fig.png")


def test_regression_out_in_an_unwritable_place_is_refused_before_the_report(tmp_path: Path, capsys) -> None:
    """``--out`` where nothing can be written (under a file; root can write anywhere else): today the
    tables are printed, then a traceback."""
    log = bare_log(tmp_path / "run.jsonl", 30)
    r = cli(capsys, "analyze", str(log), "--out", "/etc/passwd/tables")
    assert_one_line(r, "analyze", "/etc/passwd/tables")


def test_regression_bad_figure_extension_is_refused_before_any_table_is_written(tmp_path: Path, capsys) -> None:
    """``--figure x.txt`` with ``--out``: today the tables are written, then the extension is refused."""
    log = bare_log(tmp_path / "run.jsonl", 30)
    r = cli(capsys, "analyze", str(log), "--out", str(tmp_path / "tables"), "--figure", str(tmp_path / "f.txt"))
    assert ".png" in assert_one_line(r, "analyze", tmp_path / "f.txt")
    assert not (tmp_path / "tables").exists()


def test_regression_study_name_finds_the_shipped_study_past_a_folder_of_that_name(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """``--study paper`` where the current directory has a ``paper/`` folder: today IsADirectoryError."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "paper").mkdir()
    r = cli(capsys, "runs", "--study", "paper")
    assert r.rc == 0 and "qwen2.5-math-1.5b/gsm8k/" in r.out, r.out + r.err


def test_regression_plan_refuses_negative_step_times_from_a_log(tmp_path: Path, capsys) -> None:
    """A finished run whose log has negative step times: today plan prints negative hours."""
    study = write(tmp_path / "mini.yaml", MINI)
    run = tmp_path / "results" / "runs" / KEYS[0]
    write_log(run / "train.jsonl", range(1, 5), t=-30.0)
    (run / "run.yaml").write_text(yaml.safe_dump({"settings": {"N": 4}, "platform": "cpu"}))
    r = cli(capsys, "plan", "--study", str(study), "--results", str(tmp_path / "results"))
    assert "Traceback" not in r.err and r.rc == 2, (r.rc, r.out, r.err)
    assert not re.search(r"(?<![\w.])-\d", r.out), r.out  # no negative hours, GPU-hours or wall time
    line = assert_one_line(r, "plan", run / "train.jsonl", quiet=False)
    assert "timing_s/step" in line and ":2:" in line  # the first training step's line


def test_regression_plan_refuses_a_negative_parallel(capsys) -> None:
    """``--parallel -3``: today accepted (a plan scheduled on no slot)."""
    assert_flag_refused(cli(capsys, "plan", "--parallel", "-3"), "plan", "--parallel")


@pytest.mark.parametrize("command", ["plan", "memory"])
def test_regression_gpu_memory_nan_is_refused_as_a_flag(command: str, capsys) -> None:
    """``--gpu-memory-gib nan``: today 'cannot convert float NaN to integer', from deep in the model."""
    line = assert_flag_refused(cli(capsys, command, "--study", "paper", "--gpu-memory-gib", "nan"), command, "--gpu")
    assert "nan" in line


# --------------------------------------------------------------------------------------- study files

BOMB_MAPS = "name: m\n" + "".join(
    f"m{i}: &m{i} {{a: *m{i - 1}, b: *m{i - 1}, c: *m{i - 1}, d: *m{i - 1}}}\n" if i else "m0: &m0 {a: 1}\n"
    for i in range(12)
)
BOMB_WIDE = "name: w\nw0: &w0 [x, x]\n" + "".join(f"w{i}: &w{i} [*w{i - 1}, *w{i - 1}]\n" for i in range(1, 31))
RUN = "  - {N: 4, seed: 1}\n"

# name -> (content, the words the line must hold, bounded: refused within a second)
STUDY_CASES: dict[str, tuple[str | bytes, str, bool]] = {
    # anchors: cycles at several depths, bombs of lists, mappings and doubling
    "cycle-runs": (MINI.replace("runs:\n", "runs: &r\n") + "  - *r\n", "cycle", True),
    "cycle-self-list": ("name: c\nruns: &r [*r]\n", "cycle", True),
    "cycle-mapping": ("name: c\ndefaults: &d {x: *d}\nruns: [{N: 4}]\n", "cycle", True),
    "cycle-deep": ("name: c\nruns:\n  - {N: 4, seed: &s [1, [2, [*s]]]}\n", "cycle", True),
    "cycle-via-two": ("name: c\na: &a [&b [*a]]\nruns: *a\n", "cycle", True),
    "bomb-laughs": (laughs(), "expand", True),
    "bomb-laughs-in-run": (laughs().replace("runs: *l8", "runs:\n  - {N: 4, seed: *l8}"), "expand", True),
    "bomb-mappings": (BOMB_MAPS + "runs: [*m11]\n", "expand", True),
    "bomb-doubling": (BOMB_WIDE + "runs: *w30\n", "expand", True),
    "bomb-unused": (laughs().replace("runs: *l8", "runs: [{N: 4}]"), "expand", True),
    # duplicate keys at every depth
    "dup-runs": (MINI + "runs:\n  - {N: 8, seed: 3}\n", "duplicate key 'runs'", False),
    "dup-name": (MINI + "name: other\n", "duplicate key 'name'", False),
    "dup-defaults-key": (MINI.replace("lr: 1.0e-4,", "lr: 1.0e-4, lr: 2.0e-4,"), "duplicate key 'lr'", False),
    "dup-in-run": (MINI.replace("{N: 4, seed: 1}", "{N: 4, seed: 1, N: 8}"), "duplicate key 'N'", False),
    "dup-recipe": (MINI + "recipe:\n  kl_coef: 0.1\n  kl_coef: 0.2\n", "duplicate key 'kl_coef'", False),
    "dup-deep": (MINI + "figures:\n  fig1:\n    a:\n      Tb: 1.0\n      Tb: 0.8\n", "duplicate key 'Tb'", False),
    "dup-quoted": (MINI + '"runs": []\n', "duplicate key 'runs'", False),
    "dup-int": ("name: d\nruns: [{N: 4}]\nx: {1: a, 1: b}\n", "duplicate key '1'", False),
    # tags: none is executed, none is allowed
    "tag-apply": ('name: t\nruns: !!python/object/apply:os.system ["touch /tmp/pwned"]\n', "tag", False),
    "tag-name": ("name: !!python/name:os.system t\nruns: []\n", "tag", False),
    "tag-new": ("name: t\nruns: !!python/object/new:list []\n", "tag", False),
    "tag-custom": ("name: !study t\nruns: []\n", "tag", False),
    "tag-binary": ("name: !!binary dGVzdA==\nruns: []\n", "tag", False),
    "tag-set": ("name: t\nruns: !!set {a, b}\n", "tag", False),
    "tag-omap": ("name: t\nruns: !!omap [a: 1]\n", "tag", False),
    "tag-on-key": ("name: t\n!foo runs: []\n", "tag", False),
    # not a study: wrong shapes and types (the study's own validation, one line each)
    "top-list": ("- name: x\n- runs: []\n", "mapping", False),
    "top-scalar": ("just words\n", "mapping", False),
    "runs-string": ("name: s\nruns: none\n", "runs", False),
    "name-list": (MINI.replace("name: mini", "name: [a, b]"), "name", False),
    "N-text": (MINI.replace("N: 4,", "N: four,"), "N", False),
    "seed-float": (MINI.replace("seed: 1}", "seed: 1.5}"), "seed", False),
    # not YAML at all
    "unclosed": ("name: u\nruns: [{N: 4}\n", "not valid YAML", False),
    "tab-indent": ("name: t\nruns:\n\t- {N: 4}\n", "not valid YAML", False),
    "two-colons": ("name: a: b\nruns: []\n", "not valid YAML", False),
    "jsonl": ('{"step": 1, "data": {}}\n{"step": 2, "data": {}}\n', "not valid YAML", False),
    "two-documents": (MINI + "---\n" + MINI, "not valid YAML", False),
    "deep-nesting": ("name: d\nruns: " + "[" * 150 + "]" * 150 + "\n", "nested", True),
    "deeper-nesting": ("name: d\nruns: " + "[" * 5000 + "]" * 5000 + "\n", "", True),
    # empty, binary, other encodings
    "empty": ("", "empty", False),
    "blank": ("\n   \n\n", "empty", False),
    "comments-only": ("# a study\n# to come\n", "empty", False),
    "binary-png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "", False),
    "nul-bytes": (b"name: x\x00\nruns: []\n", "", False),
    "latin-1": ("name: caf\xe9\nruns: []\n".encode("latin-1"), "UTF-8", False),
    "utf-16": ("name: u\nruns: []\n".encode("utf-16"), "", False),
}


@pytest.mark.parametrize("case", sorted(STUDY_CASES))
def test_fuzz_study_file(case: str, tmp_path: Path, capsys) -> None:
    content, words, bounded = STUDY_CASES[case]
    study = write(tmp_path / f"{case}.yaml", content)
    r = cli(capsys, "runs", "--study", str(study))
    line = assert_one_line(r, "runs", study)
    assert words in line, line
    if bounded:
        assert r.seconds < 1, r.seconds
    assert not Path("/tmp/pwned").exists()


@pytest.mark.parametrize("name", ["odd\nname.yaml", "tab\there.yaml", "esc\x1b[31m.yaml", "spaces and ünïcode.yaml"])
def test_fuzz_study_with_an_odd_file_name(name: str, tmp_path: Path, capsys) -> None:
    """A file name with a newline, a tab or a terminal escape is written escaped: still one line."""
    study = write(tmp_path / name, MINI + "runs: []\n")
    r = cli(capsys, "runs", "--study", str(study))
    line = assert_one_line(r, "runs", None)
    assert "duplicate key 'runs'" in line and one_line(name) in line and "\n" not in line, line


def test_fuzz_study_duplicate_long_key_is_cut(tmp_path: Path, capsys) -> None:
    key = "k" * 1000  # YAML's longest plain key: 1024 characters
    study = write(tmp_path / "long.yaml", f"{MINI}{key}: 1\n{key}: 2\n")
    line = assert_one_line(cli(capsys, "runs", "--study", str(study)), "runs", study)
    assert len(line) < 400 and "kkk..." in line, len(line)


def test_fuzz_study_that_is_a_directory(tmp_path: Path, capsys) -> None:
    (tmp_path / "study.yaml").mkdir()
    r = cli(capsys, "runs", "--study", str(tmp_path / "study.yaml"))
    assert "directory" in assert_one_line(r, "runs", tmp_path / "study.yaml")


def test_fuzz_study_past_the_size_limit_is_refused_unread(tmp_path: Path, capsys) -> None:
    study = tmp_path / "huge.yaml"
    with study.open("wb") as f:  # sparse: large on paper, no time to write
        f.truncate(64 * 1024 * 1024)
    r = cli(capsys, "runs", "--study", str(study))
    assert "bytes" in assert_one_line(r, "runs", study) and r.seconds < 1


@pytest.mark.parametrize("command", ["plan", "memory"])
@pytest.mark.parametrize("case", ["cycle-runs", "bomb-laughs", "dup-runs", "tag-apply"])
def test_fuzz_study_file_in_other_commands(command: str, case: str, tmp_path: Path, capsys) -> None:
    """``plan`` and ``memory`` read a study through the same reader: the same one line, in their name."""
    study = write(tmp_path / f"{case}.yaml", STUDY_CASES[case][0])
    r = cli(capsys, command, "--study", str(study))
    assert STUDY_CASES[case][1] in assert_one_line(r, command, study)
    assert r.seconds < 1


def test_fuzz_merge_keys_and_plain_anchors_still_read(tmp_path: Path, capsys) -> None:
    """What held must keep holding: an anchor used twice and a ``<<`` merge are plain YAML, not refused."""
    text = MINI.replace("defaults: {", "defaults: &d {") + "recipe:\n  <<: {kl_coef: 0.1}\n  val_samples: 128\n"
    study = write(tmp_path / "anchors.yaml", text)
    r = cli(capsys, "runs", "--study", str(study))
    assert r.rc == 0 and r.out.split() == list(KEYS), r.out + r.err


# --------------------------------------------------------------------------------- claims and overlays

CLAIMS_CASES: dict[str, tuple[str | bytes, str]] = {
    "dup-claims": ("filters: {}\nclaims: []\nclaims: []\n", "duplicate key 'claims'"),
    "dup-in-claim": ("filters: {a: {N: 4, N: 8}}\nclaims: []\n", "duplicate key 'N'"),
    "cycle": ("filters: &f {a: *f}\nclaims: []\n", "cycle"),
    "bomb": (laughs().replace("runs:", "claims:").replace("name: bomb\n", ""), "expand"),
    "tag": ("claims: !!python/object/apply:os.system [id]\n", "tag"),
    "top-list": ("- claims\n", "mapping"),
    "binary": (b"\xff\xfe\x00\x01garbage\x00", ""),
    "not-yaml": ("claims: [\n", "not valid YAML"),
}


@pytest.mark.parametrize("case", sorted(CLAIMS_CASES))
def test_fuzz_claims_file(case: str, tmp_path: Path, capsys) -> None:
    content, words = CLAIMS_CASES[case]
    claims = write(tmp_path / f"{case}-claims.yaml", content)
    r = cli(capsys, "claims", str(tmp_path / "no-such-run"), "--claims", str(claims))
    assert words in assert_one_line(r, "claims", claims)
    assert r.seconds < 1


OVERLAY_CASES: dict[str, tuple[str | bytes, str]] = {
    "dup": ("hardware:\n  gpu_memory_gib: 80\n  gpu_memory_gib: 40\n", "duplicate key 'gpu_memory_gib'"),
    "dup-top": ("recipe: {}\nrecipe: {}\n", "duplicate key 'recipe'"),
    "cycle": ("recipe: &r {x: *r}\n", "cycle"),
    "bomb": (laughs().replace("runs:", "figures:").replace("name: bomb\n", ""), "expand"),
    "tag": ("recipe: !!python/object/apply:os.system [id]\n", "tag"),
    "list": ("- a\n- b\n", "mapping"),
    "binary": (b"\x00\x01\x02\x03", ""),
}


@pytest.mark.parametrize("case", sorted(OVERLAY_CASES))
def test_fuzz_overlay_file(case: str, tmp_path: Path, capsys) -> None:
    content, words = OVERLAY_CASES[case]
    study = write(tmp_path / "mini.yaml", MINI)
    overlay = write(tmp_path / f"{case}-overlay.yaml", content)
    r = cli(capsys, "plan", "--study", str(study), "--overlay", str(overlay))
    assert words in assert_one_line(r, "plan", overlay)
    assert r.seconds < 1


# --------------------------------------------------------------------------------------- output flags


# (command and its flags given a stand-in input that does not exist, the flag, the value's kind): the
# refusal names the output, not the input, so it came before anything was read.
def _output_argv(command: str, flag: str, value: str, tmp_path: Path) -> list[str]:
    missing = str(tmp_path / "missing-input.jsonl")
    return {
        "analyze": ["analyze", missing, flag, value],
        "parse": ["parse", missing, flag, value],
        "claims": ["claims", missing, flag, value],
        "memory": ["memory", "--measure", "999999999", flag, value],
        "acceptance": ["acceptance", flag, value],
    }[command]


def _existing_dir(tmp_path: Path, name: str) -> str:
    (tmp_path / name).mkdir()
    return str(tmp_path / name)


def _existing_file(tmp_path: Path, name: str) -> str:
    return str(write(tmp_path / name, "not a directory\n"))


OUTPUT_CASES: dict[str, tuple[str, str, object, str]] = {
    # name: (command, flag, the value (or a function of tmp_path making it), the words the line holds)
    "figure-directory": ("analyze", "--figure", lambda t: _existing_dir(t, "fig.png"), "directory"),
    "figure-under-a-file": ("analyze", "--figure", "/etc/passwd/fig.png", "not a directory"),
    "figure-in-proc": ("analyze", "--figure", "/proc/fig.png", "writ"),
    "figure-in-sys": ("analyze", "--figure", "/sys/fig.png", "writ"),
    "figure-txt": ("analyze", "--figure", "fig.txt", ".png"),
    "figure-no-suffix": ("analyze", "--figure", "figure", ".png"),
    "figure-jpeg": ("analyze", "--figure", "fig.jpeg", ".png"),
    "figure-empty": ("analyze", "--figure", "", ".png"),
    "analyze-out-file": ("analyze", "--out", lambda t: _existing_file(t, "tables"), "not a directory"),
    "analyze-out-under-file": ("analyze", "--out", "/etc/passwd/tables", "not a directory"),
    "analyze-out-proc": ("analyze", "--out", "/proc/tables", "writ"),
    "parse-out-directory": ("parse", "--out", lambda t: _existing_dir(t, "m.csv"), "directory"),
    "parse-out-json": ("parse", "--out", "m.json", ".parquet"),
    "parse-out-under-file": ("parse", "--out", "/etc/passwd/m.csv", "not a directory"),
    "parse-out-sys": ("parse", "--out", "/sys/m.parquet", "writ"),
    "claims-out-file": ("claims", "--out", lambda t: _existing_file(t, "report"), "not a directory"),
    "claims-out-under-file": ("claims", "--out", "/etc/passwd/report", "not a directory"),
    "claims-out-proc": ("claims", "--out", "/proc/report", "writ"),
    "memory-out-directory": ("memory", "--out", lambda t: _existing_dir(t, "pss.json"), "directory"),
    "memory-out-under-file": ("memory", "--out", "/etc/passwd/pss.json", "not a directory"),
    "memory-out-proc": ("memory", "--out", "/proc/pss.json", "writ"),
    "acceptance-out-file": ("acceptance", "--out", lambda t: _existing_file(t, "acc"), "not a directory"),
    "acceptance-out-under-file": ("acceptance", "--out", "/etc/passwd/acc", "not a directory"),
}


@pytest.mark.parametrize("case", sorted(OUTPUT_CASES))
def test_fuzz_output_flag(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    command, flag, value, words = OUTPUT_CASES[case]
    value = value(tmp_path) if callable(value) else value
    r = cli(capsys, *_output_argv(command, flag, value, tmp_path))
    line = assert_one_line(r, command, value)
    assert flag in line and words in line, line


def test_fuzz_existing_output_files_are_overwritten_and_missing_folders_made(tmp_path: Path, capsys) -> None:
    """The convention holds: an existing file is overwritten; a folder that is not there yet is made."""
    log = bare_log(tmp_path / "run.jsonl", 30)
    old = write(tmp_path / "m.csv", "old\n")
    r = cli(capsys, "parse", str(log), "--out", str(old))
    assert r.rc == 0 and old.read_text().startswith("step"), r.err
    new = tmp_path / "new" / "sub" / "m.parquet"
    r = cli(capsys, "parse", str(log), "--out", str(new))
    assert r.rc == 0 and new.is_file(), r.err
    fig = write(tmp_path / "fig.PNG", b"old")
    r = cli(capsys, "analyze", str(log), "--figure", str(fig), "--out", str(tmp_path / "tables"))
    assert r.rc == 0 and fig.read_bytes()[:4] == b"\x89PNG" and (tmp_path / "tables" / "table1.md").is_file(), r.err


# ------------------------------------------------------------------------------------ --study NAME


def test_fuzz_study_name_past_a_file_of_that_name(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "paper", "not a study\n")
    r = cli(capsys, "runs", "--study", "paper")
    assert r.rc == 0 and "qwen2.5-math-1.5b/gsm8k/" in r.out, r.err


def test_fuzz_study_path_with_a_slash_is_the_local_one(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "paper").mkdir()
    assert "directory" in assert_one_line(cli(capsys, "runs", "--study", "./paper"), "runs", "paper")


def test_fuzz_study_name_ending_in_yaml_is_the_local_one(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "paper.yaml", MINI)
    r = cli(capsys, "runs", "--study", "paper.yaml")
    assert r.rc == 0 and r.out.split() == list(KEYS), r.err


def test_fuzz_overlay_and_claims_names_past_folders(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one-gpu").mkdir()
    (tmp_path / "claims").mkdir()
    r = cli(capsys, "plan", "--study", "paper", "--overlay", "one-gpu")
    assert "Traceback" not in r.err and r.rc in (0, 1) and "plan:" in r.out, r.err
    r = cli(capsys, "claims", str(tmp_path / "no-such-run"), "--claims", "claims")
    assert "Traceback" not in r.err and "no-such-run" in r.err and "claims/" not in r.err, r.err


def test_fuzz_study_help_says_how_a_name_is_found(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    assert "shipped" in " ".join(capsys.readouterr().out.split())


# ----------------------------------------------------------------------------------- numeric flags

NUMERIC_CASES: list[tuple[str, str, str]] = [
    *[("plan", "--parallel", v) for v in ("-3", "0", "nan", "2.5")],
    *[("plan", "--gpu-memory-gib", v) for v in ("nan", "inf", "-inf", "-1", "0", "1e400")],
    *[("plan", "--host-memory-gib", v) for v in ("nan", "-64", "0", "inf")],
    *[("memory", "--gpu-memory-gib", v) for v in ("nan", "-80", "0", "inf")],
    *[("memory", "--host-memory-gib", v) for v in ("nan", "-1", "0")],
    *[("memory", "--interval", v) for v in ("0", "-2", "nan")],
]


@pytest.mark.parametrize(("command", "flag", "value"), NUMERIC_CASES)
def test_fuzz_numeric_flag(command: str, flag: str, value: str, capsys) -> None:
    line = assert_flag_refused(cli(capsys, command, f"{flag}={value}"), command, flag)  # '=': -inf is a value
    assert repr(value) in line, line


@pytest.mark.timeout(60)
def test_fuzz_huge_parallel_is_planned_not_allocated(capsys) -> None:
    """``--parallel 10**12``: as many slots as runs, not a trillion."""
    r = cli(capsys, "plan", "--study", "paper", "--parallel", str(10**12))
    assert "Traceback" not in r.err and r.rc in (0, 1) and f"{10**12} at a time" in r.out, r.err
    assert r.seconds < 10


@pytest.mark.parametrize("command", ["plan", "memory"])
def test_fuzz_huge_gpu_memory_is_a_plan_not_a_crash(command: str, capsys) -> None:
    r = cli(capsys, command, "--study", "paper", "--gpu-memory-gib", "1e30")
    assert "Traceback" not in r.err and r.rc in (0, 1), r.err


# ------------------------------------------------------------------------- step times read from files

STEP_TIME_CASES: dict[str, float | str | bool] = {
    "negative": -30.0,
    "zero": 0.0,
    "nan": math.nan,
    "inf": math.inf,
    "text": "1.5s",
    "bool": True,
}


def _finished(results: Path, key: str, t: object, *, bench: str = "s\th:m:s\n20.0\t0:00:20\n") -> Path:
    """A finished cpu run of ``key`` whose every step took ``t`` seconds by its log."""
    run = results / "runs" / key
    write_log(run / "train.jsonl", range(1, 9), val_every=4, t=1.5)
    lines = (run / "train.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for rec in recs:
        if "timing_s/step" in rec["data"]:
            rec["data"]["timing_s/step"] = t
    (run / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in recs))
    (run / "run.yaml").write_text(yaml.safe_dump({"settings": {"N": 4}, "platform": "cpu"}))
    (run / "train.benchmark.tsv").write_text(bench)
    return run


@pytest.mark.parametrize("case", sorted(STEP_TIME_CASES))
def test_fuzz_logged_step_time(case: str, tmp_path: Path, capsys) -> None:
    """One finished run logs a step time that is no time at all; the other is good. The bad one is named
    in one line and left out, the good one still measures the plan; exit 2 says one input was refused."""
    study = write(tmp_path / "mini.yaml", MINI)
    results = tmp_path / "results"
    bad = _finished(results, KEYS[0], STEP_TIME_CASES[case])
    _finished(results, KEYS[1], 1.5)
    r = cli(capsys, "plan", "--study", str(study), "--results", str(results))
    line = assert_one_line(r, "plan", bad / "train.jsonl", quiet=False)
    assert "timing_s/step" in line and ":2:" in line, line
    assert "measured (1 run)" in r.out, r.out


@pytest.mark.parametrize("cell", ["abc", "-5", "nan", ""])
def test_fuzz_benchmark_wall_time(cell: str, tmp_path: Path, capsys) -> None:
    """A run's benchmark file (its wall time) that is text, negative, NaN or empty: named, left out."""
    study = write(tmp_path / "mini.yaml", MINI)
    results = tmp_path / "results"
    bad = _finished(results, KEYS[0], 1.5, bench=f"s\th:m:s\n{cell}\t0:00:20\n")
    _finished(results, KEYS[1], 1.5)
    r = cli(capsys, "plan", "--study", str(study), "--results", str(results))
    if cell == "":  # no wall time recorded: nothing to refuse, the start-up is unknown
        assert r.rc in (0, 1) and "Traceback" not in r.err, r.err
        return
    line = assert_one_line(r, "plan", bad / "train.benchmark.tsv", quiet=False)
    assert ":2:" in line and "measured (2 runs)" in r.out, (line, r.out)


@pytest.mark.parametrize("case", ["cycle-runs", "dup-runs", "bomb-laughs", "empty"])
def test_fuzz_claims_study_file(case: str, tmp_path: Path, capsys) -> None:
    """``claims --study FILE``: the study file refused by the same reader, in the same one line."""
    study = write(tmp_path / f"{case}.yaml", STUDY_CASES[case][0])
    r = cli(capsys, "claims", str(tmp_path / "no-such-run"), "--study", str(study))
    assert STUDY_CASES[case][1] in assert_one_line(r, "claims", study)
    if STUDY_CASES[case][2]:  # an expansion or a cycle: refused before it grows
        assert r.seconds < 1, r.seconds


def test_fuzz_claims_reads_the_good_runs_beside_a_bad_one(tmp_path: Path, capsys) -> None:
    """Several runs, one missing: it is named in its own line and the good one is still judged."""
    key = "qwen2.5-math-1.5b/gsm8k/N64_lr2e-6_none_Tb1_Tl1_s1"
    good = bare_log(tmp_path / "runs" / key / "train.jsonl", 40).parent
    r = cli(capsys, "claims", str(good), str(tmp_path / "missing-run"))
    assert "1 run(s) read" in r.out, r.out + r.err
    line = assert_one_line(r, "claims", tmp_path / "missing-run", quiet=False, rc=1)  # claims: 1, a path unread
    assert line.count("missing-run") == 1, line


def test_every_shipped_yaml_file_reads_as_before() -> None:
    """The safe reader changes no shipped file's meaning (anchors, ``<<`` merges, numbers, dates): each
    reads to what ``yaml.safe_load`` made of it."""
    from coolsampler.spec.shipped import CONFIG, HARDWARE, PROFILES
    from coolsampler.spec.yaml_file import load_yaml

    files = [*CONFIG.glob("*.yaml"), *HARDWARE.glob("*.yaml"), *PROFILES.glob("*/*.yaml"), *CONFIG.glob("*/*/*.yaml")]
    assert len(files) > 20
    for path in files:
        assert load_yaml(path) == yaml.safe_load(path.read_text()), path

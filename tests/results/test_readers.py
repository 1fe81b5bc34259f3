"""Each shape of log verl writes, read back as verl's records (``coolsampler.results.readers``): its file
logger's JSONL (and flat JSON records), its console logger, TensorBoard event files, an MLflow file or
SQLite store, a wandb CSV export; an unreadable input named with the formats read; the TensorBoard
reader without its package named by the extra to install. Logs verl's own logger classes can write on a
CPU are written with them here."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from pathlib import Path

import pytest

from coolsampler.results.readers import (
    FORMATS_LINE,
    TENSORBOARD_EXTRA,
    UnreadableLog,
    find_logs,
    read_records,
)
from tests.fixtures.own_logs import HERE, PROJECT, SOURCES, run_records

TRACKING = HERE / "tracking" / PROJECT
MEAN4 = f"val-core/{SOURCES[0]}/acc/mean@4"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6)


def expected(name: str) -> dict[int, dict]:
    """The records a reader should give for a fixture run: one per step, the last training record of a
    re-logged step, validations merged."""
    out: dict[int, dict] = {}
    train: dict[int, dict] = {}
    for step, data in run_records(name):
        if "training/global_step" in data:
            train[step] = dict(data)
        else:
            out.setdefault(step, {}).update(data)
    return {s: {**train.get(s, {}), **out.get(s, {})} for s in sorted({*train, *out})}


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (TRACKING / "baseline.jsonl", "verl JSONL"),
        (HERE / "console" / "baseline.log", "verl console"),
        (HERE / "wandb" / "baseline-history.csv", "wandb CSV"),
    ],
)
def test_the_baseline_reads_the_same_from_every_format(path: Path, fmt: str) -> None:
    by_step, problems, got_fmt = read_records(path)
    assert got_fmt == fmt
    want = expected("baseline")
    assert sorted(by_step) == sorted(want)
    for step in (0, 10, 23, 60):
        for key in ("actor/entropy", "rollout_corr/kl", MEAN4, "actor/grad_norm"):
            if key in want[step] and by_step[step].get(key) is not None:
                assert _same(float(by_step[step][key]), float(want[step][key])), (fmt, step, key)
    assert MEAN4 in by_step[60] and "rollout_corr/kl" in by_step[60]
    if fmt == "verl JSONL":
        assert problems == ["line 13 is not a JSON record (a stray line), skipped"]
        assert by_step[23]["actor/grad_norm"] is None  # orjson writes NaN as null
    if fmt == "verl console":
        assert math.isnan(by_step[23]["actor/grad_norm"])  # pprint writes nan


def test_the_mlflow_file_store_reads_back_verls_keys_and_the_resumed_steps() -> None:
    run = HERE / "mlruns" / "1" / "5f1c0ffee0ddba11"
    by_step, problems, fmt = read_records(run)
    assert fmt == "MLflow"
    assert MEAN4 in by_step[60]  # verl's "_at_" read back as "@"
    assert problems == ["6 step(s) logged more than once (resumed run?), kept the last value of each (first: step 31)"]
    assert math.isclose(by_step[31]["actor/grad_norm"], expected("stale-n16")[31]["actor/grad_norm"])


def test_an_mlflow_sqlite_store_is_read_run_by_run(tmp_path: Path) -> None:
    """verl's default tracking URI is an SQLite file; its runs and metrics tables, as MLflow keeps them."""
    db = tmp_path / "mlruns.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (run_uuid TEXT, name TEXT)")
    con.execute("CREATE TABLE metrics (key TEXT, value REAL, timestamp INT, run_uuid TEXT, step INT, is_nan INT)")
    con.executemany("INSERT INTO runs VALUES (?, ?)", [("a1", "baseline"), ("b2", "other")])
    for i, (step, data) in enumerate(run_records("baseline")):
        for k, v in data.items():
            nan = isinstance(v, float) and math.isnan(v)
            con.execute(
                "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                (k.replace("@", "_at_"), 0.0 if nan else float(v), i, "a1", step, int(nan)),
            )
    con.execute("INSERT INTO metrics VALUES ('actor/entropy', 0.5, 0, 'b2', 1, 0)")
    con.commit()
    con.close()
    with pytest.raises(UnreadableLog, match="an MLflow store of 2 runs: name one as"):
        read_records(db)
    by_step, _problems, fmt = read_records(f"{db}#baseline")
    assert fmt == "MLflow" and MEAN4 in by_step[60] and math.isnan(by_step[23]["actor/grad_norm"])
    assert db in find_logs(tmp_path)


def test_the_wandb_ui_export_drops_its_min_max_copies_and_run_prefix() -> None:
    by_step, _problems, fmt = read_records(HERE / "wandb" / "ui-export.csv")
    assert fmt == "wandb CSV" and sorted(by_step) == [0, 10, 20, 30, 40, 50, 60]
    assert list(by_step[10]) == [MEAN4]


def test_flat_json_records_are_read(tmp_path: Path) -> None:
    log = tmp_path / "flat.jsonl"
    log.write_text(
        "".join(json.dumps({"step": s, "actor/entropy": 0.5, "rollout_corr/kl": 0.01}) + "\n" for s in range(1, 6))
    )
    by_step, problems, fmt = read_records(log)
    assert fmt == "flat JSONL" and sorted(by_step) == [1, 2, 3, 4, 5] and problems == []


def test_an_unreadable_input_gets_one_line_listing_the_formats_read(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nworld\n")
    with pytest.raises(UnreadableLog) as e:
        read_records(junk)
    assert str(e.value) == f"{junk}: no training records found; {FORMATS_LINE}"
    assert "\n" not in str(e.value)


def test_tensorboard_without_its_package_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    with pytest.raises(UnreadableLog, match=r"need the tensorboard package: install coolsampler's tensorboard extra"):
        read_records(HERE / "tensorboard_log" / PROJECT / "baseline")
    assert "[tensorboard]" in TENSORBOARD_EXTRA


def test_the_tensorboard_fixture_reads_the_resumed_run() -> None:
    pytest.importorskip("tensorboard")
    by_step, problems, fmt = read_records(HERE / "tensorboard_log" / PROJECT / "stale-n16")
    assert fmt == "TensorBoard" and MEAN4 in by_step[60]
    assert problems == ["6 step(s) logged more than once (resumed run?), kept the last value of each (first: step 31)"]


def test_the_fixtures_are_what_verls_own_loggers_write(tmp_path: Path) -> None:
    """Rewrite the verl-written fixtures with verl's Tracking (file, console, tensorboard) and read both:
    the committed copies hold what verl writes."""
    pytest.importorskip("verl.utils.tracking")
    pytest.importorskip("tensorboard")
    from tests.fixtures.own_logs import write_verl_logs

    write_verl_logs(tmp_path)
    committed = sorted(p.relative_to(HERE) for p in find_logs(HERE) if not str(p).startswith(str(HERE / "mlruns")))
    fresh = sorted(p.relative_to(tmp_path) for p in find_logs(tmp_path))
    assert fresh == [p for p in committed if p.parts[0] != "wandb"]
    for rel in fresh:
        a, pa, fa = read_records(HERE / rel)
        b, pb, fb = read_records(tmp_path / rel)
        assert (fa, pa) == (fb, pb), rel
        assert sorted(a) == sorted(b), rel
        for step in a:
            assert set(a[step]) == set(b[step]), (rel, step)
    assert (tmp_path / "tracking" / PROJECT / "baseline.jsonl").read_text() == (TRACKING / "baseline.jsonl").read_text()


def test_a_local_wandb_run_says_in_one_line_how_to_export_its_history(tmp_path: Path) -> None:
    run = tmp_path / "wandb" / "run-20260105_101010-abc123"
    run.mkdir(parents=True)
    (run / "run-abc123.wandb").write_bytes(b"\x00binary")
    assert find_logs(tmp_path) == [run]
    with pytest.raises(UnreadableLog) as e:
        read_records(run)
    assert "export it to CSV first" in str(e.value) and "history(" in str(e.value) and "\n" not in str(e.value)

"""Figure 7b's claim, "the controller heats the sampler to 1.05 in the second cycle", on logs made up
for the paper's N=192 controller run and read back through the parser.

Why its own test: the claim checks a trajectory, the sampler temperature the controller logged step by
step, inside a window (the second refresh cycle). The generic synthetic worlds set the column to one
value over the whole run; here the temperature moves as a controller's would, so the cycle window and
the parsed ``temperature`` column (verl's ``sampler/temperature``) are what decide the verdict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from coolsampler.results import analysis as A
from coolsampler.results import claims as C
from coolsampler.results.metrics import parse_jsonl
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.study import load_study
from coolsampler.testkit import synthetic_claims as S

REPO = Path(__file__).resolve().parents[2]
CLAIMS = C.load_claims(REPO / "config" / "claims.yaml")
RUNS = load_study(REPO / "config" / "paper.yaml").runs
CID = "fig7b-controller-heats"
VAL_KEY = "val-core/openai/gsm8k/acc/mean@1"  # one of val_acc's source patterns


def _claim() -> dict[str, Any]:
    return next(c for c in CLAIMS.claims if c["id"] == CID)


def test_the_claim_reads_the_n192_controller_run_of_the_paper_study() -> None:
    c = _claim()
    assert c["where"] == "Fig 7" and "1.05 in the second cycle" in c["text"]
    assert c["quantity"] == {"fn": "col_max", "args": {"col": "temperature", "cycle": 2}, "reduce": "one"}
    (key,) = C.plan(CLAIMS, RUNS)[CID]
    assert key == "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tbsat0.8_Tl1_s1"
    run = next(r for r in RUNS if r.key == key)
    # the run-wide controller: the only one whose temperature can move when no prompt comes back
    assert (run.Tb.kind, run.Tb.scope, run.Tb.kl_gate, run.Tb.initial) == ("saturation", "global", False, 0.8)


def _verl_log(metrics: pd.DataFrame, path: Path) -> Path:
    """``metrics`` written back as the JSONL verl logs, under each column's first source key."""
    first_val = float(metrics.val_acc.dropna().iloc[0])  # the initial validation (step 0) as the first
    lines = [json.dumps({"step": 0, "data": {VAL_KEY: first_val}})]
    for row in metrics.itertuples(index=False):
        data: dict[str, Any] = {}
        for col, (_dtype, _meaning, sources) in COLUMNS.items():
            v = getattr(row, col)
            if (isinstance(v, float) and math.isnan(v)) or not sources:  # no key: the parser derives it
                continue
            key = VAL_KEY if col == "val_acc" else sources[0]
            data[key] = v.item() if isinstance(v, np.generic) else v
        lines.append(json.dumps({"step": int(row.step), "data": data}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _verdict(tmp_path: Path, temperature: np.ndarray) -> C.Result:
    """The claim on the N=192 controller run whose logged sampler temperature is ``temperature``
    (one value per step 1..300), after a round trip through verl's log format and the parser."""
    c = _claim()
    (key,) = C.plan(CLAIMS, RUNS)[CID]
    run = next(r for r in RUNS if r.key == key)
    m = S.base_metrics(run)
    m = m[m.step > 0].reset_index(drop=True)
    m["temperature"] = m["temperature_min"] = m["temperature_max"] = temperature
    df, status = parse_jsonl(
        _verl_log(m, tmp_path / "train.jsonl"),
        expected_steps=run.steps,
        val_every=run.val_every,
        max_response_length=512,
    )
    assert df.set_index("step")["temperature"].loc[1:].to_numpy() == pytest.approx(temperature)  # parsed per step
    return C.evaluate_claim(CLAIMS, c, {key: C.RunData(run, df, status)}, RUNS)


STEPS = np.arange(1, 301)
CYCLE = A.cycle_of(STEPS, 192)  # 1 for steps 1..192, 2 for 193..300


def test_a_run_that_heats_to_1_05_in_its_second_cycle_reproduces(tmp_path: Path) -> None:
    """0.8 through the first cycle, then a ratchet of 0.005 a step from step 201 to 1.05 at step 250,
    held to the end: the controller's shape in the paper's description."""
    t = np.where(STEPS <= 200, 0.8, np.minimum(0.8 + 0.005 * (STEPS - 200), 1.05))
    assert t[CYCLE == 1].max() == 0.8 and t[CYCLE == 2].max() == pytest.approx(1.05)
    r = _verdict(tmp_path, t)
    assert r.verdict == "reproduced", (r.value, r.reason)
    assert r.value == pytest.approx(1.05)


def test_a_run_that_never_heats_differs(tmp_path: Path) -> None:
    """A controller whose temperature never leaves its start (as a per-prompt one does when no prompt
    comes back) does not reproduce the figure."""
    r = _verdict(tmp_path, np.full(300, 0.8))
    assert r.verdict == "differs" and r.reason == "", (r.value, r.reason)
    assert r.value == pytest.approx(0.8)


def test_heat_only_in_the_first_cycle_differs(tmp_path: Path) -> None:
    """1.05 reached in the first cycle and cooled back by the refresh: the claim reads the second cycle."""
    t = np.where(CYCLE == 1, np.minimum(0.8 + 0.005 * STEPS, 1.05), 0.85)
    assert t.max() == pytest.approx(1.05)
    r = _verdict(tmp_path, t)
    assert r.verdict == "differs", (r.value, r.reason)
    assert r.value == pytest.approx(0.85)

"""A study's drift probes as one table: a row per run in (Tb, seed) order, the learner's KL, the tempering
offset and the drift, the drift's part and share by candidate class and by bin of q, the capped weights
by sampled class, and a mean per sampler temperature."""

from __future__ import annotations

import math

import pytest

from coolsampler.results.drift_probe import drift_markdown, drift_table, temperature_means
from coolsampler.spec.drift import BIN_NAMES, CLASSES


def probe(Tb: float, low: float, high: float, offset: float = 0.0) -> dict:
    """A probe as the drift probe writes it: the drift split into the low and high bins, the tail and the
    head words; no 'other' token sampled."""
    drift = low + high
    out = {"step": 48, "Tb": Tb, "prompts": 256, "answer_tokens": 4000, "tail_rank": 4}
    out.update(learner=drift + offset, offset=offset, drift=drift, capped=0.01, capped0=0.02 if Tb < 1 else 0.0)
    out.update({f"drift_{c}": 0.0 for c in CLASSES} | {f"drift_{b}": 0.0 for b in BIN_NAMES})
    out.update(drift_tail=low, drift_head=high, drift_low=low, drift_high=high)
    for c in CLASSES:
        out[f"sampled_{c}"] = 0.0 if c == "other" else 0.25
        out[f"capped_{c}"] = None if c == "other" else 0.01
        out[f"capped0_{c}"] = None if c == "other" else 0.0
    return out


RUNS = [
    ({"key": "w/w/N96_tis_Tb0.8_s6", "seed": 6}, probe(0.8, 0.01, 0.03, offset=0.02)),
    ({"key": "w/w/N96_tis_Tb1_s6", "seed": 6}, probe(1.0, 0.06, 0.02)),
    ({"key": "w/w/N96_tis_Tb0.8_s5", "seed": 5}, probe(0.8, 0.02, 0.02, offset=0.02)),
    ({"key": "w/w/N96_tis_Tb1_s5", "seed": 5}, probe(1.0, 0.09, 0.01)),
]


def test_a_row_per_run_hotter_first_then_by_seed_with_each_parts_share_of_the_drift() -> None:
    table = drift_table(RUNS)
    assert list(zip(table["Tb"], table["seed"], strict=True)) == [(1.0, 5), (1.0, 6), (0.8, 5), (0.8, 6)]
    first = table.iloc[0]
    assert first["drift"] == pytest.approx(0.10) and first["frac_low"] == pytest.approx(0.9)
    assert first["frac_tail"] == pytest.approx(0.9) and first["frac_high"] == pytest.approx(0.1)
    assert sum(first[f"drift_{b}"] for b in BIN_NAMES) == pytest.approx(first["drift"])
    assert table.iloc[2]["kl"] == pytest.approx(0.06) and table.iloc[2]["offset"] == pytest.approx(0.02)
    assert math.isnan(first["capped_other"])  # a class never sampled has no capped fraction


def test_each_temperature_is_averaged_over_its_seeds() -> None:
    means = temperature_means(drift_table(RUNS)).set_index("Tb")
    assert means.loc[1.0, "runs"] == 2 and means.loc[0.8, "runs"] == 2
    assert means.loc[1.0, "frac_low"] == pytest.approx((0.9 + 0.75) / 2)
    assert means.loc[0.8, "offset"] == pytest.approx(0.02)


def test_no_share_where_the_learner_did_not_drift() -> None:
    table = drift_table([({"key": "k", "seed": 1}, probe(1.0, 0.0, 0.0))])
    assert math.isnan(table.iloc[0]["frac_low"])


def test_the_markdown_has_three_tables_of_a_row_per_run_and_a_mean_per_temperature() -> None:
    md = drift_markdown(drift_table(RUNS))
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(rows) == 3 * (1 + 4 + 2)  # three tables: header, runs, means
    assert "**mean of 2**" in rows[6] and rows[6].startswith("| 0.8 |")
    assert "step 48" in md and "q < 0.05" in md and "90%" in md
    assert drift_markdown(drift_table([])) == "No run was probed.\n"

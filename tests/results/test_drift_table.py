"""A study's drift probes as one table: a row per run in (Tb, seed) order, each class's share, KL and part,
the tail's part of the total, and a mean per sampler temperature."""

from __future__ import annotations

import math

import pytest

from coolsampler.results.drift_probe import drift_markdown, drift_table, temperature_means
from coolsampler.spec.drift import CLASSES


def probe(Tb: float, tail_kl: float, tail_share: float, head_kl: float = 0.01) -> dict:
    """A probe as the drift probe writes it: head, tail and digits; no 'other' token sampled."""
    shares = {"head": 0.5 - tail_share, "tail": tail_share, "digit": 0.5, "other": 0.0}
    kls = {"head": head_kl, "tail": tail_kl, "digit": 0.002, "other": None}
    out = {"step": 32, "Tb": Tb, "prompts": 256, "answer_tokens": 4000, "tail_rank": 4}
    for c in CLASSES:
        out[f"{c}_share"] = shares[c]
        out[f"{c}_kl"] = kls[c]
        out[f"{c}_part"] = shares[c] * (kls[c] or 0.0)
    out["kl"] = sum(out[f"{c}_part"] for c in CLASSES)
    out["k1"] = out["kl"]
    return out


RUNS = [
    ({"key": "w/w/N64_tis_Tb0.8_s2", "seed": 2}, probe(0.8, 0.10, 0.05)),
    ({"key": "w/w/N64_tis_Tb1_s2", "seed": 2}, probe(1.0, 0.20, 0.15)),
    ({"key": "w/w/N64_tis_Tb0.8_s1", "seed": 1}, probe(0.8, 0.12, 0.03)),
    ({"key": "w/w/N64_tis_Tb1_s1", "seed": 1}, probe(1.0, 0.30, 0.15)),
]


def test_a_row_per_run_hotter_first_then_by_seed_with_the_tails_part_of_the_total() -> None:
    table = drift_table(RUNS)
    assert list(zip(table["Tb"], table["seed"], strict=True)) == [(1.0, 1), (1.0, 2), (0.8, 1), (0.8, 2)]
    first = table.iloc[0]
    assert first["tail_part"] == pytest.approx(0.15 * 0.30)
    assert first["tail_fraction"] == pytest.approx(0.15 * 0.30 / first["kl"])
    assert math.isnan(first["other_kl"]) and first["other_part"] == 0.0  # a class never sampled has no KL
    assert sum(first[f"{c}_part"] for c in CLASSES) == pytest.approx(first["kl"])


def test_each_temperature_is_averaged_over_its_seeds() -> None:
    means = temperature_means(drift_table(RUNS)).set_index("Tb")
    assert means.loc[1.0, "runs"] == 2 and means.loc[0.8, "runs"] == 2
    assert means.loc[1.0, "tail_kl"] == pytest.approx(0.25)
    assert means.loc[0.8, "tail_share"] == pytest.approx(0.04)


def test_the_markdown_has_a_row_per_run_and_a_mean_per_temperature() -> None:
    md = drift_markdown(drift_table(RUNS))
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4 + 2  # header, runs, means
    assert "**mean of 2**" in rows[-1] and rows[-1].startswith("| 0.8 |")
    assert "step-32 learner" in md
    assert drift_markdown(drift_table([])) == "No run was probed.\n"

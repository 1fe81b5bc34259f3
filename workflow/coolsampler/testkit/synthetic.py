"""Synthetic metrics tables with known answers, for tests and benchmarks of the analysis layer.

The curves imitate the paper's qualitative picture (Figure 1) closely enough to exercise every code
path: the learner-sampler KL grows exponentially with cycle age and resets at each refresh, hotter
samplers grow it faster, and the validation accuracy rises smoothly to a plateau and, if asked,
collapses at a chosen step and optionally recovers. The noise is small (0.004 on accuracy) so the
degradation criteria fire exactly where ``collapse_at`` says and nowhere else.

Imports the spec layer only (pandas, numpy); no verl, vLLM or torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from coolsampler.spec import corrections
from coolsampler.spec.metrics_schema import COLUMNS, OTHER_SYSTEM_COLUMNS


def make_metrics(
    N: int,
    steps: int = 300,
    val_every: int = 10,
    Tb: float = 1.0,
    collapse_at: int | None = None,
    seed: int = 0,
    *,
    recover_at: int | None = None,
    collapse_to: float = 0.35,
    plateau: float | None = None,
    end_step: int | None = None,
    correction: str = "tis",
    Tb_end: float | None = None,
    k1_noise: float = 0.0,
) -> pd.DataFrame:
    """A metrics table with every ``metrics_schema.COLUMNS`` column, steps ``1..steps``.

    ``collapse_at``: first validation step whose accuracy drops to ``collapse_to`` (must be a multiple
    of ``val_every`` to be seen there); ``recover_at``: step from which accuracy is back on the clean
    curve (a transient dip if within 20 steps). ``end_step`` truncates the table, imitating a run that
    was cut. ``Tb_end`` makes the logged sampler temperature a linear schedule from ``Tb``.
    ``plateau`` defaults to 0.85 for cooled (Tb < 1) and 0.81 for uncooled samplers. ``k1_noise``
    adds batch noise to the k1 KL (``kl``) only, which then goes <= 0 where the mismatch is small,
    as verl's k1 does on a batch; k3 stays positive.
    """
    rng = np.random.default_rng(seed)
    last = steps if end_step is None else min(steps, end_step)
    t = np.arange(1, last + 1, dtype="int64")
    age = (t - 1) % N
    top = plateau if plateau is not None else (0.85 if Tb < 1.0 else 0.81)
    clean = 0.30 + (top - 0.30) * (1.0 - np.exp(-t / 35.0))
    collapsed = np.zeros(last, dtype=bool)
    if collapse_at is not None:
        collapsed = t >= collapse_at
        if recover_at is not None:
            collapsed &= t < recover_at
    acc = np.where(collapsed, collapse_to, clean) + rng.normal(0.0, 0.004, last)
    val = np.where(t % val_every == 0, np.clip(acc, 0.0, 1.0), np.nan)

    rate = max(0.01, 0.045 - 0.1 * (1.0 - Tb))  # hotter sampler: faster KL growth within a cycle
    kl = 0.002 * np.exp(rate * age) * np.exp(rng.normal(0.0, 0.05, last))
    kl = np.where(collapsed, kl * 10.0 + 1.5, kl)
    entropy = 0.30 * np.exp(-age / 80.0) + 0.05 + rng.normal(0.0, 0.005, last)
    entropy = np.where(collapsed, 1.2, entropy)
    clip = np.clip(0.15 * np.exp(-age / 30.0) + 0.02 + np.where(collapsed, 0.8, 0.0), 0.0, 1.0)
    reward = np.clip(np.where(collapsed, 0.15, clean) + rng.normal(0.0, 0.01, last), 0.0, 1.0)
    own = {s.column for s in c.signals} if (c := corrections.get(correction)) is not None else set()
    # mu-GRPO's veto and ratio clip grow with the mismatch: a few percent late in a cycle (Sec 4)
    veto = np.clip(0.05 * age / max(N - 1, 1) * (1.0 if Tb >= 1.0 else 0.5), 0.0, 1.0)
    k1 = kl + rng.normal(0.0, k1_noise, last) if k1_noise else kl
    data = {
        "step": t,
        "sampler_version": ((t - 1) // N) * N,
        "staleness": age,
        "refreshed": t % N == 0,
        "refreshes": t // N,
        "guard_value": np.full(last, np.nan),  # a fixed-N run has no guard, which never fires
        "guard_fired": np.zeros(last, dtype=bool),
        "val_acc": val,
        # a paper task has no sampled validation copy and no digit error (generated chain worlds only)
        "val_acc_sampled": np.full(last, np.nan),
        "val_digit_error": np.full(last, np.nan),
        "kl": k1,
        "k3_kl": kl * (1.0 - 0.3 * np.minimum(kl, 1.0)),  # k3 ~ k1 for a small mismatch, never negative
        "entropy": entropy,
        "clip_frac": clip,
        "response_length_max": np.full(last, 512.0),  # some response reaches the limit every step
        "reward": reward,
        "grad_norm": 0.3 + 0.1 * rng.random(last) + np.where(collapsed, 3.0, 0.0),
        "is_cap_frac": np.clip(0.05 * kl, 0.0, 1.0),
        "kl_to_init": 1.2e-4 * t * (0.4 if Tb < 1.0 else 1.0),
        "veto_frac": veto if "veto_frac" in own else np.full(last, np.nan),
        "ratio_clip_frac": 0.2 * veto if "ratio_clip_frac" in own else np.full(last, np.nan),
        "temperature": np.full(last, float(Tb)) if Tb_end is None else np.linspace(Tb, Tb_end, steps)[:last],
    }
    data["temperature_min"] = data["temperature_max"] = data["temperature"]  # one T per step here
    data.update(diagnostic_columns(kl, correction, rng))
    # the gate's lag is its staleness, the same for every sample of a step; nothing is dropped
    data |= {"lag_mean": age.astype("float64"), "lag_max": age.astype("float64"), "lag_min": age.astype("float64")}
    data["lag_drops"] = np.full(last, np.nan)
    data |= {c: np.full(last, np.nan) for c in OTHER_SYSTEM_COLUMNS}  # verl logs none of them
    df = pd.DataFrame(data)
    return df.astype({c: spec[0] for c, spec in COLUMNS.items()})[list(COLUMNS)]


SPIKE_P = 0.1  # share of steps whose chi^2 a few tokens dominate (the smoke study's chi2_token)


def diagnostic_columns(kl: np.ndarray, correction: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """verl's other staleness diagnostics, following a forward KL per token ``kl`` (metrics_schema.DIAGNOSTIC_COLUMNS).

    For a log-ratio log(pi/q) roughly Gaussian with variance s^2, KL(q || pi) = s^2 / 2 and
    chi^2(pi || q) = e^(s^2) - 1, so log(1 + chi^2) is about twice the KL: the reverse-KL bound
    rises with the KL and crosses a level first. ``SPIKE_P`` of the steps get a heavy-tailed
    chi^2 (a few tokens with a large rho), which a per-step reading takes for a crossing and a
    rolling median does not. The IS-weight metrics are NaN unless ``correction`` is tis, as verl
    logs them only where it applies IS weights.
    """
    n = len(kl)
    spike = np.where(rng.random(n) < SPIKE_P, np.exp(rng.normal(2.5, 0.5, n)), 1.0)
    chi2 = np.expm1(np.minimum(2.0 * kl, 40.0)) * spike  # log rho clamped to +-20 as verl does
    chi2_seq = np.expm1(np.minimum(8.0 * kl * spike, 40.0))  # a response of ~8 tokens, clamped as verl does
    ess = 1.0 / (1.0 + np.minimum(chi2, 3.0))  # capped weights: the ESS fraction stays above 1/4
    tis = (c := corrections.get(correction)) is not None and c.is_weights
    out = {
        "chi2_token": chi2,
        "chi2_seq": chi2_seq,
        "rkl_bound_token": np.log1p(chi2),
        "rkl_bound_seq": np.log1p(chi2_seq),
        "is_ess": ess,
        "is_mean": 1.0 - 0.3 * (1.0 - ess),
        "is_std": np.sqrt(np.maximum(1.0 / ess - 1.0, 0.0)),
        "is_max": np.full(n, 2.0),
        "is_min": np.exp(-4.0 * np.sqrt(kl) - 1.0),
        "is_low_frac": np.clip(0.2 * kl, 0.0, 1.0),
        "log_ppl_diff": kl * (1.0 + rng.normal(0.0, 0.05, n)),
        "log_ppl_abs_diff": 1.2 * kl,
        "log_ppl_diff_max": 4.0 * kl,
        "log_ppl_diff_min": -0.5 * kl,
        "probs_diff_max": np.clip(0.3 + 2.0 * kl, 0.0, 1.0),
        "probs_diff_mean": np.clip(0.1 * kl, 0.0, 1.0),
        "probs_diff_std": np.clip(0.15 * kl, 0.0, 1.0),
    }
    if not tis:
        for col in ("is_ess", "is_mean", "is_std", "is_max", "is_min", "is_low_frac", "is_cap_frac"):
            out[col] = np.full(n, np.nan)
    return out


# --------------------------------------------------------------------------------------------------
# A paper-shaped synthetic study: 55 runs, and the figures block that selects the paper's panels.

GSM, MATH = "gsm8k", "math"
M15, M7 = "qwen2.5-math-1.5b", "qwen2.5-math-7b"
SATURATION = {"controller": "saturation", "start": 0.8}

# (model, task, N, lr, correction, Tb, Tl, seeds, collapse_at, recover_at, replicate)
_DEMO: list[tuple[Any, ...]] = [
    (M15, GSM, 192, 2e-6, "tis", 1.0, 1.0, (1, 43, 44), 190, None, None),
    (M15, GSM, 192, 2e-6, "tis", 0.8, 1.0, (1, 43, 44), None, None, None),
    (M15, GSM, 192, 2e-6, "tis", 0.8, "tied", (1,), None, None, None),
    (M15, GSM, 192, 2e-6, "tis", 0.9, 1.0, (1,), 190, 200, None),
    (M15, GSM, 96, 2e-6, "tis", 1.0, 1.0, (1, 43, 44), None, None, None),
    (M15, GSM, 96, 2e-6, "tis", 0.8, 1.0, (1, 43, 44), None, None, None),
    (M15, GSM, 96, 2e-6, "tis", 0.8, "tied", (1,), None, None, None),
    (M15, GSM, 192, 1.5e-6, "tis", 1.0, 1.0, (43, 44), None, None, None),
    (M15, GSM, 192, 1e-6, "tis", 1.0, 1.0, (43, 44), None, None, None),
    (M15, GSM, 192, 2e-6, "mu_grpo", 1.0, 1.0, (43, 44), None, None, None),
    (M15, GSM, 192, 2e-6, "mu_grpo", 0.8, 1.0, (43, 44), None, None, None),
    (M15, GSM, 192, 2e-6, "tis", 0.7, 1.0, (1, 43), 200, None, None),
    (M15, GSM, 288, 2e-6, "tis", 1.0, 1.0, (1,), 190, None, None),
    (M15, GSM, 288, 2e-6, "tis", 0.9, 1.0, (1,), 220, None, None),
    (M15, GSM, 288, 2e-6, "tis", 0.8, 1.0, (1,), 250, None, None),
    (M15, GSM, 288, 2e-6, "tis", 0.7, 1.0, (1,), 190, None, None),
    (M15, GSM, 288, 2e-6, "tis", 0.6, 1.0, (1,), 300, None, None),
    (M15, MATH, 288, 4e-6, "tis", 1.0, 1.0, (1, 43), 180, None, None),
    (M15, MATH, 288, 4e-6, "tis", 0.8, 1.0, (1, 43), 240, None, None),
    (M15, MATH, 288, 4e-6, "tis", 0.6, 1.0, (1,), 160, None, None),
    (M15, MATH, 192, 2e-6, "tis", 1.0, 1.0, (1,), None, None, None),
    (M15, MATH, 192, 2e-6, "tis", 0.8, 1.0, (1,), None, None, None),
    (M15, GSM, 96, 2e-6, "none", 0.8, 1.0, (1, 43, 44), 150, None, None),
    (M15, GSM, 96, 2e-6, "none", {"controller": "kl_cooling", "start": 0.8}, 1.0, (1,), 160, None, None),
    (M15, MATH, 96, 2e-6, "none", 0.8, 1.0, (1,), 200, 240, None),
    (M15, GSM, 96, 2e-6, "tis", SATURATION, 1.0, (1,), None, None, None),
    (M15, GSM, 96, 2e-6, "tis", {**SATURATION, "kl_gate": True}, 1.0, (1,), None, None, None),
    (M15, GSM, 96, 2e-6, "tis", {"schedule": "linear", "start": 0.8, "end": 1.0}, 1.0, (1,), None, None, None),
    (M15, GSM, 96, 4e-6, "tis", 0.8, 1.0, (1,), 200, 210, None),
    (M15, GSM, 192, 2e-6, "tis", SATURATION, 1.0, (1,), 300, None, None),
    (M15, GSM, 64, 2e-6, "none", 1.0, 1.0, (1,), 120, None, None),
    (M7, GSM, 144, 2e-6, "tis", 1.0, 1.0, (1, 43), 120, None, None),
    (M7, GSM, 144, 2e-6, "tis", 0.8, 1.0, (1, 43), None, None, None),
    (M7, GSM, 144, 2e-6, "tis", 0.8, 1.0, (1,), 280, None, "cut"),
    (M7, GSM, 192, 2e-6, "tis", 1.0, 1.0, (1,), 120, None, None),
    (M7, GSM, 192, 2e-6, "tis", 0.8, 1.0, (1,), 180, 200, None),
]

# target -> panel -> settings filter(s): the paper study's own ``figures:`` block, so the demo draws what
# the study would draw from these runs; plus the guard's frontier, which is no figure of the paper (its
# study, config/guard-calibration.yaml, selects toy-world runs), drawn here from the paper-shaped runs.
PAPER_STUDY = Path(__file__).resolve().parents[3] / "config" / "paper.yaml"
DEMO_FIGURES: dict[str, dict[str, Any]] = {
    **yaml.safe_load(PAPER_STUDY.read_text())["figures"],
    "guard_frontier": {"a": {"model": M15, "task": GSM, "lr": 2e-6, "correction": "tis", "Tb": [1.0, 0.8], "Tl": 1.0}},
}


def demo_runs(steps: int = 300) -> list[tuple[Any, pd.DataFrame, Any]]:
    """55 paper-shaped runs as ``(Run, metrics, RunStatus)``; the 'cut' replicate ends at step 287."""
    from coolsampler.spec.metrics_schema import RunStatus
    from coolsampler.spec.settings import TASKS
    from coolsampler.spec.study import Run, Temperature

    out = []
    for i, (model, task, N, lr, corr, tb, tl, seeds, collapse, recover, rep) in enumerate(_DEMO):
        temp = Temperature.from_config(tb)
        for seed in seeds:
            t = TASKS[task]
            run = Run(model, task, N, lr, corr, temp, tl, seed, steps, t.val_every, rep)
            end = 287 if rep == "cut" else None
            df = make_metrics(
                N, steps, t.val_every, temp.initial, collapse, seed=1000 * i + seed, recover_at=recover,
                end_step=end, correction=corr, Tb_end=temp.end,
                plateau=(0.62 if task == MATH else 0.92 if model == M7 else None),
            )  # fmt: skip
            last = int(df["step"].max())
            problems = [] if last == steps else [f"log ends at step {last}"]
            out.append((run, df, RunStatus(last == steps, last, steps, problems)))
    return out


def demo_panels(
    target: str, runs: list[tuple[Any, pd.DataFrame, Any]], figures: dict[str, dict[str, dict[str, Any]]] | None = None
) -> dict[str, list[tuple[dict[str, Any], pd.DataFrame | None, Any]]]:
    """The panels of ``target`` selected from ``runs`` by the figures block (default ``DEMO_FIGURES``): a
    panel's filter, or a list of filters whose runs are combined, as a study selects them."""
    from coolsampler.spec.study import matches
    from coolsampler.spec.targets import panel_filters

    spec = panel_filters((figures or DEMO_FIGURES)[target])
    return {
        p: [
            (r.settings(), m, st)
            for r, m, st in runs
            if any(matches(r, f) for f in (fs if isinstance(fs, list) else [fs]))
        ]
        for p, fs in spec.items()
    }


# --------------------------------------------------------------------------------------------------
# A study's results directory from synthetic runs: figures, tables and the report without training.


def write_study_results(study: Any, *, seed: int = 0, k1_noise: float = 0.0007) -> list[str]:
    """Write ``runs/<key>/{metrics.parquet,status.json,run.yaml}`` under ``study.results`` for every
    run of ``study``, shaped like the smoke study's results (docs/getting-started.md, "The smoke study"): without the
    correction a long refresh interval collapses late in the second cycle (7/8 of the run), with
    TIS it holds; k1 KL carries batch noise (values <= 0 early in a cycle) and the first run a
    near-zero point. Every ``run.yaml`` says ``synthetic: true``. Returns the keys written.

    For docs, report tests and looking at figures on a machine that has not trained; never a
    substitute for a run (the figures' provenance names the study, and run.yaml says synthetic).
    """
    import json

    from coolsampler.spec.layout import Layout

    keys = []
    for i, run in enumerate(study.runs):
        d = Path(Layout(str(study.results)).run_dir(run.key))
        d.mkdir(parents=True, exist_ok=True)
        steps, val_every = int(run.steps), int(run.val_every)
        collapse = None
        uncorrected = (c := corrections.get(run.correction)) is not None and not c.corrects
        if uncorrected and run.N * 2 >= steps:
            collapse = (steps * 7 // 8) // val_every * val_every
        df = make_metrics(
            run.N, steps, val_every, run.Tb.initial, collapse, seed=seed + 97 * i + run.seed,
            correction=run.correction, Tb_end=run.Tb.end, plateau=0.62 if run.Tb.initial >= 1.0 else 0.56,
            k1_noise=k1_noise,
        )  # fmt: skip
        if i == 0 and len(df) > 3:
            df.loc[2, "kl"] = 3e-9  # one near-zero point, as real k1 logs have: must not stretch an axis
        # step 0: the initial validation, as verl logs it before training
        ints, bools = ("step", "sampler_version", "staleness", "refreshes"), ("refreshed", "guard_fired")
        # as the parser writes them: step 0 has no sampler version
        df = df.astype({**dict.fromkeys(ints, "Int64"), **dict.fromkeys(bools, "boolean")})
        first = pd.DataFrame([{"step": 0, "val_acc": 0.49}]).reindex(columns=df.columns).astype(df.dtypes.to_dict())
        df = pd.concat([first, df], ignore_index=True)
        df.to_parquet(d / "metrics.parquet")
        (d / "status.json").write_text(
            json.dumps({"complete": True, "last_step": steps, "expected_steps": steps, "problems": []}, indent=1)
        )
        meta = {
            "study": study.name,
            "synthetic": True,
            "settings": run.settings(),
            "recipe": dict(study.recipe),
            "platform": "cpu",
            "image": None,
        }
        (d / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        keys.append(run.key)
    return keys

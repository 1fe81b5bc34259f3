"""The per-run metrics table: one row per training step. Defined once, here.

``metrics.parquet`` in every run directory has exactly these columns (``veto_frac``,
``ratio_clip_frac`` and the ``temperature*`` columns may be all-NaN where the run has no such mechanism,
the IS-weight diagnostics ``is_*`` where it applies no IS weights, and every diagnostic where the log
predates it). The parser
(``coolsampler.results.metrics``) fills it from verl's JSONL; the analysis reads nothing else.
Run-level facts (finished or not, why) live in the table's metadata (see ``RunStatus``).

Imports only the correction registry of the package (for the columns one correction logs), and no heavy stack.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coolsampler.spec.corrections import corrections, signal_columns
from coolsampler.spec.lag import LAG_COLUMNS

# A validation set may score a copy of its prompts by sampling (a generated world's ``sampled_val``): its
# rows carry the data source ``<source>`` + SAMPLED_SUFFIX, so verl logs them apart. A wildcard source
# below never matches the sampled copy unless it names the suffix itself: greedy columns stay greedy.
SAMPLED_SUFFIX = "-sampled"
SAMPLED_TEMPERATURE = 1.0

# column -> (dtype, meaning, verl JSONL source key(s))
COLUMNS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "step": ("int64", "learner step t (1-based; verl's global step)", ("training/global_step",)),
    "sampler_version": (
        "int64",
        "learner step whose weights the sampler held when it drew this step's batch (0 = initial)",
        ("staleness/sampler_version",),
    ),
    "staleness": ("int64", "t - 1 - sampler_version ... = (t-1) mod N under the gate", ("staleness/staleness",)),
    "refreshed": ("bool", "the sampler's weights were pushed at the end of this step", ("staleness/refreshed",)),
    "refreshes": (
        "int64",
        "refreshes of the sampler so far, this step's included (the refresh gate's count)",
        ("staleness/refreshes",),
    ),
    # the staleness guard (coolsampler.spec.guard; guard runs only): its reading and whether it fired
    "guard_value": (
        "float64",
        "the guard's reading at the end of this step: the trailing median of its signal since the last refresh"
        " (absent until a majority of its window is logged)",
        ("guard/value",),
    ),
    "guard_fired": (
        "bool",
        "the guard refreshed the sampler at the end of this step because its reading was past the threshold"
        " (a refresh because N steps passed is not a firing)",
        ("guard/fired",),
    ),
    "val_acc": (
        "float64",
        "greedy validation accuracy after this step (NaN where not validated)",
        ("val-core/*/acc/mean@1", "val-core/*/reward/mean@1"),
    ),
    "val_acc_sampled": (
        "float64",
        "validation accuracy scored by one sample per prompt at temperature 1, on the sampled copy of the"
        " validation prompts (NaN where not validated or the set has no such copy)",
        (f"val-core/*{SAMPLED_SUFFIX}/acc/mean@1", f"val-core/*{SAMPLED_SUFFIX}/reward/mean@1"),
    ),
    "val_digit_error": (
        "float64",
        "greedy validation: fraction of the answer's digits that are wrong (a generated chain world's reward"
        " logs it; NaN elsewhere)",
        ("val-aux/*/digit_error/mean@1",),
    ),
    # mu-GRPO runs in bypass mode, where verl skips its rollout-correction metrics: the loss logs it.
    "kl": (
        "float64",
        "learner-sampler KL per token: verl's k1 estimator, mean over the sampler's response tokens of"
        " log q - log pi (token-weighted; can be negative on a batch)",
        ("rollout_corr/kl", "actor/rollout_corr/kl"),
    ),
    "k3_kl": (
        "float64",
        "learner-sampler KL per token, verl's k3 estimator mean(r - 1 - log r), r = pi/q: never negative",
        ("rollout_corr/k3_kl", "actor/rollout_corr/k3_kl"),
    ),
    # verl logs actor/entropy from its old-log-prob pass; in bypass mode (μ-GRPO) that pass is skipped and
    # the actor update's entropy (actor/entropy_loss: the same token-mean, of the policy being updated) stands in
    "entropy": ("float64", "learner entropy per token", ("actor/entropy", "actor/entropy_loss")),
    # verl's response_length/clip_ratio counts responses whose length equals the *padded batch width*.
    # The parser keeps it only where the batch's longest response reached the configured limit
    # (response_length/max >= max_response_length, then width = limit); otherwise no response was cut
    # and the fraction is 0. Without the configured limit it is NaN (coolsampler.results.metrics).
    "clip_frac": (
        "float64",
        "fraction of sampled responses that ran to the configured max response length",
        ("response_length/clip_ratio",),
    ),
    "response_length_max": ("float64", "longest sampled response this step (tokens)", ("response_length/max",)),
    "reward": ("float64", "mean training reward", ("critic/score/mean",)),
    "grad_norm": ("float64", "actor gradient norm", ("actor/grad_norm",)),
    "is_cap_frac": (
        "float64",
        "fraction of tokens whose IS weight hit the cap",
        ("rollout_corr/rollout_is_ratio_fraction_high",),
    ),
    "kl_to_init": ("float64", "learner KL to the initial (reference) policy", ("actor/kl_loss",)),
    # the columns only one correction logs (mu-GRPO's veto and clip fractions): its registry entry's
    **{s.column: ("float64", s.description, s.keys) for s in signal_columns().values()},
    "temperature": ("float64", "sampler temperature used this step (mean over its prompts)", ("sampler/temperature",)),
    "temperature_min": ("float64", "lowest per-prompt sampler temperature this step", ("sampler/temperature_min",)),
    "temperature_max": ("float64", "highest per-prompt sampler temperature this step", ("sampler/temperature_max",)),
    # ---- Staleness diagnostics verl logs besides the KL (verl 0.9.1: trainer/ppo/rollout_corr_helper.py,
    # compute_offpolicy_metrics and compute_is_metrics; utils/debug/metrics.py, calculate_debug_metrics).
    # rho = pi/q per response token: pi the learner (its old-log-prob pass, at the learner temperature),
    # q the sampler (at Tb). The chi^2 and log-ppl metrics come with the KL (so also from the mu-GRPO loss,
    # under actor/); the IS-weight metrics only where verl applies IS weights (correction tis).
    "chi2_token": (
        "float64",
        "chi^2 of the learner to the sampler per token, E_q[rho^2] - 1: the mean of rho^2 - 1 over the sampler's"
        " response tokens (rho clamped to e^+-20); the other direction than kl, heavy-tailed",
        ("rollout_corr/chi2_token", "actor/rollout_corr/chi2_token"),
    ),
    "chi2_seq": (
        "float64",
        "chi^2 of the learner to the sampler per response, the mean over responses of (prod_t rho_t)^2 - 1"
        " (sum of log rho clamped to +-20)",
        ("rollout_corr/chi2_seq", "actor/rollout_corr/chi2_seq"),
    ),
    "rkl_bound_token": (
        "float64",
        "log(1 + chi2_token), nats per token: an upper bound on the learner's reverse KL(pi || q) per token"
        " (KL <= log(1 + chi^2)); computed by the parser",
        (),
    ),
    "rkl_bound_seq": (
        "float64",
        "log(1 + chi2_seq), nats per response: the same bound on the reverse KL of whole responses;"
        " computed by the parser",
        (),
    ),
    "is_ess": (
        "float64",
        "effective sample size of the applied (capped) token IS weights as a fraction of the tokens,"
        " 1 / mean((w / mean w)^2): 1 when every weight is equal",
        ("rollout_corr/rollout_is_eff_sample_size",),
    ),
    "is_mean": ("float64", "mean applied (capped) token IS weight", ("rollout_corr/rollout_is_mean",)),
    "is_std": ("float64", "std of the applied (capped) token IS weights", ("rollout_corr/rollout_is_std",)),
    "is_max": (
        "float64",
        "largest applied token IS weight (capped: at most the cap under token-level TIS)",
        ("rollout_corr/rollout_is_max",),
    ),
    "is_min": ("float64", "smallest applied token IS weight", ("rollout_corr/rollout_is_min",)),
    "is_low_frac": (
        "float64",
        "fraction of tokens whose raw IS weight is below 1/cap (the sampler drew a token the learner finds"
        " cap times less likely)",
        ("rollout_corr/rollout_is_ratio_fraction_low",),
    ),
    "log_ppl_diff": (
        "float64",
        "mean over responses of mean_t log q - mean_t log pi (the log of the learner's perplexity over the"
        " sampler's, per response; k1 weighted by response instead of token)",
        ("rollout_corr/log_ppl_diff", "actor/rollout_corr/log_ppl_diff"),
    ),
    "log_ppl_abs_diff": (
        "float64",
        "mean over responses of |mean_t log q - mean_t log pi|",
        ("rollout_corr/log_ppl_abs_diff", "actor/rollout_corr/log_ppl_abs_diff"),
    ),
    "log_ppl_diff_max": (
        "float64",
        "largest per-response log_ppl_diff of the batch",
        ("rollout_corr/log_ppl_diff_max", "actor/rollout_corr/log_ppl_diff_max"),
    ),
    "log_ppl_diff_min": (
        "float64",
        "smallest per-response log_ppl_diff of the batch",
        ("rollout_corr/log_ppl_diff_min", "actor/rollout_corr/log_ppl_diff_min"),
    ),
    # verl's docstring says "logprob diff"; its code takes exp() first: these are probabilities
    "probs_diff_max": (
        "float64",
        "largest |pi(y_t) - q(y_t)| over the response tokens, in probability",
        ("training/rollout_probs_diff_max",),
    ),
    "probs_diff_mean": (
        "float64",
        "mean |pi(y_t) - q(y_t)| over the response tokens, in probability",
        ("training/rollout_probs_diff_mean",),
    ),
    "probs_diff_std": (
        "float64",
        "standard deviation of |pi(y_t) - q(y_t)| over the response tokens",
        ("training/rollout_probs_diff_std",),
    ),
    # The lag vocabulary (coolsampler.spec.lag): how stale this step's samples were, in optimizer steps, of the
    # kind the run's Lag names. verl 0.9.1's V1 trainer logs the lag from the newest version a trajectory used
    # (verl/trainer/ppo/v1/trainer_base.py L1979, L1986-1988 upstream; L2026-2035 in coolsampler's patched build:
    # (global_steps - 1) - max_global_steps) and the stale groups its replay buffer evicts
    # (verl/trainer/ppo/v1/replay_buffer.py L367, prefix "training"; named dropped_samples before verl's
    # c88e875dd, which 0.9.1 postdates, so that older name is not read); the
    # gate's runs take theirs from the gate instead (results.metrics.parse_records: their staleness column).
    "lag_mean": (
        "float64",
        "mean lag of the step's samples, in optimizer steps (what it is measured from: the run's lag kind)",
        ("training/off_policy/trajectory_staleness/mean",),
    ),
    "lag_max": (
        "float64",
        "largest lag among the step's samples, in optimizer steps",
        ("training/off_policy/trajectory_staleness/max",),
    ),
    "lag_min": (
        "float64",
        "smallest lag among the step's samples, in optimizer steps",
        ("training/off_policy/trajectory_staleness/min",),
    ),
    "lag_drops": (
        "float64",
        "samples dropped this step because they were too stale (evicted, not trained on)",
        ("training/off_policy/evicted_samples",),
    ),
    # Mismatch readings other trainers log and verl does not (no verl key): the sampler's and the learner's
    # log-probs of the sampled tokens, apart, and the importance ratio before its truncation.
    "logp_abs_diff": (
        "float64",
        "mean |log pi(y_t) - log q(y_t)| over the response tokens (pi: the learner policy the system compares)",
        (),
    ),
    "logp_abs_diff_max": ("float64", "largest |log pi(y_t) - log q(y_t)| over the response tokens", ()),
    "is_raw_mean": ("float64", "mean token importance ratio pi/q before its truncation (the raw ratio)", ()),
    "is_raw_max": ("float64", "largest token importance ratio pi/q before its truncation", ()),
    # kl's estimator and direction against another policy: the learner as it updates within the step
    "kl_pi_theta": (
        "float64",
        "learner-sampler k1 per token as kl (mean over the response tokens of log q - log pi), with pi the"
        " learner as it updates within the step (pi_theta, each update's training forward) in place of the"
        " step's pi_old: kl's value only where a step makes a single update",
        (),
    ),
    # The importance weight a system applied after its own truncation or masking, where that is not verl's
    # token-level cap (is_mean/is_max/is_min): TRL's GRPOTrainer, per token or per sequence by its mode, a
    # ratio outside its bounds clamped or set to 0.
    "is_applied_mean": (
        "float64",
        "mean importance weight pi/q as applied, after the system's truncation or masking (per token or per"
        " sequence: the system's mode; the run's Source says)",
        (),
    ),
    "is_applied_max": ("float64", "largest importance weight pi/q as applied, after truncation or masking", ()),
    "is_applied_min": (
        "float64",
        "smallest importance weight pi/q as applied, after truncation or masking (0 where a ratio was masked)",
        (),
    ),
    # Staleness counts a system keeps as running totals since the run began, not per step and not a lag
    # (verl's fully_async recipe): read as logged.
    "stale_total": (
        "float64",
        "trajectories trained so far whose newest policy version was at least one version behind the trainer's"
        " (a running total)",
        (),
    ),
    "queue_drops_total": (
        "float64",
        "samples a full rollout queue has dropped so far, the oldest first (a running total; no staleness test)",
        (),
    ),
}

# Columns the parser computes from other columns (no verl key): column -> the column it is log1p of.
# log(1 + chi^2) is the classical bound KL(P || Q) <= log(1 + chi^2(P || Q)) (Jensen on E_P[log P/Q]),
# which turns verl's chi^2, unbounded and heavy-tailed, into nats comparable with the forward KL.
LOG1P_OF: dict[str, str] = {"rkl_bound_token": "chi2_token", "rkl_bound_seq": "chi2_seq"}

# The staleness diagnostics beyond the KL. Logs that lack them parse as before (the column is NaN);
# a step that lacks one or logged it as NaN does not make the log incomplete (RunStatus): they
# describe the run, they do not measure it, and the lead table says over how many steps each was read.
DIAGNOSTIC_COLUMNS: tuple[str, ...] = (
    "chi2_token", "chi2_seq", "rkl_bound_token", "rkl_bound_seq", "is_ess", "is_mean", "is_std", "is_max",
    "is_min", "is_low_frac", "log_ppl_diff", "log_ppl_abs_diff", "log_ppl_diff_max", "log_ppl_diff_min",
    "probs_diff_max", "probs_diff_mean", "probs_diff_std",
)  # fmt: skip

# The guard's columns: logged by guard runs only, and its reading only once its window holds a majority,
# so their gaps leave the log whole.
GUARD_COLUMNS: tuple[str, ...] = ("guard_value", "guard_fired")

# The columns only other trainers' logs fill (results.sources): verl logs no such key.
OTHER_SYSTEM_COLUMNS: tuple[str, ...] = tuple(
    c for c, spec in COLUMNS.items() if not spec[2] and c != "step" and c not in LOG1P_OF
)

ABSENT = object()  # no source key of a column in a record (as opposed to a logged null/NaN)


def pick(data: dict[str, Any], column: str | tuple[str, ...]) -> Any:
    """The value of a column's first source key present in one verl record's ``data``, else ``ABSENT``.

    ``column`` is a column name (its sources from ``COLUMNS``) or the source patterns themselves. A
    present key whose value is null is returned as None: verl's file logger writes with orjson, which
    turns NaN into null, so null means "logged, not a number", not "not logged".
    """
    patterns = COLUMNS[column][2] if isinstance(column, str) else column
    for pat in patterns:
        if "*" in pat:
            hits = sorted(k for k in data if fnmatch.fnmatchcase(k, pat) and _same_copy(k, pat))
            if hits:
                return data[hits[0]]
        elif pat in data:
            return data[pat]
    return ABSENT


def _same_copy(key: str, pattern: str) -> bool:
    """A key of the sampled validation copy matches only a pattern that names it (``SAMPLED_SUFFIX``)."""
    return (f"{SAMPLED_SUFFIX}/" in key) == (f"{SAMPLED_SUFFIX}/" in pattern)


REQUIRED = ("step", "kl", "entropy", "reward", "grad_norm", "kl_to_init")

# What makes verl log each column: a log that lacks a column is told which setting (or which part of
# this project's patched verl) would have provided it, so a user's own log can be made analysable.
# Settings are Hydra overrides of verl 0.9.1's ppo_trainer config; "patched verl" keys come only from
# this project's patches (the staleness gate, the sampler temperature, mu-GRPO).
_ROLLOUT_CORR = "algorithm.rollout_correction.rollout_is=token (verl logs rollout_corr/*)"
_LOG_PROBS = "actor_rollout_ref.rollout.calculate_log_probs=True (verl's default; training/rollout_probs_diff_*)"
# How the training stack (torch, this project's patched verl, vLLM) is installed: named by every message
# about a missing stack or a key only the patched verl logs.
INSTALL_TRAINING_STACK = "bash workflow/tools/setup_env.sh (or the project's image: docs/paper-study.md)"
_PATCHED = (
    "coolsampler's patched verl (" + INSTALL_TRAINING_STACK.split(" (")[0] + "; unpatched verl never logs {keys})"
)
PROVIDED_BY: dict[str, str] = {
    "step": "trainer.logger=[console,file] (verl's file logger writes the JSONL; VERL_FILE_LOGGER_PATH names it)",
    "sampler_version": _PATCHED.format(keys="staleness/*"),
    "staleness": _PATCHED.format(keys="staleness/*"),
    "refreshed": _PATCHED.format(keys="staleness/*"),
    "refreshes": _PATCHED.format(keys="staleness/*"),
    "guard_value": _PATCHED.format(keys="guard/*") + ", guard runs only",
    "guard_fired": _PATCHED.format(keys="guard/*") + ", guard runs only",
    "val_acc": "trainer.test_freq=K and trainer.val_before_train=True (verl logs val-core/*)",
    "val_acc_sampled": "a validation set with a sampled copy (a generated world's sampled_val), run by"
    " coolsampler's patched verl (its per-row temperature holds in validation; upstream validates at one temperature)",
    "val_digit_error": "a generated chain world's reward (coolsampler.world.chain; verl logs val-aux/*/digit_error)",
    "kl": _ROLLOUT_CORR,
    "k3_kl": _ROLLOUT_CORR,
    "entropy": "verl's default (actor/entropy from the old-log-prob pass)",
    "clip_frac": "verl's default (response_length/clip_ratio) and the run's max response length (run.yaml)",
    "response_length_max": "verl's default (response_length/max)",
    "reward": "verl's default (critic/score/mean)",
    "grad_norm": "verl's default (actor/grad_norm)",
    "is_cap_frac": _ROLLOUT_CORR,
    "kl_to_init": "actor_rollout_ref.actor.use_kl_loss=True (verl logs actor/kl_loss)",
    **{
        s.column: _PATCHED.format(keys=", ".join(s.keys)) + f", correction {c.name} only"
        for c in corrections()
        for s in c.signals
    },
    "temperature": _PATCHED.format(keys="sampler/temperature"),
    "temperature_min": _PATCHED.format(keys="sampler/temperature"),
    "temperature_max": _PATCHED.format(keys="sampler/temperature"),
    "chi2_token": _ROLLOUT_CORR,
    "chi2_seq": _ROLLOUT_CORR,
    "rkl_bound_token": _ROLLOUT_CORR + ", computed from rollout_corr/chi2_token",
    "rkl_bound_seq": _ROLLOUT_CORR + ", computed from rollout_corr/chi2_seq",
    "is_ess": _ROLLOUT_CORR,
    "is_mean": _ROLLOUT_CORR,
    "is_std": _ROLLOUT_CORR,
    "is_max": _ROLLOUT_CORR,
    "is_min": _ROLLOUT_CORR,
    "is_low_frac": _ROLLOUT_CORR,
    "log_ppl_diff": _ROLLOUT_CORR,
    "log_ppl_abs_diff": _ROLLOUT_CORR,
    "log_ppl_diff_max": _ROLLOUT_CORR,
    "log_ppl_diff_min": _ROLLOUT_CORR,
    "probs_diff_max": _LOG_PROBS,
    "probs_diff_mean": _LOG_PROBS,
    "probs_diff_std": _LOG_PROBS,
    **dict.fromkeys(
        LAG_COLUMNS[:3],
        "verl's V1 trainer (training/off_policy/trajectory_staleness/*), or coolsampler's gate (staleness/*)",
    ),
    "lag_drops": "verl's V1 trainer with trainer.v1.sampler.max_off_policy_threshold and strategy drop",
    **dict.fromkeys(
        (
            "logp_abs_diff",
            "logp_abs_diff_max",
            "is_raw_mean",
            "is_raw_max",
            "kl_pi_theta",
            "is_applied_mean",
            "is_applied_max",
            "is_applied_min",
            "stale_total",
            "queue_drops_total",
        ),  # fmt: skip
        "another trainer's log that has it (docs/results.md, the table of systems); verl logs no such key",
    ),
}


def absent_columns(df: Any) -> list[str]:
    """The table's columns with no value at any training step: what the log never had (in COLUMNS order).
    ``df``: a metrics table (a pandas DataFrame; not imported here, the schema stays import-free)."""
    steps = df["step"] > 0 if "step" in df else slice(None)
    return [c for c in COLUMNS if c != "step" and (c not in df or not df.loc[steps, c].notna().any())]


def missing_text(columns: Iterable[str]) -> list[str]:
    """One line per verl setting that would provide ``columns``: "setting: column, column"."""
    by: dict[str, list[str]] = {}
    for col in columns:
        by.setdefault(PROVIDED_BY.get(col, "unknown"), []).append(col)
    return [f"{', '.join(cols)}: {how}" for how, cols in by.items()]


# The learner-sampler KL estimators a figure may draw (its ``kl`` option) -> the column that holds each.
KL_COLUMNS = {"k1": "kl", "k3": "k3_kl"}


@dataclass
class RunStatus:
    """Whether a run's log is whole. Analysis refuses to present incomplete data silently."""

    complete: bool
    last_step: int
    expected_steps: int
    problems: list[str]

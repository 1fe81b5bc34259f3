"""Settings as a reader sees them: every piece of text that names a run's settings, in one place.

Why one module: a legend entry of Figure 4, an 'Arm' cell of Table 2 and a note naming an unfinished
run must call the same setting by the same name. Numbers are written with ``coolsampler.spec.temperature.num``
(the run-key formatter) wherever the paper does not print them differently; the paper's own forms
(Table 4's '1.0', '0.8*', 'tied') are the table helpers below. Nothing here imports matplotlib,
verl, vLLM or torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coolsampler.results.analysis import LENGTH_UNKNOWN
from coolsampler.spec import corrections
from coolsampler.spec.metrics_schema import KL_COLUMNS
from coolsampler.spec.settings import MODELS, PAPER_RECIPE
from coolsampler.spec.temperature import Temperature, num

DEFAULT_LR = PAPER_RECIPE["lr"]  # the paper's learning rate ("2e-6 unless stated"): labels name only other values
DASH = "–"

TASK_LABELS = {"gsm8k": "GSM8K", "math": "MATH", "arith": "arith"}


# --------------------------------------------------------------------------------------------------
# Sampler temperature


def tb_kind(settings: Mapping[str, Any]) -> str:
    """'fixed', 'linear', 'saturation', 'saturation+kl' or 'kl_cooling' from Run.settings()."""
    return Temperature.from_settings(settings).label_kind


def tb_initial(settings: Mapping[str, Any]) -> float:
    return Temperature.from_settings(settings).initial


def tb_label(settings: Mapping[str, Any]) -> str:
    """'Tb=0.8', 'Tb 0.8->1 (linear)', 'saturation controller + KL gate', ... (figure legends)."""
    return Temperature.from_settings(settings).label()


def tb_text(settings: Mapping[str, Any]) -> str:
    """Sampler temperature as in Table 4: '1.0', '0.8', and '0.8*' for a controller/schedule start."""
    return Temperature.from_settings(settings).table_text()


def tl_text(settings: Mapping[str, Any]) -> str:
    """Learner temperature as in Table 4: '1.0' or 'tied'."""
    tl = settings.get("Tl", 1.0)
    return "tied" if tl == "tied" else f"{float(tl):.1f}"


def default_lr(lr: Any) -> bool:
    """``lr`` is the paper's learning rate, which labels leave unnamed ("2e-6 unless stated")."""
    return abs(float(lr) - DEFAULT_LR) <= 1e-12


def lr_text(lr: float) -> str:
    """A learning rate as the paper writes it: '2e-6', '1.5e-6'."""
    return num(float(lr))


# --------------------------------------------------------------------------------------------------
# Model, task, arm, run


def model_label(settings: Mapping[str, Any]) -> str:
    """'1.5B', '7B' (Table 4's model column) from the model name."""
    m = MODELS.get(str(settings.get("model", "")))
    return m.params if m else str(settings.get("model", ""))


def task_label(settings: Mapping[str, Any]) -> str:
    return TASK_LABELS.get(str(settings.get("task", "")), str(settings.get("task", "")))


def model_task_labels(settings: Mapping[str, Any]) -> list[str]:
    """['1.5B', 'GSM8K']; a generated world is its own model and task, so its name is given once."""
    model, task = model_label(settings), task_label(settings)
    return [model] if model == task else [model, task]


def setting_row(settings: Mapping[str, Any]) -> str:
    """'1.5B GSM8K N=192': one row of Figure 2 / one block of Table 2."""
    return " ".join([*model_task_labels(settings), f"N={int(settings.get('N', 0))}"])


def correction_label(settings: Mapping[str, Any]) -> str:
    """The correction's legend name (its registry entry's label), or the name as given when unknown."""
    c = corrections.get(settings.get("correction"))
    return c.label if c is not None else str(settings.get("correction", ""))


def table_correction_label(name: Any) -> str:
    """Table 4's 'Correction' cell: the registry entry's table label, or the name as given when unknown."""
    c = corrections.get(name)
    return c.table_label if c is not None else str(name)


def arm_label(settings: Mapping[str, Any]) -> str:
    """The 'Objective'/'Arm' text: correction, then lr and learner temperature where not standard."""
    if settings.get("arm_name"):  # a user's own logs (coolsampler analyze): the run's or the arm's name
        return str(settings["arm_name"])
    if "correction" not in settings:  # a bare log: name it by its path
        return str(settings.get("key", "run"))
    out = correction_label(settings)
    kind = tb_kind(settings)
    if kind != "fixed":
        out += {"linear": " + linear schedule", "kl_cooling": " + KL cooling"}.get(kind, " + controller")
        if kind == "saturation+kl":
            out += " (KL gate)"
    lr = settings.get("lr", DEFAULT_LR)
    if not default_lr(lr):
        out += f", lr {lr_text(lr)}"
    if settings.get("Tl") == "tied":
        out += ", Tl tied"
    if settings.get("guard"):
        g = settings["guard"]
        out += f", guard {g['signal']} {g['threshold']:g}"
    elif settings.get("schedule"):
        out += f", schedule of {len(settings['schedule'])}"
    return out


def run_label(settings: Mapping[str, Any], *, seed: bool = True, correction: bool = False) -> str:
    """Legend label of a run: temperature, then only the settings that distinguish it."""
    parts = []
    if correction:
        parts.append(correction_label(settings))
    parts.append(tb_label(settings))
    if settings.get("Tl") == "tied":
        parts.append("Tl tied")
    lr = settings.get("lr", DEFAULT_LR)
    if not default_lr(lr):
        parts.append(f"lr {lr_text(lr)}")
    if seed and "seed" in settings:
        parts.append(f"s{settings['seed']}")
    if settings.get("replicate"):
        parts.append(str(settings["replicate"]))
    return " ".join(parts)


def run_name(settings: Mapping[str, Any]) -> str:
    """'7B, GSM8K, N=144, seed 1 (cut)' as Table 3 names runs."""
    N, seed = int(settings.get("N", 0)), settings.get("seed")
    out = ", ".join([*model_task_labels(settings), f"N={N}, seed {seed}"])
    if not corrections.is_standard(settings.get("correction")):
        out += f", {correction_label(settings)}"
    if settings.get("replicate"):
        out += f" ({settings['replicate']})"
    return out


def short_key(settings: Mapping[str, Any]) -> str:
    """A run's key without the model's long name prefix, for notes: '1.5B/gsm8k/N192_..._s43'."""
    key = str(settings.get("key", ""))
    if not key:
        return run_label(settings, correction=True)
    if settings.get("run") and not settings.get("model"):  # a user's own log (analyze), named by its path
        return key
    model, _, rest = key.partition("/")
    size = model.rsplit("-", 1)[-1].upper() if "-" in model else model
    return f"{size}/{rest}"


def seed_text(settings: Mapping[str, Any]) -> str:
    """'43', '1 cut': Table 4's seed column with the replicate tag."""
    rep = settings.get("replicate")
    return f"{settings.get('seed')}" + (f" {rep}" if rep else "")


def value_text(v: Any) -> str:
    """A filter or setting value as the run keys write it: numbers by the key formatter ('1e-4',
    '0.8', '32'), lists as 'a|b', a Tb mapping as its settings, None as 'none'."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return num(v)
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {value_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "|".join(value_text(x) for x in v)
    return str(v)


def selection_text(filters: Any) -> str:
    """A panel's settings filter as one line: 'N=32, correction=tis, Tb=1|0.8'; a list of filters
    (their runs combined) joined by ' + '; an empty filter selects 'every run of the study'."""
    if isinstance(filters, list):
        return " + ".join(f"[{selection_text(f)}]" for f in filters) or "no run"
    if not filters:
        return "every run of the study"
    return ", ".join(f"{k}={value_text(v)}" for k, v in filters.items())


def selection_lines(selection: Mapping[str, Any] | None, panels: Sequence[str]) -> list[str]:
    """'selection (a): N=32, correction=tis' per panel of a figure, for its caption; [] when unknown."""
    if not selection:
        return []
    return [f"selection ({p}): {selection_text(selection[p])}" for p in panels if p in selection]


# --------------------------------------------------------------------------------------------------
# Runs that are not whole


def availability_notes(entries: Sequence[tuple[Mapping[str, Any], Any, Any]]) -> list[str]:
    """'<run>: missing' / '<run>: unfinished at step x/y (why)' for every run not whole."""
    out = []
    for settings, metrics, status in entries:
        name = short_key(settings)
        if metrics is None or metrics.empty:
            out.append(f"{name}: missing")
        elif status is None:
            out.append(f"{name}: status unknown")
        elif status.problems == [LENGTH_UNKNOWN]:  # a bare log: not incomplete, its length is not known
            out.append(f"{name}: {LENGTH_UNKNOWN} ({status.last_step} steps logged)")
        elif not status.complete and status.problems and status.last_step >= status.expected_steps:
            out.append(f"{name}: {'; '.join(status.problems)}")  # whole to its end: a flaw inside it, not a cut
        elif not status.complete:
            why = f" ({'; '.join(status.problems)})" if status.problems else ""
            out.append(f"{name}: unfinished at step {status.last_step}/{status.expected_steps}{why}")
    return out


# --------------------------------------------------------------------------------------------------
# Axis texts that name a measurement (the estimator behind a number is part of its name)

KL_ESTIMATORS = {
    # option value -> (metrics column, axis label)
    k: (col, f"learner-sampler KL ({k}), nats/token")
    for k, col in KL_COLUMNS.items()
}
KL_SOURCE_NOTE = {
    "k1": "KL: verl rollout_corr/kl (k1 on the sampler's samples, token-weighted: mean of log q - log pi)",
    "k3": "KL: verl rollout_corr/k3_kl (k3 on the sampler's samples, token-weighted: mean of r - 1 - log r, r = pi/q)",
}

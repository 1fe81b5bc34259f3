"""Studies, runs and run keys.

A *study* (``config/*.yaml``) lists runs by their settings. Each run has a *key*: a readable
relative path that holds every per-run setting, e.g.::

    qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43

``model/task/N<refresh>_lr<lr>_<correction>_Tb<sampler T>_Tl<learner T>_s<seed>`` followed, only
where they differ from the task's defaults, by ``_st<steps>`` and ``_v<val interval>``, and by
``_cut`` / ``_rerun`` for replicates, and by ``_x<hash>`` when the run passes extra verl overrides
(``verl_overrides:``; the hash is of the sorted list, so two runs differing only there never share a
directory). ``parse_key`` inverts ``Run.key`` exactly, so a Snakemake wildcard is turned back into
settings without a lookup table (an ``_x`` key needs its study, which holds the overrides), and anything
that does not parse is rejected (no shell can hide in a key).

Models and tasks are the paper's (``coolsampler.settings``) plus any the study defines in its
``models:`` and ``tasks:`` blocks; a run carries the definitions it uses (``Run.model_info``,
``Run.task_info``), so everything downstream reads them from the run.

Study-wide recipe settings (batch shape, lengths) live in the study's ``recipe`` block and in
``coolsampler.settings``; the run directory records the fully resolved configuration.

This module never imports verl, vLLM or torch.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from coolsampler.settings import (
    CORRECTIONS,
    MODELS,
    REPLICATES,
    RERUN_SEED_OFFSET,
    SAMPLING_SEED,
    SATURATION_RULES,
    SCOPES,
    TASKS,
    Model,
    Task,
)

# the saturation controller's options, defaults first: defined where the rule lives (a pure-Python
# module, light to import)

# --------------------------------------------------------------------------------------------------
# Sampler temperature: a number, a schedule or a controller.

SCHEDULES = ("linear",)
CONTROLLERS = ("saturation", "kl_cooling")


def _num(x: float) -> str:
    """Shortest stable text for a number in a key: 1.0 -> '1', 0.8 -> '0.8', 2e-06 -> '2e-6'."""
    x = float(x)
    s = f"{x:.6e}" if 0 < abs(x) < 0.01 else f"{x:.6g}"  # small values (learning rates) as 3e-5
    if "e" in s:
        mant, exp = s.split("e")
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        s = f"{mant}e{int(exp)}"
    return s


@dataclass(frozen=True)
class Temperature:
    """The sampler temperature Tb of a run.

    ``kind`` is ``fixed`` (``value``), ``linear`` (``value`` -> ``end`` over the run),
    ``saturation`` (starts at ``value``; reheats as groups saturate; ``kl_gate`` blocks reheating
    while the learner-sampler KL is high) or ``kl_cooling`` (starts at ``value``; cools further
    whenever the KL grows). The saturation controller's ``scope`` is ``per_prompt`` (default: each
    prompt its own temperature, the paper's controller) or ``global`` (one per step), and
    ``saturated`` says when a group counts as saturated: ``all_correct`` (default) or ``all_equal``.
    The rules are in ``coolsampler.worker.controller``.

    Key tokens: ``Tb0.8``, ``Tblin0.8-1``, ``Tbklc0.8``, ``Tbsat0.8[kl][-global][-alleq]``: the
    default saturation controller keeps the short token, each non-default choice adds its suffix.
    """

    kind: str = "fixed"
    value: float = 1.0
    end: float | None = None
    kl_gate: bool = False
    scope: str = SCOPES[0]
    saturated: str = SATURATION_RULES[0]

    def __post_init__(self) -> None:
        if self.scope not in SCOPES or self.saturated not in SATURATION_RULES:
            raise ValueError(
                f"Tb: scope {self.scope!r} / saturated {self.saturated!r}; allowed: {SCOPES} / {SATURATION_RULES}"
            )
        if self.kind != "saturation" and (self.scope, self.saturated) != (SCOPES[0], SATURATION_RULES[0]):
            raise ValueError(f"Tb: scope and saturated are options of the saturation controller, not of {self.kind}")

    @property
    def initial(self) -> float:
        return self.value

    def token(self) -> str:
        if self.kind == "fixed":
            return f"Tb{_num(self.value)}"
        if self.kind == "linear":
            return f"Tblin{_num(self.value)}-{_num(self.end)}"
        if self.kind == "saturation":
            return (
                f"Tbsat{_num(self.value)}"
                + ("kl" if self.kl_gate else "")
                + ("" if self.scope == SCOPES[0] else f"-{_SCOPE_TOKENS[self.scope]}")
                + ("" if self.saturated == SATURATION_RULES[0] else f"-{_SATURATED_TOKENS[self.saturated]}")
            )
        if self.kind == "kl_cooling":
            return f"Tbklc{_num(self.value)}"
        raise ValueError(f"unknown temperature kind {self.kind!r}")

    def to_config(self) -> float | dict[str, Any]:
        if self.kind == "fixed":
            return self.value
        if self.kind == "linear":
            return {"schedule": "linear", "start": self.value, "end": self.end}
        out: dict[str, Any] = {"controller": self.kind, "start": self.value}
        if self.kind == "saturation":
            out["kl_gate"] = self.kl_gate
            if self.scope != SCOPES[0]:  # defaults are left out: the paper's specs stay as written
                out["scope"] = self.scope
            if self.saturated != SATURATION_RULES[0]:
                out["saturated"] = self.saturated
        return out

    @classmethod
    def from_config(cls, spec: float | int | Mapping[str, Any]) -> Temperature:
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls("fixed", float(spec))
        if "schedule" in spec:
            return cls("linear", float(spec["start"]), float(spec["end"]))
        kind = spec["controller"]
        return cls(
            kind,
            float(spec.get("start", 0.8)),
            None,
            bool(spec.get("kl_gate", False)),
            str(spec.get("scope", SCOPES[0])),
            str(spec.get("saturated", SATURATION_RULES[0])),
        )


# the key suffixes of the saturation controller's non-default choices (the defaults have none)
_SCOPE_TOKENS = {"global": "global"}
_SATURATED_TOKENS = {"all_equal": "alleq"}
_NUM_RE = r"\d+(?:\.\d+)?(?:e-?\d+)?"
_SAT_SUFFIX_RE = rf"(?:kl)?(?:-{'|-'.join(_SCOPE_TOKENS.values())})?(?:-{'|-'.join(_SATURATED_TOKENS.values())})?"
_TB_RE = re.compile(
    rf"^Tb(?:(?P<fixed>{_NUM_RE})|lin(?P<lin0>{_NUM_RE})-(?P<lin1>{_NUM_RE})"
    rf"|sat(?P<sat>{_NUM_RE})(?P<kl>kl)?(?:-(?P<scope>{'|'.join(_SCOPE_TOKENS.values())}))?"
    rf"(?:-(?P<saturated>{'|'.join(_SATURATED_TOKENS.values())}))?|klc(?P<klc>{_NUM_RE}))$"
)


def _parse_tb(tok: str) -> Temperature:
    m = _TB_RE.match(tok)
    if not m:
        raise ValueError(f"bad sampler-temperature token {tok!r}")
    if m["fixed"]:
        return Temperature("fixed", float(m["fixed"]))
    if m["lin0"]:
        return Temperature("linear", float(m["lin0"]), float(m["lin1"]))
    if m["sat"]:
        scope = {v: k for k, v in _SCOPE_TOKENS.items()}.get(m["scope"] or "", SCOPES[0])
        saturated = {v: k for k, v in _SATURATED_TOKENS.items()}.get(m["saturated"] or "", SATURATION_RULES[0])
        return Temperature("saturation", float(m["sat"]), None, bool(m["kl"]), scope, saturated)
    return Temperature("kl_cooling", float(m["klc"]))


# --------------------------------------------------------------------------------------------------
# Runs


@dataclass(frozen=True)
class Run:
    """Every per-run setting of the paper's Table 4, plus steps and validation interval."""

    model: str
    task: str
    N: int
    lr: float
    correction: str
    Tb: Temperature
    Tl: float | str  # learner temperature: a number, or "tied" (= the sampler's Tb)
    seed: int
    steps: int
    val_every: int
    replicate: str | None = None
    source: str = field(default="", compare=False)  # where in the paper the run comes from
    # extra verl overrides (``verl_overrides:``), sorted; part of the run's identity (key suffix _x<hash>)
    verl_extra: tuple[str, ...] = field(default=(), repr=False)  # not in repr: Snakemake params of old runs
    # the definitions of a study's own model / task (None: the built-in one of that name)
    model_spec: Model | None = field(default=None, compare=False, repr=False)
    task_spec: Task | None = field(default=None, compare=False, repr=False)

    @property
    def model_info(self) -> Model:
        return self.model_spec if self.model_spec is not None else MODELS[self.model]

    @property
    def task_info(self) -> Task:
        return self.task_spec if self.task_spec is not None else TASKS[self.task]

    @property
    def extra_token(self) -> str | None:
        """``x<8 hex>``: the hash of the extra verl overrides, or None without any."""
        if not self.verl_extra:
            return None
        return "x" + hashlib.sha256("\n".join(self.verl_extra).encode()).hexdigest()[:8]

    @property
    def key(self) -> str:
        task = self.task_info
        tl = "tied" if self.Tl == "tied" else _num(self.Tl)
        name = f"N{self.N}_lr{_num(self.lr)}_{self.correction}_{self.Tb.token()}_Tl{tl}_s{self.seed}"
        if self.steps != task.steps:
            name += f"_st{self.steps}"
        if self.val_every != task.val_every:
            name += f"_v{self.val_every}"
        if self.replicate:
            name += f"_{self.replicate}"
        if self.extra_token:
            name += f"_{self.extra_token}"
        return f"{self.model}/{self.task}/{name}"

    @property
    def sampling_seed(self) -> int:
        """vLLM's sampling seed: a ``rerun`` replicate draws its own samples (coolsampler.settings)."""
        return SAMPLING_SEED + (RERUN_SEED_OFFSET if self.replicate == "rerun" else 0)

    @property
    def learner_temperature(self) -> float:
        """The temperature of the actor, old-policy and reference passes."""
        return self.Tb.initial if self.Tl == "tied" else float(self.Tl)

    def settings(self) -> dict[str, Any]:
        """Plain settings, as written to ``run.yaml`` and used by figure selectors."""
        return {
            "model": self.model,
            "task": self.task,
            "N": self.N,
            "lr": self.lr,
            "correction": self.correction,
            "Tb": self.Tb.to_config(),
            "Tb_kind": self.Tb.kind,
            "Tb_initial": self.Tb.initial,
            "Tl": self.Tl,
            "seed": self.seed,
            "sampling_seed": self.sampling_seed,
            "steps": self.steps,
            "val_every": self.val_every,
            "replicate": self.replicate,
            "key": self.key,
            **({"verl_overrides": list(self.verl_extra)} if self.verl_extra else {}),
        }


_NAME_RE = re.compile(
    rf"^N(?P<N>\d+)_lr(?P<lr>{_NUM_RE})_(?P<corr>tis|none|mu_grpo)_(?P<tb>Tb[a-z]*{_NUM_RE}(?:-{_NUM_RE})?{_SAT_SUFFIX_RE})"
    rf"_Tl(?P<tl>tied|{_NUM_RE})_s(?P<seed>\d+)(?:_st(?P<steps>\d+))?(?:_v(?P<val>\d+))?"
    rf"(?:_(?P<rep>cut|rerun))?(?:_(?P<extra>x[0-9a-f]{{8}}))?$"
)
KEY_WILDCARD_RE = r"[a-z0-9](?:[a-z0-9\-]|\.(?!\.))*/[a-z0-9]+/N\d+_lr[0-9.e\-]+_(?:tis|none|mu_grpo)_Tb[a-z0-9.\-]+_Tl[a-z0-9.]+_s\d+(?:_st\d+)?(?:_v\d+)?(?:_cut|_rerun)?(?:_x[0-9a-f]{8})?"  # noqa: E501


def parse_key(key: str, study: Study | None = None) -> Run:
    """Turn a run key back into a Run. Raises ValueError naming what does not parse.

    With ``study``, a run it lists is returned as listed, and its models and tasks are known; a key with
    extra verl overrides (``_x<hash>``) can only come from a study that lists it."""
    if study is not None and key in (runs := study.by_key()):
        return runs[key]
    models = study.models if study is not None else MODELS
    tasks = study.tasks if study is not None else TASKS
    parts = key.split("/")
    if len(parts) != 3:
        raise ValueError(f"run key {key!r}: expected <model>/<task>/<settings>")
    model, task, name = parts
    if model not in models:
        raise ValueError(f"run key {key!r}: unknown model {model!r} (allowed: {', '.join(models)})")
    if task not in tasks:
        raise ValueError(f"run key {key!r}: unknown task {task!r} (allowed: {', '.join(tasks)})")
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(f"run key {key!r}: settings part {name!r} does not parse")
    if m["extra"]:
        raise ValueError(
            f"run key {key!r}: extra verl overrides ({m['extra']}) are known only to the study that lists the run"
        )
    t = tasks[task]
    run = Run(
        model=model,
        task=task,
        N=int(m["N"]),
        lr=float(m["lr"]),
        correction=m["corr"],
        Tb=_parse_tb(m["tb"]),
        Tl="tied" if m["tl"] == "tied" else float(m["tl"]),
        seed=int(m["seed"]),
        steps=int(m["steps"]) if m["steps"] else t.steps,
        val_every=int(m["val"]) if m["val"] else t.val_every,
        replicate=m["rep"],
        model_spec=models[model] if models[model] is not MODELS.get(model) else None,
        task_spec=t if t is not TASKS.get(task) else None,
    )
    if run.key != key:
        raise ValueError(f"run key {key!r} is not canonical (canonical form: {run.key!r})")
    return run


# --------------------------------------------------------------------------------------------------
# Studies

RUN_FIELDS = ("model", "task", "N", "lr", "correction", "Tb", "Tl", "seed", "steps", "val_every", "replicate")
# Tracker backends of verl's trainer.logger a study may add to the default (console: the progress lines;
# file: train.jsonl, which the analysis reads, so both are always on). Secrets come from the environment.
LOGGERS = ("console", "file", "tensorboard", "wandb", "mlflow")
DEFAULT_LOGGER = ("console", "file")


class StudyError(ValueError):
    """A study config that must not start any job. The message is one line: field and what is allowed."""


@dataclass
class Study:
    name: str
    results: Path
    runs: list[Run]
    figures: dict[str, dict[str, dict[str, Any]]]
    recipe: dict[str, Any]
    raw: dict[str, Any]
    # the built-in models and tasks plus the study's own (``models:``, ``tasks:``)
    models: dict[str, Model] = field(default_factory=lambda: dict(MODELS))
    tasks: dict[str, Task] = field(default_factory=lambda: dict(TASKS))

    def run_dir(self, run: Run) -> Path:
        return self.results / "runs" / run.key

    def by_key(self) -> dict[str, Run]:
        return {r.key: r for r in self.runs}

    def select(self, filt: Mapping[str, Any] | list[Mapping[str, Any]]) -> list[Run]:
        """Runs whose settings match every key of ``filt`` (a list value means any of).

        A list of filters selects the runs any of them selects, in study order."""
        filters = filt if isinstance(filt, list) else [filt]
        return [r for r in self.runs if any(matches(r, f) for f in filters)]


def matches(run: Run, filt: Mapping[str, Any]) -> bool:
    s = run.settings()
    for k, want in filt.items():
        have = s.get(k)
        options = want if isinstance(want, list) else [want]
        if k == "Tb":
            have_tb = run.Tb
            if not any(Temperature.from_config(o) == have_tb for o in options):
                return False
            continue
        if not any(_eq(have, o) for o in options):
            return False
    return True


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
    return a == b


def _expand(entry: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """A run entry whose values may be lists: the cross product of those lists."""
    grid_keys = [k for k, v in entry.items() if isinstance(v, list) and k not in ("source", "verl_overrides")]
    if not grid_keys:
        yield dict(entry)
        return
    for combo in itertools.product(*(entry[k] for k in grid_keys)):
        out = dict(entry)
        out.update(zip(grid_keys, combo, strict=True))
        yield out


def _make_run(
    settings: Mapping[str, Any],
    models: Mapping[str, Model] = MODELS,
    tasks: Mapping[str, Task] = TASKS,
    extra: Iterable[str] = (),
) -> Run:
    task = tasks[settings["task"]]
    model = models[settings["model"]]
    return Run(
        model=settings["model"],
        task=settings["task"],
        N=int(settings["N"]),
        lr=float(settings["lr"]),
        correction=settings["correction"],
        Tb=Temperature.from_config(settings["Tb"]),
        Tl=settings.get("Tl", 1.0) if settings.get("Tl", 1.0) == "tied" else float(settings.get("Tl", 1.0)),
        seed=int(settings["seed"]),
        steps=int(settings.get("steps", task.steps)),
        val_every=int(settings.get("val_every", task.val_every)),
        replicate=settings.get("replicate"),
        source=str(settings.get("source", "")),
        verl_extra=tuple(sorted({*extra, *settings.get("verl_overrides", [])})),
        model_spec=model if model is not MODELS.get(model.name) else None,
        task_spec=task if task is not TASKS.get(task.name) else None,
    )


def load_study(path: str | Path, *, results: str | Path | None = None) -> Study:
    """Read, validate and expand a study config. Raises StudyError (one line) on any bad value."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StudyError(f"{path}: not valid YAML: {e}".replace("\n", " ")) from e
    return study_from_dict(raw, origin=str(path), results=results)


def study_from_dict(raw: Any, *, origin: str = "study", results: str | Path | None = None) -> Study:
    from coolsampler.validate import check_study  # schema + semantic checks, one-line errors

    check_study(raw, origin)
    from coolsampler.registry import study_models, study_tasks

    models, tasks = study_models(raw, origin), study_tasks(raw, origin)
    from coolsampler.validate import check_names

    check_names(raw, origin, models, tasks)
    defaults = raw.get("defaults", {})
    study_extra = list(raw.get("verl_overrides") or [])
    runs: list[Run] = []
    where: dict[str, str] = {}
    for i, entry in enumerate(raw["runs"]):
        for settings in _expand({**defaults, **entry}):
            from coolsampler.validate import check_run_settings

            check_run_settings(settings, f"{origin}: runs[{i}]", models, tasks)
            run = _make_run(settings, models, tasks, study_extra)
            if run.verl_extra:
                from coolsampler.overrides import ExtraOverrideError, check_extra_overrides

                try:
                    check_extra_overrides(run)
                except ExtraOverrideError as err:
                    raise StudyError(f"{origin}: runs[{i}].verl_overrides: {err}") from None
            if run.key in where:
                raise StudyError(
                    f"{origin}: runs[{i}]: duplicate run {run.key} (already defined by {where[run.key]});"
                    " a replicate needs replicate: cut|rerun"
                )
            where[run.key] = f"runs[{i}]"
            runs.append(run)
    study = Study(
        name=raw["name"],
        results=Path(results if results is not None else raw.get("results", f"results/{raw['name']}")),
        runs=runs,
        figures=raw.get("figures", {}) or {},
        recipe={**(raw.get("recipe", {}) or {}), **({"logger": _logger(raw)} if "logger" in raw else {})},
        raw=raw,
        models=models,
        tasks=tasks,
    )
    from coolsampler.validate import check_figures

    check_figures(study, origin)
    return study


def _logger(raw: Mapping[str, Any]) -> list[str]:
    """The study's trackers: console and file always (progress lines, train.jsonl), then the ones it names."""
    return list(dict.fromkeys([*DEFAULT_LOGGER, *raw["logger"]]))


def with_settings(run: Run, **changes: Any) -> Run:
    return replace(run, **changes)


__all__ = [
    "CORRECTIONS",
    "REPLICATES",
    "Run",
    "Study",
    "StudyError",
    "Temperature",
    "load_study",
    "parse_key",
    "study_from_dict",
]

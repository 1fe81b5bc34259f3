"""Studies, runs and run keys.

A *study* (``config/*.yaml``) lists runs by their settings. Each run has a *key*: a readable
relative path that holds every per-run setting, e.g.::

    qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43

``model/task/N<refresh>_lr<lr>_<correction>_Tb<sampler T>_Tl<learner T>_s<seed>`` followed, only
where they differ from the task's defaults, by ``_st<steps>`` and ``_v<val interval>``, and by
``_cut`` / ``_rerun`` for replicates, and by ``_x<hash>`` when the run passes extra verl overrides
(``verl_overrides:``; the hash is of the sorted list, so two runs differing only there never share a
directory). A run refreshed by a staleness guard (``guard:``, ``coolsampler.spec.guard``) carries
``_g<signal><threshold>w<window>m<min>`` right after ``N<N>`` (N is then its longest interval, e.g.
``N96_gprobs_diff0.1w5m1_lr2e-6_...``); one refreshed on a fixed schedule (``N: {schedule: [...]}``)
carries ``_sch<hash>`` there, N being the longest interval the schedule leaves. Runs without either
keep the keys they always had. ``parse_key`` inverts ``Run.key`` exactly, so a Snakemake wildcard is turned back into
settings without a lookup table (an ``_x`` or ``_sch`` key needs its study, which holds the overrides or
the schedule), and anything
that does not parse is rejected (no shell can hide in a key).

Models and tasks are the paper's (``coolsampler.spec.settings``) plus any the study defines in its
``models:`` and ``tasks:`` blocks; a run carries the definitions it uses (``Run.model_info``,
``Run.task_info``), so everything downstream reads them from the run.

Study-wide recipe settings (batch shape, lengths) live in the study's ``recipe`` block and in
``coolsampler.spec.settings``; the run directory records the fully resolved configuration.

This module never imports verl, vLLM or torch.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coolsampler.spec.guard import (
    GUARD_TOKEN_RE,
    SCHEDULE_TOKEN_RE,
    GuardSpec,
    longest_interval,
    parse_guard_token,
    schedule_token,
)
from coolsampler.spec.inputs import InputError
from coolsampler.spec.layout import KEY_PARTS, Layout, check_results, expand_results
from coolsampler.spec.registry import study_models, study_tasks
from coolsampler.spec.settings import (
    CORRECTIONS,
    MODELS,
    REPLICATES,
    RERUN_SEED_OFFSET,
    SAMPLING_SEED,
    TASKS,
    Model,
    Task,
)
from coolsampler.spec.temperature import NUM_RE, TOKEN_RE, Temperature, num, parse_token
from coolsampler.spec.validate import (
    StudyError,
    check_extra_syntax,
    check_figures,
    check_names,
    check_run_settings,
    check_study,
    unknown_name,
)
from coolsampler.spec.world import check_val_samples, study_screen, study_worlds
from coolsampler.spec.yaml_file import load_yaml

# --------------------------------------------------------------------------------------------------
# Runs

EXTRA_HEX = 8  # hex digits of the extra overrides' sha256 in a key (``_x<hash>``)


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
    # the staleness guard (key token _g...) or a fixed refresh schedule (_sch<hash>); N is then the longest
    # interval. Not in repr, like verl_extra: Snakemake records a rule's params, and a run without them
    # must keep the params it always had.
    guard: GuardSpec | None = field(default=None, repr=False)
    schedule: tuple[int, ...] | None = field(default=None, repr=False)

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
        return "x" + hashlib.sha256("\n".join(self.verl_extra).encode()).hexdigest()[:EXTRA_HEX]

    @property
    def refresh_token(self) -> str:
        """``N96``, ``N96_gprobs_diff0.1w5m1`` (a guard) or ``N153_sch1a2b3c4d`` (a schedule): the key's
        refresh pieces."""
        tokens = self.key_tokens()
        return "".join(
            f"{p.lead}{tokens[p.group]}"
            for p in KEY_PIECES
            if p.group in REFRESH_PIECES and tokens[p.group] is not None
        )

    @property
    def refresh(self) -> str:
        """How the sampler is refreshed: ``fixed`` (every N steps), ``guard`` or ``schedule``. A figure or
        claims filter may name it (``refresh: fixed``), which lets a study compare the three kinds."""
        return "guard" if self.guard is not None else "schedule" if self.schedule is not None else "fixed"

    @property
    def refresh_text(self) -> str:
        """How the sampler is refreshed, for people: ``every 96 steps``, ``guard probs_diff > 0.1, ...,
        at most every 96 steps``, ``schedule of 3 refreshes (longest interval 153)``."""
        if self.guard is not None:
            return f"guard {self.guard.text()}, at most every {self.N} steps"
        if self.schedule is not None:
            return f"schedule of {len(self.schedule)} refreshes (longest interval {self.N})"
        return f"every {self.N} steps"

    def key_tokens(self) -> dict[str, str | None]:
        """The value of each piece of the key's settings part (``KEY_PIECES``); None leaves a piece out.
        ``key`` writes these and ``parse_key`` reads them back with the regular expression built from
        the same pieces, so the two cannot drift apart."""
        task = self.task_info
        return {
            "N": str(self.N),
            "guard": self.guard.token() if self.guard is not None else None,
            "sched": schedule_token(self.schedule) if self.schedule is not None else None,
            "lr": num(self.lr),
            "corr": self.correction,
            "tb": self.Tb.token(),
            "tl": "tied" if self.Tl == "tied" else num(self.Tl),
            "seed": str(self.seed),
            "steps": str(self.steps) if self.steps != task.steps else None,
            "val": str(self.val_every) if self.val_every != task.val_every else None,
            "rep": self.replicate or None,
            "extra": self.extra_token,
        }

    @property
    def key(self) -> str:
        tokens = self.key_tokens()
        name = "".join(f"{p.lead}{tokens[p.group]}" for p in KEY_PIECES if tokens[p.group] is not None)
        return f"{self.model}/{self.task}/{name}"

    @property
    def sampling_seed(self) -> int:
        """vLLM's sampling seed: a ``rerun`` replicate draws its own samples (coolsampler.spec.settings)."""
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
            **({"guard": self.guard.to_config()} if self.guard is not None else {}),
            **({"schedule": list(self.schedule)} if self.schedule is not None else {}),
        }


@dataclass(frozen=True)
class KeyPiece:
    """One piece of a run key's settings part: ``lead`` (literal text) then a token matching ``pattern``.
    ``group`` names it in ``Run.key_tokens`` and in the regular expression; ``optional`` pieces are
    left out where the run has no value (a default, no guard)."""

    lead: str
    group: str
    pattern: str
    optional: bool = False


def _alternatives(values: Iterable[str]) -> str:
    return "|".join(re.escape(v) for v in values)


EXTRA_TOKEN_RE = rf"x[0-9a-f]{{{EXTRA_HEX}}}"  # Run.extra_token
# The settings part of a run key, in the order Run.key writes it: the one grammar of the key.
KEY_PIECES: tuple[KeyPiece, ...] = (
    KeyPiece("N", "N", r"\d+"),
    KeyPiece("_", "guard", GUARD_TOKEN_RE, optional=True),
    KeyPiece("_", "sched", SCHEDULE_TOKEN_RE, optional=True),
    KeyPiece("_lr", "lr", NUM_RE),
    KeyPiece("_", "corr", _alternatives(CORRECTIONS)),
    KeyPiece("_", "tb", TOKEN_RE),
    KeyPiece("_Tl", "tl", rf"tied|{NUM_RE}"),
    KeyPiece("_s", "seed", r"\d+"),
    KeyPiece("_st", "steps", r"\d+", optional=True),
    KeyPiece("_v", "val", r"\d+", optional=True),
    KeyPiece("_", "rep", _alternatives(REPLICATES), optional=True),
    KeyPiece("_", "extra", EXTRA_TOKEN_RE, optional=True),
)
REFRESH_PIECES = ("N", "guard", "sched")  # how the sampler is refreshed (Run.refresh_token)
# What a model or task name may be in a key wildcard: no '..' (a key is a path), a task may carry its
# world's key (``chain-1a2b3c4d``, coolsampler.spec.world).
MODEL_NAME_RE = r"[a-z0-9](?:[a-z0-9\-]|\.(?!\.))*"
TASK_NAME_RE = r"[a-z0-9]+(?:-[0-9a-f]{8})?"


def settings_re(*, named: bool) -> str:
    """The regular expression of a key's settings part, built from ``KEY_PIECES``; ``named`` gives each
    piece its group (for ``parse_key``), else the groups are plain (a Snakemake wildcard constraint)."""
    out = []
    for p in KEY_PIECES:
        body = f"(?P<{p.group}>{p.pattern})" if named else f"(?:{p.pattern})"
        out.append(f"(?:{re.escape(p.lead)}{body})?" if p.optional else f"{re.escape(p.lead)}{body}")
    return "".join(out)


_NAME_RE = re.compile(f"^{settings_re(named=True)}$")
# Rule train's wildcard constraint: a path-safe model and task, then the settings part.
KEY_WILDCARD_RE = f"{MODEL_NAME_RE}/{TASK_NAME_RE}/{settings_re(named=False)}"


def parse_key(key: str, study: Study | None = None) -> Run:
    """Turn a run key back into a Run. Raises ValueError naming what does not parse.

    With ``study``, a run it lists is returned as listed, and its models and tasks are known; a key with
    extra verl overrides (``_x<hash>``) can only come from a study that lists it."""
    if study is not None and key in (runs := study.by_key()):
        return runs[key]
    models = study.models if study is not None else MODELS
    tasks = study.tasks if study is not None else TASKS
    parts = key.split("/")
    if len(parts) != KEY_PARTS:
        raise ValueError(f"run key {key!r}: expected <model>/<task>/<settings>")
    model, task, name = parts
    if model not in models:
        raise ValueError(f"run key {key!r}: {unknown_name('model', 'model', model, models)}")
    if task not in tasks:
        raise ValueError(f"run key {key!r}: {unknown_name('task', 'task', task, tasks)}")
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(f"run key {key!r}: settings part {name!r} does not parse")
    if m["extra"]:
        raise ValueError(
            f"run key {key!r}: extra verl overrides ({m['extra']}) are known only to the study that lists the run"
        )
    if m["sched"]:
        raise ValueError(
            f"run key {key!r}: a refresh schedule ({m['sched']}) is known only to the study that lists the run"
        )
    t = tasks[task]
    try:
        tb = parse_token(m["tb"])
    except ValueError as e:  # e.g. a retired suffix: the message names the token to write instead
        raise ValueError(f"run key {key!r}: {e}") from None
    run = Run(
        model=model,
        task=task,
        N=int(m["N"]),
        lr=float(m["lr"]),
        correction=m["corr"],
        Tb=tb,
        Tl="tied" if m["tl"] == "tied" else float(m["tl"]),
        seed=int(m["seed"]),
        steps=int(m["steps"]) if m["steps"] else t.steps,
        val_every=int(m["val"]) if m["val"] else t.val_every,
        replicate=m["rep"],
        model_spec=models[model] if models[model] is not MODELS.get(model) else None,
        task_spec=t if t is not TASKS.get(task) else None,
        guard=parse_guard_token(m["guard"]) if m["guard"] else None,
    )
    if run.key != key:
        raise ValueError(f"run key {key!r} is not canonical (canonical form: {run.key!r})")
    return run


def key_settings(key: str) -> dict[str, Any]:
    """The settings a run key names, for any model and task: ``parse_key``'s where it knows the model
    and the task, else the key's own pieces (its length and validation interval where the key writes
    them or its task is known, since only a known task has defaults for them). Raises ValueError saying why a key
    does not parse. For reading logs named by key (``coolsampler analyze``), which must not drop the key
    of a model this package does not ship."""
    parts = key.split("/")
    if len(parts) != KEY_PARTS:
        raise ValueError(f"run key {key!r}: expected <model>/<task>/<settings>")
    model, task, name = parts
    if model in MODELS and task in TASKS:
        return parse_key(key).settings()
    for what, value, pattern in (("model", model, MODEL_NAME_RE), ("task", task, TASK_NAME_RE)):
        if not re.fullmatch(pattern, value):
            raise ValueError(f"run key {key!r}: {what} name {value!r} is not one a key may hold ({pattern})")
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(
            f"run key {key!r}: settings part {name!r} does not parse (N<int>_lr<num>_<{'|'.join(CORRECTIONS)}>"
            "_Tb<temperature>_Tl<num|tied>_s<seed>[_st<steps>][_v<val_every>])"
        )
    if m["extra"] or m["sched"]:
        raise ValueError(f"run key {key!r}: {m['extra'] or m['sched']} is known only to the study that lists the run")
    try:
        tb = parse_token(m["tb"])
    except ValueError as e:
        raise ValueError(f"run key {key!r}: {e}") from None
    out: dict[str, Any] = {
        "model": model,
        "task": task,
        "N": int(m["N"]),
        "lr": float(m["lr"]),
        "correction": m["corr"],
        "Tb": tb.to_config(),
        "Tb_kind": tb.kind,
        "Tb_initial": tb.initial,
        "Tl": "tied" if m["tl"] == "tied" else float(m["tl"]),
        "seed": int(m["seed"]),
        "replicate": m["rep"],
        "key": key,
    }
    known = TASKS.get(task)  # a key leaves out a known task's defaults
    if m["steps"] or known:
        out["steps"] = int(m["steps"]) if m["steps"] else known.steps
    if m["val"] or known:
        out["val_every"] = int(m["val"]) if m["val"] else known.val_every
    if m["guard"]:
        out["guard"] = parse_guard_token(m["guard"]).to_config()
    return out


# --------------------------------------------------------------------------------------------------
# Studies

# The trackers of verl's trainer.logger every run has (console: the progress lines; file: train.jsonl,
# which the analysis reads); a study's ``logger:`` adds others. Secrets come from the environment.
DEFAULT_LOGGER = ("console", "file")


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
        return Path(Layout(str(self.results)).run_dir(run.key))

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
        # refresh is derived, not a setting of run.yaml: adding it there would change every run's record
        have = run.refresh if k == "refresh" else s.get(k)
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
    steps = int(settings.get("steps", task.steps))
    schedule = refresh_schedule(settings["N"])
    guard = settings.get("guard")
    return Run(
        # a world's model and task are named in the study by the world's name, in the run by <name>-<key>
        model=model.name,
        task=task.name,
        N=longest_interval(schedule, steps) if schedule is not None else int(settings["N"]),
        lr=float(settings["lr"]),
        correction=settings["correction"],
        Tb=Temperature.from_config(settings["Tb"]),
        Tl=settings.get("Tl", 1.0) if settings.get("Tl", 1.0) == "tied" else float(settings.get("Tl", 1.0)),
        seed=int(settings["seed"]),
        steps=steps,
        val_every=int(settings.get("val_every", task.val_every)),
        replicate=settings.get("replicate"),
        source=str(settings.get("source", "")),
        verl_extra=tuple(sorted({*extra, *settings.get("verl_overrides", [])})),
        model_spec=model if model is not MODELS.get(model.name) else None,
        task_spec=task if task is not TASKS.get(task.name) else None,
        guard=GuardSpec.from_config(guard) if guard is not None else None,
        schedule=schedule,
    )


def refresh_schedule(N: Any) -> tuple[int, ...] | None:
    """The steps of an ``N: {schedule: [...]}`` setting, None for a plain interval."""
    return tuple(N["schedule"]) if isinstance(N, Mapping) else None


# A check of a run's extra verl overrides against what the pipeline sets (``coolsampler.train.overrides
# .check_extra_overrides``): it needs verl's overrides, which this layer does not build, so whoever
# trains passes it in. Raises ValueError with a one-line reason.
OverrideCheck = Callable[[Run], None]


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` key by key, mappings recursively: what Snakemake makes of two
    ``--configfile`` options (``snakemake.utils.update_config``), so a small override file (one's own
    GPUs: config/hardware/) means the same to ``coolsampler`` as to the pipeline."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


_STUDY_SHAPE = "a study is a mapping with name: and runs: (config/config.yaml is one)"
_OVERLAY_SHAPE = "an override file is a mapping of study keys (e.g. hardware:, models:)"


def _kind(doc: Any) -> str:
    return "a list" if isinstance(doc, list) else f"the {type(doc).__name__} {str(doc)[:40]!r}"


def load_study(
    path: str | Path,
    *,
    results: str | Path | None = None,
    check_overrides: OverrideCheck | None = None,
    overlays: Sequence[str | Path] = (),
) -> Study:
    """Read, validate and expand a study config, with ``overlays`` merged over it in order (``merged``).
    Raises InputError (one line: the file and line) on a file that is not a YAML mapping, StudyError (one
    line) on any bad value."""
    raw: Any = {}
    for i, p in enumerate([path, *overlays]):
        # the one safe reader: a duplicate key, an anchor cycle or bomb, a tag is one InputError with the line
        doc = load_yaml(p, what="override file" if i else "study file")
        if doc is None:
            raise InputError(p, "is empty; " + (_OVERLAY_SHAPE if i else _STUDY_SHAPE))
        if not isinstance(doc, Mapping):
            raise InputError(p, (_OVERLAY_SHAPE if i else _STUDY_SHAPE) + f", not {_kind(doc)}", where=1)
        raw = doc if i == 0 else merged(raw, doc)
    origin = " + ".join(str(p) for p in [path, *overlays])
    return study_from_dict(raw, origin=origin, results=results, check_overrides=check_overrides)


def study_results(raw: Mapping[str, Any], origin: str, results: str | Path | None = None) -> Path:
    """The one folder a study's results go to, whichever command asks (the rules through common.smk,
    status, plan, claims): ``results`` (a command's flag) or the study's ``results:``, expanded as the
    shell would (``~``, ``$VAR``), else ``results/<name>``. A StudyError naming ``results`` refuses
    an unset variable, an empty path, and a folder no study may have (``layout.check_results``)."""
    value = str(results) if results is not None else raw.get("results", f"results/{raw['name']}")
    try:
        path = expand_results(value)
        check_results(path, dict(raw))
    except ValueError as err:
        raise StudyError(f"{origin}: results: {err}") from None
    return Path(path)


def study_from_dict(
    raw: Any, *, origin: str = "study", results: str | Path | None = None, check_overrides: OverrideCheck | None = None
) -> Study:
    """A validated study from its config. Extra verl overrides are checked for their shape always, and
    against the keys the pipeline sets when ``check_overrides`` is given (every caller that trains or
    prints verl's overrides gives it; analysis alone needs no verl keys)."""
    check_study(raw, origin)  # schema + semantic checks, one-line errors
    models, tasks = study_models(raw, origin), study_tasks(raw, origin)
    check_names(raw, origin, models, tasks)
    defaults = raw.get("defaults", {})
    study_extra = list(raw.get("verl_overrides") or [])
    runs: list[Run] = []
    where: dict[str, str] = {}
    for i, entry in enumerate(raw["runs"]):
        for settings in _expand({**defaults, **entry}):
            check_run_settings(settings, f"{origin}: runs[{i}]", models, tasks)
            run = _make_run(settings, models, tasks, study_extra)
            if run.verl_extra:
                try:
                    check_extra_syntax(run.verl_extra)
                    if check_overrides is not None:
                        check_overrides(run)
                except ValueError as err:
                    raise StudyError(f"{origin}: runs[{i}].verl_overrides: {err}") from None
            if run.key in where:
                raise StudyError(
                    f"{origin}: runs[{i}]: duplicate run {run.key} (already defined by {where[run.key]});"
                    f" a replicate needs replicate: {'|'.join(REPLICATES)}"
                )
            where[run.key] = f"runs[{i}]"
            runs.append(run)
    check_val_samples(study_worlds(raw, origin), raw.get("recipe") or {}, origin)
    study_screen(raw, origin)
    study = Study(
        name=raw["name"],
        results=study_results(raw, origin, results),
        runs=runs,
        figures=raw.get("figures", {}) or {},
        # the trackers: console and file always (progress lines, train.jsonl), then the ones the study names
        recipe={
            **(raw.get("recipe", {}) or {}),
            **({"logger": list(dict.fromkeys([*DEFAULT_LOGGER, *raw["logger"]]))} if "logger" in raw else {}),
        },
        raw=raw,
        models=models,
        tasks=tasks,
    )
    check_figures(study, origin)
    return study

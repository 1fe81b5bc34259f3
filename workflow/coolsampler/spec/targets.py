"""The registry of every output target (figures, tables), their options, and how one is rendered.

One place says which targets exist, what kind each is, which panels its study entry names and which
options it takes; ``coolsampler.spec.validate`` checks a study's ``figures:`` block against it, the rules
of ``workflow/rules/analysis.smk`` render through ``coolsampler.paper.render``, and the tests iterate
over it. The drawing itself is ``coolsampler.paper.figures``, the table content ``coolsampler.paper.tables``.

A study's ``figures:`` entry for a target is ``panel -> settings filter`` plus, optionally, the
reserved key ``options`` (``OPTIONS`` lists what each target accepts)::

    fig1:
      a: {N: 192, correction: tis}
      b: {N: 192, correction: tis, seed: 1}
      options: {kl: k3}        # draw verl's k3 KL estimator instead of k1

Claims: the claims registry and report (``config/claims.yaml``, judged by ``coolsampler.results.claims``
and written by ``coolsampler.paper.claims_report``) add their own target kind; register it in
``TARGETS`` with kind ``"claims"`` (or ``"report"``), so the one list of targets stays here.

Imports only the spec layer: validating a study loads no drawing code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coolsampler.spec.metrics_schema import KL_COLUMNS
from coolsampler.spec.settings import KL_EARLY_NAT, KL_LEAD_NAT, kl_above_text, nat_text

OPTIONS_KEY = "options"  # the reserved key of a study's figures entry (not a panel)


@dataclass(frozen=True)
class Target:
    """One output: its function, kind ('figure' | 'table'), panel names and allowed options.

    ``fn`` is ``"module:function"`` of the paper layer, imported only when the target is rendered
    (``coolsampler.paper.render``), so that validating a study (at every Snakemake start) loads no
    drawing code.
    """

    name: str
    fn: str
    kind: str
    panels: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # option -> allowed values
    title: str = ""  # the paper's title of the figure/table
    draws: str = ""  # what it draws, for a reader (docs page, report caption)
    panel_help: Mapping[str, str] = field(default_factory=dict)  # panel -> what its filter should select
    # the metrics columns it draws from: a log that never logged one is told which verl setting logs it
    # (coolsampler figures; metrics_schema.PROVIDED_BY)
    reads: tuple[str, ...] = ("val_acc",)
    paper: bool = True  # a figure or table of the paper (the paper study draws every one of those)
    optional: tuple[str, ...] = ()  # panels a study may leave out (the target draws them only where named)

    @property
    def required(self) -> tuple[str, ...]:
        """The panels every study that draws the target names (the paper's panels)."""
        return tuple(p for p in self.panels if p not in self.optional)

    @property
    def suffixes(self) -> tuple[str, ...]:
        return (".pdf", ".png") if self.kind == "figure" else (".csv", ".tex", ".md", ".html")


_KL = {"kl": tuple(KL_COLUMNS)}  # every figure that draws the learner-sampler KL

_ACC = "validation accuracy against step; grey vertical lines are the sampler refreshes (multiples of N)"
_KL_AXIS = (
    f"learner-sampler KL per token (log axis, k1 unless option kl: k3; dashed line labelled {nat_text(KL_LEAD_NAT)}); "
    "values <= 0, which k1 of a batch can take, and values below the axis floor are drawn on the floor "
    "as hollow triangles"
)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "fig1", "coolsampler.paper.figures:fig1", "figure", ("a", "b", "c"), _KL,
            title="Figure 1: finite safe staleness; cooling extends it",
            draws=f"(a) {_ACC}; (b) {_KL_AXIS}; (c), where a study names it, the KL's growth (its value at step 1,"
            " the tempering offset, taken off).",
            reads=("val_acc", "kl"),
            panel_help={
                "a": "the runs to compare at one refresh interval (paper: 1.5B GSM8K N=192 TIS, Tb 1.0/0.8/0.9, "
                "seeds, the tied learner)",
                "b": "one seed of each temperature (paper: the seed-1 runs)",
                "c": "optional: the runs whose KL growth to compare (the cliff study: every seed of both"
                " temperatures; the paper draws no such panel)",
            },
            optional=("c",),
        ),
        Target(
            "fig2", "coolsampler.paper.figures:fig2", "figure", ("a",), _KL,
            title="Figure 2: cooling lowers the learner-sampler mismatch",
            draws="one row per model/task/N: (a) the KL at a fixed first-cycle step (the x-label names it: 110, 60 "
            "where N=96, N where N <= 60), one dot per seed, the seed mean as a bar and the ratio Tb 1.0 / Tb 0.8 "
            f"at the right; (b) the first step with {kl_above_text(KL_EARLY_NAT)} nat, hollow where not reached"
            " before the refresh. "
            "Only fixed Tb 1.0 and 0.8, no replicates, one learning rate per row; other runs are named in the note.",
            reads=("kl",),
            panel_help={"a": "every run to compare: TIS, fixed Tb 1.0 and 0.8, every model/task/N row"},
        ),
        Target(
            "fig3", "coolsampler.paper.figures:fig3", "figure", ("a", "b"),
            title="Figure 3: Qwen2.5-Math-7B on GSM8K",
            draws=f"{_ACC}, two refresh intervals side by side.",
            panel_help={"a": "7B GSM8K N=144, seeds 1 and 43", "b": "7B GSM8K N=192"},
        ),
        Target(
            "fig4", "coolsampler.paper.figures:fig4", "figure", ("a",), _KL,
            title="Figure 4: lower learning rate, mu-GRPO and cooling",
            draws=f"(a) {_ACC}; (b) {_KL_AXIS}; (c) mu-GRPO's logged veto (responses) and ratio-clip (tokens) "
            "fractions.",
            reads=("val_acc", "kl"),
            panel_help={
                "a": "1.5B GSM8K N=192 seeds 43/44: TIS Tb 1 at three learning rates, cooled TIS, mu-GRPO Tb 1.0 "
                "and 0.8"
            },
        ),
        Target(
            "fig5", "coolsampler.paper.figures:fig5", "figure", ("a", "b", "c"),
            title="Figure 5: boundaries",
            draws=f"{_ACC}, three settings where cooling's effect has limits.",
            panel_help={
                "a": "1.5B GSM8K N=288, every temperature",
                "b": "MATH at the doubled learning rate (4e-6), N=288",
                "c": "MATH at the standard learning rate, N=192",
            },
        ),
        Target(
            "fig6", "coolsampler.paper.figures:fig6", "figure", ("a", "b"),
            title="Figure 6: cooling without the correction only delays collapse",
            draws=f"{_ACC}; runs without the importance correction dashed.",
            panel_help={
                "a": "GSM8K N=96: no correction (cooled, seeds, KL-triggered cooling), cooled and uncooled TIS",
                "b": "MATH N=96",
            },
        ),
        Target(
            "fig7", "coolsampler.paper.figures:fig7", "figure", ("a", "b"),
            title="Figure 7: adaptive and scheduled temperature",
            draws=f"top: {_ACC}; bottom: the sampler temperature used (mean over the step's prompts, min-max "
            "shaded; a fixed Tb, which runs do not log, as a flat line at its value).",
            panel_help={
                "a": "N=96: the saturation controller with and without the KL gate, the linear schedule, the "
                "doubled lr, fixed-Tb references",
                "b": "N=192: the controller and its references",
            },
        ),
        Target(
            "fig8", "coolsampler.paper.figures:fig8", "figure", ("a",), _KL,
            title="Figure 8: every run at refresh interval 144",
            draws="six diagnostics of the same runs: validation accuracy, learner-sampler KL (log, "
            f"{nat_text(KL_LEAD_NAT)} labelled), learner entropy, responses at the length limit, training reward, "
            "gradient norm (log); the cut replicate dash-dotted with hollow markers.",
            reads=("val_acc", "kl", "entropy", "clip_frac", "reward", "grad_norm"),
            panel_help={"a": "every 7B run at N=144, the cut replicate included"},
        ),
        Target("table1", "coolsampler.paper.tables:table1", "table", ("rows",), title="Table 1",
               panel_help={"rows": "the arms to compare (paper: 1.5B GSM8K seeds 43/44, TIS Tb 1.0/0.8 at "
                                   "N=96/192, TIS Tb 1 at lower learning rates)"}),
        Target("table2", "coolsampler.paper.tables:table2", "table", ("rows",), title="Table 2",
               reads=("val_acc", "kl", "kl_to_init"),
               panel_help={"rows": "every run: which of them degrade is read from the data"}),
        Target("table3", "coolsampler.paper.tables:table3", "table", ("rows",), title="Table 3",
               reads=("kl", "entropy", "clip_frac"),
               panel_help={"rows": "the runs of the cycle-aligned readings (7B N=144; 1.5B N=192 Tb 0.8)"}),
        Target("table4", "coolsampler.paper.tables:table4", "table", ("rows",), title="Table 4",
               reads=("val_acc", "kl"),
               panel_help={"rows": "every run of the study"}),
        # not a figure of the paper: the staleness guard's experiment (config/guard.yaml)
        Target("guard_frontier", "coolsampler.paper.figures:guard_frontier", "figure", ("a",),
               title="The staleness guard against the fixed-N frontier",
               draws="mean refresh interval (steps / refreshes, log axis) against (a) the fraction of runs that "
               "degrade and (b) the whole-run accuracy; the fixed-N arms as a line (the frontier), each guard arm "
               "as a star, replayed schedules as diamonds; the dotted line is 1.5 x the largest fixed N none of "
               "whose runs degrade.",
               reads=("val_acc", "refreshed"),
               panel_help={"a": "every run to compare: the fixed-N arms, the guard arms and their replayed "
                                "schedules, at one correction and sampler temperature or several"}, paper=False),
        # claims / report targets: added by the claims module (see the module docstring)
    )
}  # fmt: skip


class PanelSpec(Mapping[str, list]):
    """Rule figure/table's ``panels`` parameter (panel -> its runs' settings and files), shown short.

    Snakemake prints a job's parameters in every dry-run reason and in the report's job pane; the
    whole spec of a paper table is tens of kB. Its content follows from the job's input files (each
    run's key holds its settings), so a short form loses nothing: ``panels a: 4 runs, b: 2 runs``.
    """

    def __init__(self, spec: Mapping[str, list]) -> None:
        self._spec = dict(spec)

    def __getitem__(self, name: str) -> list:
        return self._spec[name]

    def __iter__(self):  # noqa: ANN204 - Mapping protocol
        return iter(self._spec)

    def __len__(self) -> int:
        return len(self._spec)

    def __repr__(self) -> str:
        return "panels " + ", ".join(f"{p}: {len(runs)} runs" for p, runs in self._spec.items())

    __str__ = __repr__


class OptionError(ValueError):
    """An option a target does not take, or a value it does not allow. One line."""


def panel_filters(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A study's figures entry without its ``options``: panel -> filter(s)."""
    return {k: v for k, v in entry.items() if k != OPTIONS_KEY}


def target_options(target: str, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The validated options of a study's figures entry for ``target`` (defaults filled in).

    Raises OptionError naming the option and what is allowed.
    """
    allowed = TARGETS[target].options if target in TARGETS else {}
    given = dict((entry or {}).get(OPTIONS_KEY) or {})
    out = {k: vals[0] for k, vals in allowed.items()}
    for k, v in given.items():
        if k not in allowed:
            what = ", ".join(sorted(allowed)) or "none"
            raise OptionError(f"figures.{target}.options: unknown option {k!r}; allowed: {what}")
        if v not in allowed[k]:
            raise OptionError(f"figures.{target}.options.{k}: {v!r} is not allowed; allowed: {', '.join(allowed[k])}")
        out[k] = v
    return out


class PanelError(ValueError):
    """A panel name the target does not draw. One line, naming the panels it takes."""


def check_panels(target: str, names: Iterable[str]) -> None:
    """Refuse panel names ``target`` does not have (a typo would otherwise draw an empty panel)."""
    unknown = sorted(set(names) - set(TARGETS[target].panels) - {OPTIONS_KEY})
    if unknown:
        raise PanelError(
            f"{target}: unknown panel{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))};"
            f" allowed: {', '.join(TARGETS[target].panels)}"
        )

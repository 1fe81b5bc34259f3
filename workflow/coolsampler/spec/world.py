"""A generated world a study trains in: the chain task with free words, and its tiny Qwen2 (``worlds:``).

    worlds:
      chain:
        chain_length: 5          # prompt digits = answer blocks
        words_per_block: 3       # free words before each block's running-sum digit
        vocab_words: 32          # free-word vocabulary (single letters, the commonest first)
        zipf: 1.0                # free-word frequencies in the supervised data, p(rank k) ~ 1/k^zipf
        tail_zipf: null          # after a tail word (rank >= TAIL_RANK), the next word's exponent (flatter)
        error: {base: 0.02, slope: 0.58, power: 1.5}   # P(a block's digit is wrong) = base + slope * r^power
        model: {hidden_size: 96, intermediate_size: 288, layers: 4, heads: 3}
        warm_start: {greedy_acc: 0.5}
    defaults: {model: chain, task: chain, steps: 64, val_every: 8}

Why a world and not just a model and a task: the paper's cliff needs a sampler with free per-token
entropy whose rare choices predict mistakes (the learner then sharpens toward the sampler's modes, as
Section 3.2 describes), a warm start with room to improve under *greedy* scoring, and a model small enough
for a laptop. Those are properties of data and model together, so one block of knobs makes both, and the
knobs (with the generator's code) key them: a run names its world as ``<name>-<key>``, so a changed knob
is a new model, new data and new runs, never a stale cache. A run's length and validation interval are
run settings (``defaults:``/``runs:``), not knobs: a longer run trains in the same world.

The generator is ``coolsampler.world.chain`` (torch, in the rules that build the world); this module
only reads the knobs. No verl, vLLM or torch here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from coolsampler.spec.settings import Model, Task
from coolsampler.spec.source import code_content
from coolsampler.spec.validate import StudyError

# The generator, whose code is part of every world's key (a change of how data or model are made
# rebuilds them), and the reward verl loads from it by path.
GENERATOR = Path(__file__).resolve().parents[1] / "world" / "chain.py"
REWARD_FILE = GENERATOR.relative_to(Path(__file__).resolve().parents[3]).as_posix()  # from the repository root
REWARD_FUNCTION = "compute_score"
# Package modules the generator imports, each under the name it had when the worlds made so far were
# keyed: the key reads the generator's code with these names (``generator_code``). A module that moves
# within the package makes the same data and model, so its move must rebuild no world and retrain no run
# in one; a change of what the generator does still changes the key. Named below the package: a whole
# dotted package name in a string counts as an import (coolsampler.train.code), and these import nothing.
KEYED_NAMES: dict[str, str] = {"world.toy": "testkit.toy"}
# The tokens of every world: verl's Qwen token builder needs "\n" as one token and "<|im_end|>" to exist;
# the free words follow, one letter each.
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", *"0123456789", "=", " ", "\n", "<|im_end|>")

# Block labels: the prompt pairs each digit with its block's label ("A3B1C4="), and each answer block
# starts with its label and a copy of that digit (the operand), so a block finds its digit by content and
# adds it at a fixed distance. Qwen2's rotary positions give a tiny model no absolute position to count
# blocks by: measured on the 0.5 M model, unlabelled blocks still got 72% of the digits wrong after 2300
# warm-start steps, labelled blocks without the operand were at chance (90%) after 225.
LABELS = "ABCDEFGHI"
# Free words are single letters (not labels) so that the one-character tokenizer keeps one token a word.
WORD_LETTERS = "abcdefghijklmnopqrstuvwxyzJKLMNOPQRSTUVWXYZ"
MAX_VOCAB_WORDS = len(WORD_LETTERS)
# vLLM's CPU attention supports head sizes 32, 64, 80, ... only: the heads are 32 wide.
HEAD_DIM = 32
# The tail of the free words: ranks 4 and rarer (1 the commonest; index 3 on). The state-dependence knob
# and the world probe's tail ratio both read it.
TAIL_RANK = 4
# A world's task defaults when a study sets no steps or val_every: fixed, never a knob, so that a run's
# length does not rebuild its world.
TASK_STEPS = 128
TASK_VAL_EVERY = 8
# Knobs a world block used to take that are run settings now, with where they went.
RUN_SETTINGS = ("steps", "val_every")


@dataclass(frozen=True)
class ErrorLink:
    """How a block's free words predict its digit error in the supervised data: the digit is drawn at
    random with probability ``base + slope * r**power``, r the block's mean word rank scaled to [0, 1]
    (0: the commonest word). Rare phrasing then predicts mistakes, so a learner that sharpens toward the
    sampler's common words also makes fewer digit errors."""

    base: float = 0.02
    slope: float = 0.58
    power: float = 1.5

    def p_error(self, rarity: float) -> float:
        return min(1.0, self.base + self.slope * rarity**self.power)


@dataclass(frozen=True)
class Shape:
    """The Qwen2 of the world (about 0.5 M parameters at the defaults)."""

    hidden_size: int = 96
    intermediate_size: int = 288
    layers: int = 4
    heads: int = 3


@dataclass(frozen=True)
class WarmStart:
    """Supervised warm start, stopped at the first check at or above ``greedy_acc`` (greedy decoding on
    ``check_prompts`` held-out prompts, every ``check_every`` steps): the paper starts RL from a model
    that solves part of the task under the score validation uses."""

    greedy_acc: float = 0.5
    max_steps: int = 4000
    lr: float = 1e-3  # 3e-3 (the toy model's) diverged within 50 steps on the 0.5 M default shape
    batch: int = 256
    check_every: int = 5  # greedy accuracy jumps from 0 to 0.9 within 25 steps on the default world
    check_prompts: int = 512


@dataclass(frozen=True)
class World:
    """The knobs of one generated chain world (the study's ``worlds.<name>``)."""

    name: str
    chain_length: int = 5
    words_per_block: int = 3
    vocab_words: int = 32
    zipf: float = 1.0
    tail_zipf: float | None = None
    error: ErrorLink = field(default_factory=ErrorLink)
    model: Shape = field(default_factory=Shape)
    warm_start: WarmStart = field(default_factory=WarmStart)
    train_prompts: int = 8000
    val_prompts: int = 512
    sampled_val: int = 0
    seed: int = 0

    def words(self) -> str:
        """The free words, the commonest first (a word's index is its rarity rank)."""
        return WORD_LETTERS[: self.vocab_words]

    def vocab(self) -> list[str]:
        return [*SPECIAL_TOKENS, *LABELS, *self.words()]

    def knobs(self) -> dict[str, Any]:
        """Every knob but the name: what the world is made from. A knob left at its "off" value is left
        out, so that adding a knob does not re-key the worlds that do not use it."""
        out = asdict(self)
        out.pop("name")
        if out["tail_zipf"] is None:
            out.pop("tail_zipf")
        return out

    def word_zipf(self, previous_rank: int | None) -> float:
        """The exponent a free word is drawn at, given the rank (0 the commonest) of the answer's previous
        free word: flatter (``tail_zipf``) after a tail word, so that a rare choice leads into uncertain
        continuations, as a hot sample does in the paper (Section 6)."""
        if self.tail_zipf is not None and previous_rank is not None and previous_rank >= TAIL_RANK - 1:
            return self.tail_zipf
        return self.zipf

    @property
    def key(self) -> str:
        """Eight hex digits over the knobs and the generator's code."""
        h = hashlib.sha256(json.dumps(self.knobs(), sort_keys=True).encode())
        h.update(generator_code())
        return h.hexdigest()[:8]

    @property
    def ident(self) -> str:
        """The name runs carry for this world's model and task: ``<name>-<key>``."""
        return f"{self.name}-{self.key}"

    @property
    def val_rows(self) -> int:
        """Rows of the validation parquet: every prompt greedily, then the sampled copies."""
        return self.val_prompts + self.sampled_val

    @property
    def response_tokens(self) -> int:
        """A whole answer: each block's label, operand, words and sum, then the end-of-sequence token."""
        return self.chain_length * (self.words_per_block + 3) + 1

    @property
    def prompt_tokens(self) -> int:
        """Each digit behind its block's label, then "="."""
        return 2 * self.chain_length + 1

    @property
    def parameters(self) -> int:
        """Qwen2 parameters (tied embeddings; q, k, v biases; RMSNorm weights)."""
        h, f = self.model.hidden_size, self.model.intermediate_size
        per_layer = 4 * h * h + 3 * h + 3 * h * f + 2 * h
        return len(self.vocab()) * h + self.model.layers * per_layer + h

    def as_model(self) -> Model:
        params = self.parameters
        return Model(self.ident, "generated", f"~{params / 1e6:.1f}M", params / 1e9)

    def as_task(self) -> Task:
        return Task(
            self.ident,
            "train",
            "val",
            max(8, self.prompt_tokens),
            self.response_tokens + 3,  # room for a few tokens past a malformed answer
            TASK_VAL_EVERY,
            TASK_STEPS,
            first_cycle_kl_step=max(1, TASK_STEPS // 3),
            reward=f"{REWARD_FILE}:{REWARD_FUNCTION}",
        )


def generator_code() -> bytes:
    """The generator's code as a world's key reads it: its syntax tree without docstrings
    (``coolsampler.spec.source.code_content``), each moved module it imports under the name it was keyed
    under (``KEYED_NAMES``)."""
    code = code_content(GENERATOR)
    for name, keyed in KEYED_NAMES.items():
        code = code.replace(repr(f"coolsampler.{name}").encode(), repr(f"coolsampler.{keyed}").encode())
    return code


def world_from_dict(name: str, spec: Mapping[str, Any], where: str) -> World:
    """A world from its study block (already schema-checked), with the checks the schema cannot make."""
    spec = dict(spec)
    for moved in RUN_SETTINGS:
        if moved in spec:
            raise StudyError(
                f"{where}.{moved}: a run setting, not a world knob (a run's length must not rebuild its world);"
                f" set it in defaults: or a run entry"
            )
    try:
        world = World(
            name=name,
            error=ErrorLink(**(spec.pop("error", None) or {})),
            model=Shape(**(spec.pop("model", None) or {})),
            warm_start=WarmStart(**(spec.pop("warm_start", None) or {})),
            **spec,
        )
    except TypeError as err:
        raise StudyError(f"{where}: {err}") from None
    if not 2 <= world.vocab_words <= MAX_VOCAB_WORDS:
        raise StudyError(f"{where}.vocab_words: {world.vocab_words}; allowed: 2..{MAX_VOCAB_WORDS}")
    if world.model.hidden_size != world.model.heads * HEAD_DIM:
        raise StudyError(
            f"{where}.model: hidden_size {world.model.hidden_size} is not heads x {HEAD_DIM}"
            f" ({world.model.heads} x {HEAD_DIM} = {world.model.heads * HEAD_DIM}); vLLM's CPU attention needs"
            f" heads {HEAD_DIM} wide"
        )
    if world.sampled_val > world.val_prompts:
        raise StudyError(
            f"{where}.sampled_val: {world.sampled_val} exceeds val_prompts {world.val_prompts}; allowed: 0..val_prompts"
        )
    return world


def study_worlds(raw: Mapping[str, Any], origin: str) -> dict[str, World]:
    """The study's worlds by name (``worlds:``)."""
    return {
        name: world_from_dict(name, spec or {}, f"{origin}: worlds.{name}")
        for name, spec in (raw.get("worlds") or {}).items()
    }


# The properties a screen may bound (coolsampler.world.probe measures them), in the screen's order.
# A study bounds some of them; ``error_link`` judges a block against the true running sum, ``error_link_local``
# against the sum the answer itself wrote before it (a warm-started model carries its own mistakes on, so the
# first counts every block after an error as wrong).
PROPERTIES = ("entropy", "tail_ratio", "offset", "error_link", "error_link_local")


@dataclass(frozen=True)
class Screen:
    """A study's world screen (``screen:``): its candidate worlds in order, and the bounds each property
    must meet; the first world that meets all of them is the one the study trains in. Written into the study
    before any run, so the world is chosen by its properties and never by a cooled run."""

    worlds: tuple[str, ...]
    bounds: dict[str, tuple[float | None, float | None]]
    Tb: float = 0.8
    prompts: int = 512
    reference: tuple[str, ...] = ()  # probed and shown beside the candidates, never chosen (an earlier round's world)

    @property
    def probed(self) -> tuple[str, ...]:
        return (*self.worlds, *self.reference)


def study_screen(raw: Mapping[str, Any], origin: str) -> Screen | None:
    """The study's screen, or None; a candidate that is not one of its worlds stops with one line."""
    spec = raw.get("screen")
    if not spec:
        return None
    known = set(raw.get("worlds") or {})
    for field_ in ("worlds", "reference"):
        for name in spec.get(field_) or ():
            if name not in known:
                raise StudyError(
                    f"{origin}: screen.{field_}: {name} is not a world of the study; known: {sorted(known)}"
                )
    bounds = {p: (spec[p][0], spec[p][1]) for p in PROPERTIES if p in spec}
    if not bounds:
        raise StudyError(f"{origin}: screen: no bound on any of {', '.join(PROPERTIES)}")
    return Screen(
        tuple(spec["worlds"]),
        bounds,
        float(spec.get("Tb", 0.8)),
        int(spec.get("prompts", 512)),
        tuple(spec.get("reference") or ()),
    )


def check_val_samples(worlds: Mapping[str, World], recipe: Mapping[str, Any], origin: str) -> None:
    """A recipe's ``val_samples`` (verl's data.val_max_samples) must not cut a world's validation set:
    verl would keep a subset of its rows, and its sampled copies could be dropped or the two scores be
    read on different prompts."""
    cap = int(recipe.get("val_samples", -1) or -1)
    for world in worlds.values():
        if 0 < cap < world.val_rows:
            raise StudyError(
                f"{origin}: recipe.val_samples: {cap} cuts world {world.name}'s validation set of {world.val_rows}"
                f" rows ({world.val_prompts} greedy + {world.sampled_val} sampled); set it to at least {world.val_rows}"
            )

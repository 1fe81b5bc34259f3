"""The rule-based correctness reward of the paper, as a verl custom reward function.

verl 0.9.1 loads it through ``reward.custom_reward_function.{path,name}`` (legacy top-level
``custom_reward_function`` is copied there) and its reward managers call it as::

    compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **reward_kwargs)

where ``reward_kwargs`` are ``reward.custom_reward_function.reward_kwargs`` (merged last, so they win).
It may return a float or a dict with a ``"score"`` key; a float is returned here, which the manager
also records as the ``acc`` metric that validation reports. Answers are scored 1.0 (correct) or 0.0.

Routing on ``data_source`` (the parquet column written by ``coolsampler.train.data`` / ``coolsampler.world.toy``):

* GSM8K (``openai/gsm8k``): verl's ``gsm8k`` scorer, strict mode: the last ``#### <number>`` in the
  last 300 characters, commas removed, must equal the ground truth string exactly. A ``\\boxed{}``
  answer without ``####`` scores 0 by default. That is deliberate: the prompt asks for ``####``, the
  paper uses verl's rule-based reward, and following the requested format is part of what GRPO
  learns in the first steps on Qwen2.5-Math (which tends to box its answers). Changing it would move
  the starting accuracy and the early curve that the cliff is read against. ``gsm8k_accept_boxed=True``
  (a ``reward_kwargs`` entry) is an explicit opt-in that scores the last boxed number, with the same
  normalisation, when no ``####`` answer is present.
* MATH / MATH-500 (``DigitalLearningGmbH/MATH-lighteval``, ``lighteval/MATH``,
  ``EleutherAI/hendrycks_math``, ``HuggingFaceH4/MATH-500``): verl's ``math_reward`` scorer: the last
  ``\\boxed{}`` (nested braces balanced) is string-normalised (Hendrycks' ``strip_string``: spaces,
  ``\\left``/``\\right``, ``dfrac``, units after ``\\text{ ``, degrees, percent, ``0.5``, ``a/b``) and
  compared with the ground truth. math-verify (symbolic equivalence) is not installed and is not
  switched on silently when it is: a reward that changes with what happens to be installed would make
  runs on two machines incomparable. ``math_backend="math_verify"`` opts in explicitly and fails
  loudly if the package is missing.
* The smoke study's synthetic task (``arith``): exact match of the stripped response, or of the text
  after its last ``=``, to the stripped ground truth.

Any other ``data_source`` raises ``NotImplementedError`` (scoring unknown data as 0 would look like a
model that never learns) unless the task names its reward (``reward=`` in ``reward_kwargs``: ``verl``,
verl's built-in ``default_compute_score``, or ``FILE.py:FUNCTION``), which then scores it. A study task
with its own reward normally reaches verl directly (``coolsampler.train.overrides.reward_overrides`` sets
``reward.custom_reward_function`` to it); the fallback is for data that mixes sources.

Imports verl's scorers lazily and nothing of the pipeline beyond the spec layer.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import Any, Final

GSM8K_SOURCES: Final = frozenset({"openai/gsm8k", "gsm8k"})
MATH_SOURCES: Final = frozenset(
    {
        "DigitalLearningGmbH/MATH-lighteval",
        "lighteval/MATH",
        "EleutherAI/hendrycks_math",
        "HuggingFaceH4/MATH-500",
    }
)
ARITH_SOURCES: Final = frozenset({"arith"})

MATH_BACKENDS: Final = ("verl", "math_verify")

_GSM8K_NUMBER = re.compile(r"^\s*(?:\\\$|\$)?\s*(-?[0-9\.\,]+)")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced.

    Mirrors verl's ``math_reward.last_boxed_only_string`` + ``remove_boxed`` (the test suite checks
    they agree), so the ground truth is extracted by the same rule the reward applies to responses.
    Returns None when there is no complete boxed expression.
    """
    if "\\boxed " in text:
        return text.split("\\boxed ")[-1].split("$")[0]
    idx = text.rfind("\\boxed")
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    depth = 0
    start = None
    for i in range(idx, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
            if start is None:
                start = i + 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i] if start is not None else None
    return None


def score_gsm8k(solution_str: str, ground_truth: str, *, accept_boxed: bool = False) -> float:
    """GSM8K: verl's strict ``#### <number>`` rule; optionally the last boxed number as a fallback.

    The fallback applies only when there is no ``####`` answer and takes the number at the start of
    the last ``\\boxed{}`` (an optional ``$`` before it), commas removed, compared as verl compares:
    exact string equality, so ``\\boxed{18.00}`` against ``18`` is wrong in both paths.
    """
    from verl.utils.reward_score import gsm8k

    answer = gsm8k.extract_solution(solution_str, method="strict")
    if answer is not None:
        return float(gsm8k.compute_score(solution_str, ground_truth, method="strict"))
    if not accept_boxed:
        return 0.0
    boxed = last_boxed(solution_str)
    if boxed is None:
        return 0.0
    match = _GSM8K_NUMBER.match(boxed)
    if match is None:
        return 0.0
    return 1.0 if match.group(1).replace(",", "") == ground_truth else 0.0


def score_math(solution_str: str, ground_truth: str, *, backend: str = "verl") -> float:
    """MATH: the last ``\\boxed{}`` against the ground truth, by verl's ``math_reward`` (default) or
    verl's math-verify wrapper (explicit opt-in, needs the ``math-verify`` package)."""
    if backend == "verl":
        from verl.utils.reward_score import math_reward

        return float(math_reward.compute_score(solution_str, ground_truth))
    if backend == "math_verify":
        if importlib.util.find_spec("math_verify") is None:
            raise ImportError("math_backend='math_verify' needs the math-verify package: pip install math-verify")
        from verl.utils.reward_score import math_verify

        return float(math_verify.compute_score(solution_str, ground_truth))
    raise ValueError(f"unknown math_backend {backend!r}; choose one of {MATH_BACKENDS}")


def score_arith(solution_str: str, ground_truth: str) -> float:
    """Synthetic arithmetic: the whole stripped response, or the text after its last ``=``, must equal
    the stripped ground truth exactly (no partial credit: the smoke study needs a sharp signal)."""
    truth = ground_truth.strip()
    response = solution_str.strip()
    if response == truth:
        return 1.0
    if "=" in response and response.rsplit("=", 1)[1].strip() == truth:
        return 1.0
    return 0.0


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    *,
    gsm8k_accept_boxed: bool = False,
    math_backend: str = "verl",
    reward: str | None = None,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """verl custom reward: 1.0 for a correct final answer, 0.0 otherwise, routed on ``data_source``.

    ``extra_info`` and further ``kwargs`` (verl passes e.g. ``reward_router_address``) are accepted
    and ignored; ``gsm8k_accept_boxed``, ``math_backend`` and ``reward`` come from ``reward_kwargs``.
    """
    source = str(data_source)
    truth = str(ground_truth)
    if source in GSM8K_SOURCES:
        return score_gsm8k(solution_str, truth, accept_boxed=bool(gsm8k_accept_boxed))
    if source in MATH_SOURCES:
        return score_math(solution_str, truth, backend=math_backend)
    if source in ARITH_SOURCES:
        return score_arith(solution_str, truth)
    if reward is not None:
        return named_reward(reward)(
            data_source=source, solution_str=solution_str, ground_truth=ground_truth, extra_info=extra_info, **kwargs
        )
    known = sorted(GSM8K_SOURCES | MATH_SOURCES | ARITH_SOURCES)
    raise NotImplementedError(f"no reward for data_source={source!r}; known: {known}")


def named_reward(reward: str) -> Callable[..., Any]:
    """The scorer a task names: ``verl`` (verl's ``default_compute_score``, routed by data_source) or
    ``FILE.py:FUNCTION`` (loaded from the file, as verl loads ``custom_reward_function.path``)."""
    if reward == "verl":
        from verl.utils.reward_score import default_compute_score

        return default_compute_score
    file, sep, name = reward.rpartition(":")
    if not sep or not file.endswith(".py"):
        raise ValueError(f"reward {reward!r}: allowed verl or FILE.py:FUNCTION")
    spec = importlib.util.spec_from_file_location(f"coolsampler_reward_{abs(hash(file))}", file)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)

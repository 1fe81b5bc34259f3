"""Known right and wrong answers for coolsampler.worker.rewards.compute_score (verl's custom-reward signature)."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

pytest.importorskip("verl.utils.reward_score.gsm8k")

from coolsampler.worker.rewards import compute_score  # noqa: E402

GSM8K = "openai/gsm8k"
MATH = "DigitalLearningGmbH/MATH-lighteval"
MATH500 = "HuggingFaceH4/MATH-500"


def test_signature_matches_verl_call() -> None:
    """verl's reward managers call compute_score(data_source=, solution_str=, ground_truth=, extra_info=,
    **reward_kwargs) and merge reward_kwargs as keywords; extra keywords must be accepted."""
    params = inspect.signature(compute_score).parameters
    assert list(params)[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]
    score = compute_score(
        data_source=GSM8K,
        solution_str="#### 3",
        ground_truth="3",
        extra_info={"split": "test", "index": 0, "num_turns": None},
        reward_router_address=None,
    )
    assert score == 1.0 and isinstance(score, float)


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("6*7=42 pages.\n#### 42", "42", 1.0),
        ("#### 41", "42", 0.0),
        ("The total is 1,234 eggs.\n#### 1,234", "1234", 1.0),  # commas removed
        ("#### 1234", "1234", 1.0),
        ("#### -5", "-5", 1.0),  # negative numbers
        ("#### 5", "-5", 0.0),
        ("#### 42 pages", "42", 1.0),  # trailing units after the number are ignored
        ("#### 42 dollars.", "42", 1.0),
        ("#### $42", "42", 0.0),  # verl strict: the number must follow '#### ' directly
        ("#### 42.", "42", 0.0),  # ... and a sentence-final period is part of the number: wrong
        ("#### 42.00", "42", 0.0),  # no numeric equivalence, exact strings
        ("####42", "42", 0.0),  # '####' without its space: wrong format
        ("####  42", "42", 0.0),  # two spaces: wrong format
        ("#### 40\nOops, recheck.\n#### 42", "42", 1.0),  # the last #### answer counts
        ("#### 42\nActually #### 40", "42", 0.0),
        ("The answer is 42.", "42", 0.0),  # no #### at all
        ("", "42", 0.0),
        ("#### 42" + " and that is all." * 20, "42", 0.0),  # verl reads only the last 300 characters
    ],
)
def test_gsm8k_strict(response: str, truth: str, expected: float) -> None:
    assert compute_score(GSM8K, response, truth) == expected


@pytest.mark.parametrize(
    ("response", "truth", "default", "accept_boxed"),
    [
        ("So she has $\\boxed{12}$ pencils.", "12", 0.0, 1.0),
        ("\\boxed{1,234}", "1234", 0.0, 1.0),
        ("\\boxed{-5}", "-5", 0.0, 1.0),
        ("\\boxed{\\$42}", "42", 0.0, 1.0),
        ("\\boxed{42 \\text{ pages}}", "42", 0.0, 1.0),
        ("\\boxed{41}", "42", 0.0, 0.0),
        ("\\boxed{40} no, \\boxed{42}", "42", 0.0, 1.0),  # the last box counts
        ("\\boxed{42.00}", "42", 0.0, 0.0),
        ("\\boxed{x}", "42", 0.0, 0.0),
        ("#### 41 but \\boxed{42}", "42", 0.0, 0.0),  # a #### answer always decides
        ("\\boxed{41} so #### 42", "42", 1.0, 1.0),
    ],
)
def test_gsm8k_boxed_scores_zero_unless_opted_in(
    response: str, truth: str, default: float, accept_boxed: float
) -> None:
    assert compute_score(GSM8K, response, truth) == default
    assert compute_score(GSM8K, response, truth, gsm8k_accept_boxed=True) == accept_boxed


@pytest.mark.parametrize("source", [MATH, MATH500, "lighteval/MATH", "EleutherAI/hendrycks_math"])
@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("The answer is $\\boxed{5}$.", "5", 1.0),
        ("$\\boxed{6}$", "5", 0.0),
        ("$\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}", 1.0),  # nested braces
        ("$\\boxed{\\dfrac{1}{2}}$", "\\frac{1}{2}", 1.0),
        ("$\\boxed{\\frac12}$", "\\frac{1}{2}", 1.0),
        ("$\\boxed{1/2}$", "\\frac{1}{2}", 1.0),
        ("$\\boxed{0.5}$", "\\frac{1}{2}", 1.0),
        ("$\\boxed{\\frac{1}{3}}$", "\\frac{1}{2}", 0.0),
        ("$\\boxed{-3}$", "-3", 1.0),  # negative numbers
        ("$\\boxed{3}$", "-3", 0.0),
        ("First \\boxed{4}, then correcting: \\boxed{-3}", "-3", 1.0),  # several boxes: the last counts
        ("First \\boxed{-3}, then correcting: \\boxed{4}", "-3", 0.0),
        ("$\\boxed{5 \\text{ cm}}$", "5", 1.0),  # units after '\text{ ' are dropped
        ("$\\boxed{90^\\circ}$", "90", 1.0),
        ("$\\boxed{x = 7}$", "7", 1.0),
        ("$\\boxed{ (1, 2) }$", "(1,2)", 1.0),
        ("$\\boxed{\\left( 1,2 \\right)}$", "(1,2)", 1.0),
        ("$\\boxed{1,234}$", "1234", 0.0),  # no comma normalisation in verl's MATH scorer
        ("The answer is 5.", "5", 0.0),  # no box
        ("\\boxed{5", "5", 0.0),  # unclosed box
    ],
)
def test_math_boxed(source: str, response: str, truth: str, expected: float) -> None:
    assert compute_score(source, response, truth) == expected


def test_math_verify_is_explicit_opt_in() -> None:
    with pytest.raises(ValueError, match="unknown math_backend"):
        compute_score(MATH, "\\boxed{5}", "5", math_backend="sympy")
    if importlib.util.find_spec("math_verify") is None:
        with pytest.raises(ImportError, match="math-verify"):
            compute_score(MATH, "\\boxed{5}", "5", math_backend="math_verify")


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("3 8 12", "3 8 12", 1.0),
        ("  3 8 12\n", "3 8 12", 1.0),
        ("3 8 13", "3 8 12", 0.0),
        ("3 8", "3 8 12", 0.0),
        ("3+5=8", "8", 1.0),  # the text after the last '='
        ("1+2=3=4", "4", 1.0),
        ("1+2=3", "1+2=3", 1.0),  # a ground truth with '=' matches whole
        ("8 =", "8", 0.0),
        ("", "8", 0.0),
    ],
)
def test_arith_exact(response: str, truth: str, expected: float) -> None:
    assert compute_score("arith", response, truth) == expected


def test_unknown_source_is_an_error() -> None:
    with pytest.raises(NotImplementedError, match="no reward for data_source='gsm8k_typo'"):
        compute_score("gsm8k_typo", "#### 1", "1")


def test_ground_truth_types_are_coerced() -> None:
    """Parquet round trips may hand numpy strings; the router must not care."""
    np = pytest.importorskip("numpy")
    assert compute_score(np.str_(GSM8K), "#### 7", np.str_("7")) == 1.0

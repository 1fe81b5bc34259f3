"""Same digits on one machine, and against the committed reference of its CPU family.

Two trainings of the same run, on the same machine, under the pinned numerics (coolsampler.spec.numerics),
one as the cpu platform starts verl's Ray workers (forked from one pre-imported process,
coolsampler.worker.prefork) and one with every worker a fresh interpreter: what their samples decide
(rewards, validations, lengths, the refresh schedule) must be identical bit for bit, and the learner's
log-prob metrics equal to float rounding (coolsampler.results.fingerprint says why those are not bitwise
reproducible on CPU). The toy warm start (the shared test world's model is the smoke
study's: same recipe, same seed) must match the smoke study's committed fingerprint of this machine's CPU
family, where one is committed.
"""

from __future__ import annotations

import pytest

from coolsampler.cli.fingerprint import reference_dir
from coolsampler.results import fingerprint as fpr
from coolsampler.results.metrics import parse_jsonl
from coolsampler.spec import numerics
from coolsampler.spec.layout import SMOKE_STUDY
from coolsampler.train.overrides import training_study
from coolsampler.train.platform import PREFORK_ENV
from coolsampler.train.version import REPO
from tests.stack import assert_same_run, records, run_stack, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# a short deterministic arm of the smoke study's shape: a refresh inside it, cooled sampler, IS weights
KEY = "toy-qwen2/arith/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st4_v2"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


def test_toy_warm_start_matches_its_cpu_family_reference(world):
    """The warm start's weights are this CPU family's reference, byte for byte."""
    family = numerics.cpu_family()
    study = training_study(REPO / SMOKE_STUDY)
    sha = fpr.file_sha256(world.model / "model.safetensors")
    refs = {p: fpr.read(p) for p in sorted(reference_dir(study).glob("*.json"))}
    others = [
        f"{ref['cpu']}: {'same' if ref['models'].get('toy-qwen2') == sha else 'differs'}"
        for p, ref in refs.items()
        if ref["cpu"] != family
    ]
    own = [ref for ref in refs.values() if ref["cpu"] == family]
    if not own:
        pytest.skip(f"no smoke-study reference for {family} (sha256 {sha[:12]}; other families: {others})")
    assert sha == own[0]["models"]["toy-qwen2"], f"toy warm start on {family}: {sha} (other families: {others})"


@pytest.fixture(scope="module")
def pair(world, tmp_path_factory):
    """KEY trained twice: forked workers (the cpu platform as it is), then fresh ones."""
    out = tmp_path_factory.mktemp("pair")
    recipe = {"deterministic": True}
    forked = run_stack(KEY, world, out / "forked", recipe=recipe)
    fresh = run_stack(KEY, world, out / "fresh", recipe=recipe, env_extra={PREFORK_ENV: "0"})
    return forked, fresh


def test_two_trainings_of_one_run_are_identical(pair):
    """The same run trained twice: what the samples decide identical at every step (no tolerance)."""
    tables = []
    for jsonl in pair:
        df, status = parse_jsonl(jsonl, expected_steps=4, val_every=2)
        assert status.complete, status
        tables.append(df)
    a, b = (fpr.run_fingerprint(t) for t in tables)
    assert a["steps"] == [0, 1, 2, 3, 4]
    assert tables[0]["grad_norm"].iloc[1:].max() > 1e-6  # it learns: the comparison is not of idle runs
    assert fpr.compare_runs(b, a) == "", fpr.compare_runs(b, a)  # what the samples decide: bit for bit
    # the learner's log-prob metrics: float rounding only (the smoke study's 64 steps: at most 9e-3, chi2_seq)
    worst, col = fpr.float_deviation(b, a)
    assert worst < 1e-3, (worst, col)


def test_prefork_changes_nothing_but_start_up(pair):
    """Forked workers (coolsampler.worker.prefork) log what fresh interpreters log: every metric verl
    logged, samples and rewards exactly, the rest to float rounding."""
    forked, fresh = pair
    assert "prefork_client.py" in (forked.parent / "verl.log").read_text()  # through the server
    assert "prefork_client.py" not in (fresh.parent / "verl.log").read_text()  # really unforked
    assert_same_run(records(forked), records(fresh))

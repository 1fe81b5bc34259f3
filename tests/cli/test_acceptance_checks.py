"""The acceptance check's parts without the real stack (``coolsampler.testkit.acceptance``): model
discovery in an offline hub cache, the offline unpatched-verl tree, and every check on synthetic logs and
tap records, including the ones that make it fail rather than pass vacuously: a broken gate, a model that
learnt nothing, a resume that lost the cycle, a GPU without bf16. The whole check on the CPU stack is
``tests/stack/test_acceptance.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from coolsampler.testkit import acceptance as acc

REPO = Path(__file__).resolve().parents[2]


def _snapshot(root: Path, repo: str, *, model_type: str = "qwen2", weights: bool = True, tok: bool = True) -> Path:
    snap = root / ("models--" + repo.replace("/", "--")) / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({"model_type": model_type}))
    if weights:
        (snap / "model.safetensors").write_bytes(b"x")
    else:  # the hub cache's dangling link of a file that was never downloaded
        (snap / "model.safetensors").symlink_to(root / "blobs" / "missing")
    if tok:
        (snap / "tokenizer.json").write_text("{}")
    return snap


def test_find_model_prefers_the_paper_model(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _snapshot(a, "Qwen/Qwen2.5-0.5B")
    _snapshot(a, "Qwen/Qwen2-1.5B-Instruct")
    _snapshot(a, "meta-llama/Llama-3.2-1B", model_type="llama")
    paper = _snapshot(b, "Qwen/Qwen2.5-Math-1.5B")
    assert acc.find_model([a, b]) == (paper, "Qwen/Qwen2.5-Math-1.5B")
    # without it: a 1.5B Qwen2 before other sizes
    hit = acc.find_model([a])
    assert hit is not None and hit[1] == "Qwen/Qwen2-1.5B-Instruct"


def test_find_model_skips_unusable_snapshots(tmp_path):
    _snapshot(tmp_path, "Qwen/Qwen2.5-Math-1.5B", weights=False)  # weights never downloaded
    _snapshot(tmp_path, "Qwen/Qwen2.5-1.5B", tok=False)
    _snapshot(tmp_path, "meta-llama/Llama-3.2-1B", model_type="llama")
    assert acc.find_model([tmp_path]) is None
    assert acc.find_model([tmp_path / "nonexistent"]) is None


def test_hub_roots_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hc"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hh"))
    roots = acc.hub_roots()
    assert roots[:2] == [tmp_path / "hc", tmp_path / "hh" / "hub"]


def test_unpatched_verl_is_the_installed_tree_without_the_patches(tmp_path):
    """Reverse-applied in Python; GNU patch re-applying every patch forward gives back the installed files."""
    import importlib.util

    tree = acc.unpatched_verl(tmp_path / "up", REPO / "patches" / "verl")
    installed = Path(next(iter(importlib.util.find_spec("verl").submodule_search_locations)))
    patches = sorted((REPO / "patches" / "verl").glob("*.patch"))
    touched = {path for p in patches for path, _ in acc.parse_patch(p.read_text())}
    # the files the patches name (counted from the headers, independently of the parser under test)
    headers = {
        ln.split()[1].removeprefix("b/") for p in patches for ln in p.read_text().splitlines() if ln.startswith("+++ ")
    }
    assert touched == headers and len(touched) >= 4
    for rel in touched:
        assert (tree / rel).read_text() != (installed / rel.removeprefix("verl/")).read_text()
    assert "staleness/staleness" not in "".join((tree / rel).read_text() for rel in touched)
    assert (tree / "verl" / "version" / "version").read_text().strip() == "0.9.1"
    for p in patches:
        subprocess.run(
            ["patch", "-p1", "--forward", "--batch", "-i", str(p)], cwd=tree, check=True, capture_output=True
        )
    for rel in touched:
        assert (tree / rel).read_text() == (installed / rel.removeprefix("verl/")).read_text(), rel


def _staleness_result(seq, refreshed, steps=8, val_steps=(3, 6, 8)):
    arm = acc.Arm("staleness", 4, steps, 3, tap=True)
    rec = {
        t: {
            "staleness/staleness": s,
            "staleness/refreshed": t in refreshed,
            "staleness/sampler_version": 4 * ((t - 1) // 4),
            **({"val-core/x": 0.1} if t in val_steps else {}),
        }
        for t, s in zip(range(1, steps + 1), seq, strict=True)
    }
    return acc.ArmResult(arm, records=rec)


def test_staleness_checks_pass_and_fail():
    good = acc.staleness_checks(_staleness_result([0, 1, 2, 3, 0, 1, 2, 3], {4, 8}))
    assert [c.status for c in good] == ["pass"] * 3
    bad = acc.staleness_checks(_staleness_result([0, 0, 0, 0, 0, 0, 0, 0], {1, 2, 3, 4, 5, 6, 7, 8}))
    assert [c.status for c in bad[:2]] == ["fail", "fail"]
    late = acc.staleness_checks(_staleness_result([0, 1, 2, 3, 0, 1, 2, 3], {4, 8}, val_steps=(8,)))
    assert late[2].status == "fail"


def test_timing_and_logprob_checks():
    def res(name, n, step_s, upstream=False):
        rec = {t: {"timing_s/step": step_s + (9.0 if t <= acc.WARMUP_STEPS else 0.0)} for t in range(1, 6)}
        if not upstream:
            for m in rec.values():
                m["staleness/staleness"] = 0
        return acc.ArmResult(acc.Arm(name, n, 5, 0, upstream=upstream), records=rec)

    ok = acc.timing_checks(
        {"N=1": res("N=1", 1, 2.0), "N=8": res("N=8", 8, 1.8), "unpatched": res("u", 1, 2.0, True)}, "gpu"
    )
    assert {c.name: c.status for c in ok}["step time N=8 / N=1"] == "pass"
    assert all(c.status != "fail" for c in ok), ok
    slow = acc.timing_checks(
        {"N=1": res("N=1", 1, 3.0), "N=8": res("N=8", 8, 3.6), "unpatched": res("u", 1, 2.0)}, "gpu"
    )
    assert {c.name: c.status for c in slow} | {} == {
        "median step time N=1": "info",
        "median step time N=8": "info",
        "median step time unpatched": "info",
        "step time N=8 / N=1": "fail",
        "step time N=1 patched / unpatched": "fail",
        "unpatched arm ran upstream verl": "fail",
    }
    # the cpu platform prints the same ratios without judging them (2 shared cores)
    on_cpu = acc.timing_checks(
        {"N=1": res("N=1", 1, 3.0), "N=8": res("N=8", 8, 3.6), "unpatched": res("u", 1, 2.0, True)}, "cpu"
    )
    ratios = {c.name: c for c in on_cpu if "/" in c.name}
    assert [(c.value, c.status) for c in ratios.values()] == [("1.200", "info"), ("1.500", "info")]
    assert all("judged on gpu" in c.limit for c in ratios.values())
    err = {
        "tokens": 100.0,
        "q@Tb max": 5e-5,
        "q@Tb mean": 1e-5,
        "q@Tl mean": 0.2,
        "old@Tl max": 5e-5,
        "old@Tl mean": 1e-5,
        "old@Tb mean": 0.2,
    }
    assert [c.status for c in acc.logprob_checks(err, "cpu")] == ["pass", "pass"]
    tied = {**err, "q@Tb max": 0.2, "q@Tb mean": 0.2, "q@Tl mean": 1e-5}  # sampler drew at the learner's T
    assert [c.status for c in acc.logprob_checks(tied, "cpu")] == ["fail", "pass"]


def _tiny_qwen2(path: Path):
    """A randomly initialised two-layer Qwen2 (head_dim 32, fp32), saved where the check loads it."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=40,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(path)
    return model


def _tap_world(tmp_path: Path, held: dict[int, int], n: int = 2, steps: int = 4, tb: float = 0.8):
    """Tap records of ``steps`` steps at refresh interval ``n``: snapshot versions 0, n, 2n, ... (the
    model, then moved a little at each refresh) and, at step t, the log-probs that the weights of version
    ``held[t]`` give at Tb: a sampler that holds the right version has held[t] == n*floor((t-1)/n)."""
    import torch

    model = _tiny_qwen2(tmp_path / "model")
    tap = tmp_path / "tap"
    tap.mkdir()
    base = {k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    snaps = {}
    for v in range(0, steps, n):
        g = torch.Generator().manual_seed(v + 1)
        snaps[v] = {k: t + (0.05 * torch.randn(t.shape, generator=g) if v else 0) for k, t in base.items()}
        torch.save(snaps[v], tap / f"snapshot_v{v}.pt")
    g = torch.Generator().manual_seed(99)
    for t in range(1, steps + 1):
        model.load_state_dict(snaps[held[t]], strict=False)
        model.tie_weights()
        prompts = [torch.randint(0, 40, (5,), generator=g) for _ in range(3)]
        responses = [torch.randint(0, 40, (4,), generator=g) for _ in range(3)]
        q = []
        for p, r in zip(prompts, responses, strict=True):
            with torch.no_grad():
                z = model(input_ids=torch.cat([p, r])[None]).logits[0, len(p) - 1 : len(p) - 1 + len(r)]
            q.append(torch.log_softmax(z / tb, -1).gather(1, r[:, None]).squeeze(1))
        torch.save(
            {
                "prompts": prompts,
                "responses": responses,
                "rollout_log_probs": q,
                "old_log_probs": q,
                "response_mask": [torch.ones(4) for _ in q],
                "temperature": tb,
                "sampler_version": n * ((t - 1) // n),
            },
            tap / f"step_{t}.pt",
        )
    return tmp_path


def _arm_result(root: Path, steps: int = 4, n: int = 2, val=(1,)) -> acc.ArmResult:
    rec = {t: {"val-core/x": 0.5} if t in val else {} for t in range(1, steps + 1)}
    return acc.ArmResult(acc.Arm("staleness", n, steps, 1, tap=True), records=rec, dir=root)


def test_the_sampler_state_check_sees_a_sampler_that_holds_the_wrong_version(tmp_path):
    """At every step the sampler's log-probs must be its own version's snapshot's: a sampler that woke on
    the fresh learner's weights (a stale sampler not pushed back after step 1's validation) fails, naming
    the step; the right one passes and is told apart from the neighbouring version."""
    world = acc.World(tmp_path / "good" / "model", "toy", "tiny", tmp_path, tmp_path)
    _tap_world(tmp_path / "good", {1: 0, 2: 0, 3: 2, 4: 2})
    good = {c.name: c for c in acc.sampler_state_checks(_arm_result(tmp_path / "good"), world, "cpu", 8)[0]}
    assert [c.status for c in good.values()] == ["pass", "pass"], good
    assert "after a stale validation: [2]" in good["sampler holds its snapshot at every step (staleness)"].value

    bad_world = acc.World(tmp_path / "bad" / "model", "toy", "tiny", tmp_path, tmp_path)
    _tap_world(tmp_path / "bad", {1: 0, 2: 2, 3: 2, 4: 2})  # step 2 drew from version 2's weights
    bad, _ = acc.sampler_state_checks(_arm_result(tmp_path / "bad"), bad_world, "cpu", 8)
    assert bad[0].status == "fail" and "at step 2 (version 0)" in bad[0].value, bad[0]


def test_kl_cycle_check():
    from coolsampler.testkit.sampler_check import StepState

    def states(drift):
        return [StepState(t, 0, 0.8, 10, 0.0, 0.0, drift_k3=d) for t, d in enumerate(drift, 1)]

    res = acc.ArmResult(acc.Arm("staleness", 4, 8, 3, tap=True), records={})
    good = [1e-9, 2e-3, 5e-3, 9e-3, 2e-9, 3e-3, 7e-3, 1e-2]
    assert acc.kl_cycle_checks(res, states(good))[0].status == "pass"
    never_refreshed = [1e-9, 2e-3, 5e-3, 9e-3, 1.2e-2, 1.5e-2, 1.8e-2, 2e-2]
    assert acc.kl_cycle_checks(res, states(never_refreshed))[0].status == "fail"
    never_stale = [1e-9] * 8  # also what a model that learns nothing shows: judged, never informational
    assert acc.kl_cycle_checks(res, states(never_stale))[0].status == "fail"
    assert acc.kl_cycle_checks(res, None)[0].status == "fail"


def test_a_broken_gate_fails_the_sampler_check_and_the_summary_names_it(tmp_path):
    """The sampler refreshed at every step (what ``--break-gate`` does to the real stack): from step 2 on it
    holds fresher weights than its version's snapshot. The check fails, and the summary's first lines name
    it, whatever the gate's own bookkeeping logged."""
    world = acc.World(tmp_path / "model", "toy", "tiny", tmp_path, tmp_path)
    _tap_world(tmp_path, {1: 0, 2: 2, 3: 2, 4: 2})  # version 2's weights from step 2: refreshed early
    rows, _ = acc.sampler_state_checks(_arm_result(tmp_path), world, "cpu", 8)
    assert rows[0].status == "fail"
    summary = {
        "platform": "cpu",
        "model": {"kind": "toy", "label": "tiny"},
        "broken_gate": True,
        "wall_s": 1.0,
        "gpus": 0,
        "checks": [c.__dict__ for c in rows],
        "passed": False,
        "runs": {},
    }
    md = acc.summary_markdown(summary).splitlines()
    assert md[0] == "# Acceptance (cpu platform): FAILED"
    assert "deliberately broken" in md[4]
    assert md[6].startswith("Failed: sampler holds its snapshot at every step (staleness)")


def _learning(scores, grads) -> acc.ArmResult:
    rec = {0: {"val-core/x": 0.0}}
    for t, ((lo, hi), g) in enumerate(zip(scores, grads, strict=True), 1):
        rec[t] = {"critic/score/min": lo, "critic/score/max": hi, "critic/score/mean": (lo + hi) / 2}
        rec[t]["actor/grad_norm"] = g
    return acc.ArmResult(acc.Arm("staleness", 4, len(scores), 3, tap=True), records=rec)


def test_a_model_that_learnt_nothing_fails_the_precondition():
    """Random weights score zero on every sample: zero advantages, zero gradients, every sampler version
    the same. The precondition fails rather than letting the sampler checks pass with nothing to see."""
    vacuous = acc.learning_checks(_learning([(0.0, 0.0)] * 4, [0.0] * 4))
    assert [c.status for c in vacuous] == ["fail"]
    assert "rewards varied at steps none" in vacuous[0].value
    saturated = acc.learning_checks(_learning([(1.0, 1.0)] * 4, [0.0] * 4))  # every sample right
    assert saturated[0].status == "fail"
    learnt = acc.learning_checks(_learning([(0.0, 0.0), (0.0, 1.0), (0.0, 1.0), (0.0, 0.0)], [0.0, 0.3, 0.2, 0.0]))
    assert learnt[0].status == "pass" and "rewards varied at steps [2, 3]" in learnt[0].value


def _gate_records(steps: int, n: int = 4, restart_at: int | None = None) -> dict[int, dict]:
    """The gate's metrics of ``steps`` steps at interval ``n``; ``restart_at``: a resume there that lost
    the cycle (the sampler taken for fresh at the checkpoint's step)."""
    rec = {}
    version = 0
    for t in range(1, steps + 1):
        if restart_at is not None and t == restart_at + 1:
            version = restart_at
        rec[t] = {
            "staleness/sampler_version": version,
            "staleness/staleness": t - 1 - version,
            "staleness/refreshed": float(t % n == 0),
        }
        if t % n == 0:
            version = t
    return rec


def test_the_resume_check_compares_the_gate_with_the_uninterrupted_arm():
    straight = acc.ArmResult(acc.Arm("staleness", 4, 6, 3, tap=True), records=_gate_records(6))
    arm = acc.Arm("resume", 4, 5, 0, tap=True, save_every=2, kill_at=4)
    line = "attempt 2: resuming from the complete checkpoint of step 2 (not complete: global_step_4: no tracker)"
    good = acc.ArmResult(arm, records=_gate_records(5), resumed=line)
    (row,) = acc.resume_checks(good, straight)
    assert row.status == "pass" and row.value.startswith("resumed from step 2;"), row
    lost_cycle = acc.ArmResult(arm, records=_gate_records(5, restart_at=2), resumed=line)
    (row,) = acc.resume_checks(lost_cycle, straight)
    assert row.status == "fail" and "differs at steps [3, 4]" in row.value, row
    at_a_refresh = acc.ArmResult(arm, records=_gate_records(5), resumed=line.replace("step 2", "step 4"))
    assert acc.resume_checks(at_a_refresh, straight)[0].status == "fail"  # patch 0004's restore not reached
    never_resumed = acc.ArmResult(arm, records=_gate_records(5))
    assert acc.resume_checks(never_resumed, straight)[0].status == "fail"
    failed = acc.ArmResult(arm, error="not killed: the attempt finished without reaching step 4's save")
    assert acc.resume_checks(failed, straight)[0].status == "fail"


def test_a_killed_attempts_tap_records_after_the_checkpoint_are_forgotten(tmp_path):
    names = ["step_1.pt", "step_2.pt", "step_3.pt", "step_4.pt", "snapshot_v0.pt", "snapshot_v4.pt", "sampler_3.pt"]
    names += ["sampler_4_replica1.pt", "snapshot_3.pt", "notes.txt"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    gone = acc.forget_tap_after(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "snapshot_v0.pt", "step_1.pt", "step_2.pt"]
    assert len(gone) == 6


def test_the_plan_has_a_resume_arm_and_the_broken_gate_runs_the_staleness_arm_alone(tmp_path):
    from coolsampler.testkit.acceptance.run import arms

    plan = {a.name: a for a in arms(acc.Options(platform="cpu", steps=6, quick=True))}
    assert list(plan) == ["staleness", "resume", "N=1", "N=8"]
    resume = plan["resume"]
    assert (resume.N, resume.steps, resume.save_every, resume.kill_at) == (4, 5, 2, 4)
    assert resume.kill_at % resume.N == 0 and resume.save_every % resume.N != 0  # resumed inside a cycle
    world = acc.World(tmp_path / "m", "toy", "", tmp_path / "t.parquet", tmp_path / "v.parquet")
    recipe = acc.acceptance_recipe("cpu", 256)
    o = acc.arm_overrides(resume, world, tmp_path, "cpu", recipe, 0)
    assert "trainer.save_freq=2" in o and "trainer.refresh_interval=4" in o
    assert "trainer.save_freq=-1" in acc.arm_overrides(plan["staleness"], world, tmp_path, "cpu", recipe, 0)
    (broken,) = arms(acc.Options(platform="cpu", steps=4, break_gate=True))
    assert broken.name == "staleness" and broken.faults == ("refresh-every-step",) and broken.tap


def test_the_broken_gate_fault_pushes_the_fresh_learner_after_every_step_but_a_refresh():
    """``refresh-every-step`` in verl's driver: after the gate's own step end (its metrics and its
    refresh), a push of the learner's weights without the snapshot, except after a refresh (the step's
    own decision), which pushed them already."""
    from types import SimpleNamespace

    from coolsampler.testkit import faults

    calls = []

    class PPOTrainerSync:
        global_steps = 0

        def _decide_refresh(self, metrics):
            return SimpleNamespace(refresh=self.global_steps % 4 == 0)

        def _push(self, snapshot=None, fresh_version=None):
            calls.append(("push", snapshot))

        def on_step_end(self):
            calls.append(("gate", self.global_steps))

    faults._break_gate(SimpleNamespace(PPOTrainerSync=PPOTrainerSync))
    faults._break_gate(SimpleNamespace(PPOTrainerSync=PPOTrainerSync))  # wrapped once only
    t = PPOTrainerSync()
    for step in (1, 4, 5):
        t.global_steps = step
        t.on_step_end()
    assert calls == [("gate", 1), ("push", None), ("gate", 4), ("gate", 5), ("push", None)]


def test_a_gpu_without_bf16_stops_the_check_before_any_engine(tmp_path, monkeypatch):
    from coolsampler.testkit.acceptance import run
    from coolsampler.worker import gpu_check

    monkeypatch.setattr(gpu_check, "visible_devices", lambda: [("Tesla V100-SXM2-32GB", (7, 0))])

    def no_world(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(run, "make_world", no_world)
    summary = acc.run_acceptance(acc.Options(platform="gpu", out=tmp_path), log=lambda s: None)
    assert not summary["passed"] and summary["runs"] == {}
    (check,) = summary["checks"]
    assert check["name"] == "GPUs have bf16" and "Tesla V100-SXM2-32GB" in check["value"]
    assert "compute capability 7.0" in (tmp_path / "summary.md").read_text()


def test_the_toy_model_sizes():
    """The CPU toy model is the smoke study's and the rehearsal's, unchanged; the GPU one, the acceptance's
    own model where none is cached, has a head size GPU attention kernels take and Qwen2.5-Math's positions."""
    from coolsampler.world import toy

    n = len(toy.REHEARSAL_VOCAB)
    cpu, gpu = (toy.build_model("unused", vocab_size=n, size=s) for s in ("cpu", "gpu"))
    assert sum(p.numel() for p in cpu.parameters()) == 162_496
    assert (cpu.config.hidden_size, cpu.config.num_hidden_layers, cpu.config.head_dim) == (64, 3, 32)
    assert sum(p.numel() for p in gpu.parameters()) == 3_420_160
    assert (gpu.config.head_dim, gpu.config.max_position_embeddings) == (64, 4096)


def test_the_undone_restore_fault_gives_a_resumed_sampler_the_learner():
    """``fresh-sampler-on-resume``: resumed inside a cycle (step 2 at N=4) the sampler gets the learner's
    weights (no snapshot), the bookkeeping still says version 0; at a cycle's start nothing changes."""
    from types import SimpleNamespace

    from coolsampler.testkit import faults

    calls = []

    class PPOTrainerSync:
        coolsampler_keys = SimpleNamespace(refresh_interval=4)

        def _push(self, snapshot=None, fresh_version=None):
            calls.append((snapshot, fresh_version))

        def on_init_end(self):
            calls.append(("patched", self.global_steps))

    faults._undo_restore(SimpleNamespace(PPOTrainerSync=PPOTrainerSync))
    t = PPOTrainerSync()
    for step in (0, 2, 4):
        t.global_steps = step
        t.on_init_end()
    assert calls == [("patched", 0), (None, 0), ("patched", 4)]
    assert t.sampler_version == 0


def test_response_length_and_logprob_seqs_reach_the_check(tmp_path, monkeypatch):
    """``--response-length`` sets the GPU recipe's max response length (the CPU stack keeps the
    rehearsal's), and ``--logprob-seqs`` bounds the step-1 sequences recomputed with transformers."""
    import torch

    from coolsampler.cli import main
    from coolsampler.train.rehearsal import REHEARSAL_RECIPE
    from coolsampler.world import toy

    seen: list[acc.Options] = []
    monkeypatch.setattr(acc, "run_acceptance", lambda opt: seen.append(opt) or {"passed": True})
    monkeypatch.setattr(acc, "summary_markdown", lambda summary: "")
    argv = ["acceptance", "--out", str(tmp_path), "--response-length", "128", "--logprob-seqs", "2"]
    assert main(argv) == 0
    (opt,) = seen
    assert (opt.response_length, opt.logprob_seqs) == (128, 2)
    assert acc.acceptance_recipe("gpu", opt.response_length)["max_response_length"] == 128
    cpu = acc.acceptance_recipe("cpu", opt.response_length)
    assert cpu.get("max_response_length") == REHEARSAL_RECIPE.get("max_response_length")

    # a step-1 tap of three responses (4, 3 and 2 tokens): two are read with --logprob-seqs 2
    model = tmp_path / "model"
    toy.build_model(model, vocab_size=len(toy.VOCAB)).save_pretrained(model)
    tap = tmp_path / "tap"
    tap.mkdir()
    lengths = (4, 3, 2)
    mask = torch.tensor([[1] * n + [0] * (4 - n) for n in lengths])
    torch.save(
        {
            "prompts": [torch.tensor([1, 2, 3])] * 3,
            "responses": torch.full((3, 4), 4),
            "rollout_log_probs": torch.zeros(3, 4),
            "old_log_probs": torch.zeros(3, 4),
            "response_mask": mask,
        },
        tap / "step_1.pt",
    )
    assert acc.logprob_errors(tap, model, tb=0.8, tl=1.0, max_seqs=opt.logprob_seqs)["tokens"] == 4 + 3

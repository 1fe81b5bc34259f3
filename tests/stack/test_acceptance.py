"""The acceptance check (``coolsampler acceptance``, coolsampler.testkit.acceptance).

Fast: model discovery in an offline hub cache, the random-1.5B fallback (architecture and tokenizer),
the offline unpatched-verl tree, and the checks on synthetic logs. Slow: the whole check on the CPU
stack, which is how the script itself is tested where there is no GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_fallback_has_the_15b_architecture():
    # Qwen2.5-Math-1.5B: 1,543,714,304 parameters (tied embedding), counted without allocating them
    assert acc.count_parameters() == 1_543_714_304


def test_random_model_and_filler_tokenizer_load(tmp_path):
    """The fallback path end to end with a small config of the same family: saved, reloaded by
    transformers, every id decodes, and the toy sums encode to their characters."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    small = {
        **acc.QWEN25_MATH_15B,
        "vocab_size": 300,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
    }
    acc.random_qwen2(tmp_path, small)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert model.config.vocab_size == 300 and len(tok) == 300
    assert tok.decode(tok.encode("23+45=")) == "23+45="
    assert len(tok.encode("23+45=")) == 6
    assert tok.decode([299]) == "<299>"
    assert model.dtype == torch.bfloat16


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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_acceptance_on_the_cpu_stack(tmp_path):
    """The whole script on the CPU stack (toy model): N=4 staleness run of 6 steps with the tap (two
    sampler versions, a stale validation at step 3), N=1 and N=8 timing runs; --quick leaves out the
    unpatched-verl run (tests/stack/test_verl_stack.py runs upstream verl)."""
    out = tmp_path / "acc"
    cmd = [
        sys.executable,
        "-m",
        "coolsampler.cli",
        "acceptance",
        "--platform",
        "cpu",
        "--steps",
        "6",
        "--quick",
        "--sft-steps",
        "25",
        "--budget-s",
        "840",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=880)
    summary = json.loads((out / "summary.json").read_text())
    status = {c["name"]: c["status"] for c in summary["checks"]}
    assert proc.returncode == 0 and summary["passed"], proc.stdout[-4000:] + proc.stderr[-2000:]
    assert status["staleness sequence, N=4"] == "pass"
    # the engine's state at every step, seen through its log-probs: versions 0 (steps 1-4, step 4 after
    # the stale validation of step 3) and 4 (steps 5-6), each told apart from the other
    assert status["sampler holds its snapshot at every step (staleness)"] == "pass"
    assert status["sampler versions told apart (staleness)"] == "pass"
    assert status["KL resets at each refresh and grows within a cycle (staleness)"] == "pass"
    assert status["sampler log-probs = log_softmax(z/Tb)"] == "pass"
    assert status["learner old log-probs = log_softmax(z/Tl)"] == "pass"
    assert status["step time N=8 / N=1"] == "info"  # printed, judged on gpu only
    assert status["peak host memory (PSS of the run's session)"] == "pass"
    assert "| staleness sequence, N=4 | 0 1 2 3 0 1 |" in (out / "summary.md").read_text()


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
    world = acc.World(Path("m"), "toy", "", Path(), Path())
    good = [1e-9, 2e-3, 5e-3, 9e-3, 2e-9, 3e-3, 7e-3, 1e-2]
    assert acc.kl_cycle_checks(res, world, states(good))[0].status == "pass"
    never_refreshed = [1e-9, 2e-3, 5e-3, 9e-3, 1.2e-2, 1.5e-2, 1.8e-2, 2e-2]
    assert acc.kl_cycle_checks(res, world, states(never_refreshed))[0].status == "fail"
    never_stale = [1e-9] * 8
    assert acc.kl_cycle_checks(res, world, states(never_stale))[0].status == "fail"
    assert acc.kl_cycle_checks(res, world, None)[0].status == "fail"
    random = acc.World(Path("m"), "random", "", Path(), Path())
    assert acc.kl_cycle_checks(res, random, states(never_stale))[0].status == "info"

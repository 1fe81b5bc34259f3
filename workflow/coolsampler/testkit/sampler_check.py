"""What the sampler held at every step, seen through what it sampled.

Under the staleness gate the sampler must sample, at step t, from the weights of its last refresh: the
snapshot the actor ranks keep (version N*floor((t-1)/N)). That holds after every sleep and wake on kept
weights, after every fresh-weights validation (the stale sampler pushed back), and after a resume (the
snapshot read back from the checkpoint). A wake that restored the wrong weights, or a return to the stale
sampler that did not take, leaves staleness counters and step-1 checks unchanged while every curve after
it is silently wrong; the sampler's own record shows it: the behaviour log-probs vLLM recorded (at the
step's sampler temperature, ``processed_logprobs``) must equal the snapshot's log-probs recomputed on the
learner side. To show the check can tell versions apart, each step is also compared with the neighbouring
version's snapshot. Alongside, the learner's drift from the sampler: k3 of the learner's own log-probs
(``old_log_probs``) against the snapshot's, both at the learner temperature, on the sampled tokens. It is
the staleness part of the learner-sampler KL without its temperature part (Tb != Tl adds a constant that
verl's logged KL cannot separate): zero, up to rounding, at a refresh's first step, growing within a cycle.

Reads what ``coolsampler.testkit.tap`` wrote (``step_<t>.pt``, ``snapshot_v<version>.pt``); recomputes
with transformers in fp32, on the GPU when there is one. Used by ``coolsampler acceptance`` and by the CPU
rehearsal's two-rank check. Imports torch and transformers when it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StepState:
    """One step: the version the sampler should hold, and how far its recorded log-probs are from that
    version's recomputed ones (and from the neighbouring version's, where there is one)."""

    step: int
    version: int
    temperature: float
    tokens: int
    mean_err: float
    max_err: float
    other_version: int | None = None
    other_mean_err: float | None = None
    drift_k3: float = float("nan")  # learner vs the snapshot, both at the learner temperature


def versions(tap_dir: Path) -> list[int]:
    return sorted(
        int(m[1]) for p in tap_dir.glob("snapshot_v*.pt") if (m := re.fullmatch(r"snapshot_v(\d+)\.pt", p.name))
    )


def _load(model_dir: Path, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    return model.to(device).eval()


def _set_weights(model, state: dict) -> None:
    import torch

    with torch.no_grad():
        missing, unexpected = model.load_state_dict({n: t.float() for n, t in state.items()}, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:  # a tied lm_head is the embedding
        raise ValueError(f"snapshot does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()


def _errors(
    model, rec: dict, temperature: float, max_seqs: int, device: str, learner_t: float = 1.0
) -> tuple[int, float, float, float]:
    """(tokens, mean and max |recorded - recomputed| at ``temperature``, k3 of the learner's old log-probs
    against the recomputed ones at ``learner_t``)."""
    import torch

    errs, k3 = [], []
    fields = (rec["prompts"], rec["responses"], rec["rollout_log_probs"], rec["response_mask"])
    for i, (prompt, response, q, mask) in enumerate(zip(*fields, strict=True)):
        if i >= max_seqs:
            break
        n = int(mask.bool().sum())
        if n == 0:
            continue
        resp = response[:n].to(device)
        ids = torch.cat([prompt.to(device), resp]).unsqueeze(0)
        with torch.no_grad():
            z = model(input_ids=ids).logits[0].float()[len(prompt) - 1 : len(prompt) - 1 + n]
        want = torch.log_softmax(z / temperature, -1).gather(1, resp[:, None]).squeeze(1).cpu()
        errs.append((q[:n].float().cpu() - want).abs())
        if "old_log_probs" in rec:
            snap = torch.log_softmax(z / learner_t, -1).gather(1, resp[:, None]).squeeze(1).cpu()
            log_r = rec["old_log_probs"][i][:n].float().cpu() - snap
            k3.append(torch.exp(log_r) - 1 - log_r)
    if not errs:
        return 0, float("nan"), float("nan"), float("nan")
    cat = torch.cat(errs)
    drift = float(torch.cat(k3).mean()) if k3 else float("nan")
    return len(cat), float(cat.mean()), float(cat.max()), drift


def check_sampler_state(
    tap_dir: Path,
    model_dir: Path,
    temperatures: dict[int, float] | None = None,
    *,
    steps: list[int] | None = None,
    max_seqs: int = 32,
    learner_temperature: float = 1.0,
) -> list[StepState]:
    """Every tapped step (or ``steps``) against its version's snapshot at its sampler temperature
    (``temperatures[t]``, else the one the tap recorded), and against the neighbouring version's."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tap_dir = Path(tap_dir)
    have = versions(tap_dir)
    if steps is None:
        steps = sorted(int(m[1]) for p in tap_dir.glob("step_*.pt") if (m := re.fullmatch(r"step_(\d+)\.pt", p.name)))
    recs = {t: torch.load(tap_dir / f"step_{t}.pt", weights_only=False) for t in steps}
    wants: dict[int, list[tuple[int, str]]] = {}  # version -> [(step, own | other)]
    for t, rec in recs.items():
        v = rec.get("sampler_version")
        if v is None or v not in have:
            raise FileNotFoundError(f"step {t}: no snapshot of sampler version {v} in {tap_dir} (N = 1 keeps none)")
        wants.setdefault(v, []).append((t, "own"))
        later = [u for u in have if u > v]
        other = later[0] if later else next((u for u in reversed(have) if u < v), None)
        if other is not None:
            wants.setdefault(other, []).append((t, "other"))
    found: dict[tuple[int, str], tuple[int, int, float, float, float]] = {}
    model = _load(model_dir, device)
    for v, jobs in sorted(wants.items()):
        _set_weights(model, torch.load(tap_dir / f"snapshot_v{v}.pt", weights_only=False))
        for t, kind in jobs:
            temp = (temperatures or {}).get(t, recs[t]["temperature"])
            found[t, kind] = (v, *_errors(model, recs[t], temp, max_seqs, device, learner_temperature))
    out = []
    for t in steps:
        v, n, mean, mx, drift = found[t, "own"]
        o = found.get((t, "other"))
        temp = (temperatures or {}).get(t, recs[t]["temperature"])
        out.append(StepState(t, v, temp, n, mean, mx, o[0] if o else None, o[2] if o else None, drift))
    return out

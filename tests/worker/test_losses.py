"""mu-GRPO policy loss (coolsampler.worker.losses): hand-computed values on tiny tensors, and its
registration in verl's policy-loss registry (also through VERL_USE_EXTERNAL_MODULES, as workers do)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl.trainer.ppo.core_algos")

from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402

from coolsampler.worker import losses  # noqa: E402

LN = math.log

# Five responses of three tokens. Ratios rho = pi/beta are set through log pi - log beta.
#   row 0  A=+1  rho 1, 2, 10          -> -min(rho A, clip A) = -1, -2, -5 ; token 3 clipped
#   row 1  A=-1  rho 0.5, 10, 1        -> 0.5, 10, 1 (A<0, rho>5: unclipped term is the min, no clip)
#   row 2  A=-1  rho 1, 1e-5, 1        -> vetoed (negative advantage, a token below 1e-4)
#   row 3  A=+1  rho 1, 1e-5, [pad]    -> kept (positive advantage): -1, -1e-5
#   row 4  A=-1  rho 2, [pad 1e-6 x2]  -> kept (the tiny ratios are padding): 2
RHO = [[1.0, 2.0, 10.0], [0.5, 10.0, 1.0], [1.0, 1e-5, 1.0], [1.0, 1e-5, 1e-6], [2.0, 1e-6, 1e-6]]
ADV = [1.0, -1.0, -1.0, 1.0, -1.0]
MASK = [[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 0, 0]]
KEPT_SUM = (-1 - 2 - 5) + (0.5 + 10 + 1) + (-1 - 1e-5) + 2  # rows 0, 1, 3, 4
KEPT_TOKENS = 3 + 3 + 2 + 1
VALID_TOKENS = 12


def _batch(requires_grad: bool = False) -> dict[str, torch.Tensor]:
    beta = torch.full((5, 3), -2.0, dtype=torch.float64)  # sampler log-probs (arbitrary, ratios matter)
    log_prob = (beta + torch.tensor([[LN(r) for r in row] for row in RHO], dtype=torch.float64)).detach()
    log_prob.requires_grad_(requires_grad)
    adv = torch.tensor(ADV, dtype=torch.float64).unsqueeze(-1).expand(5, 3).contiguous()
    return {
        "old_log_prob": beta,
        "log_prob": log_prob,
        "advantages": adv,
        "response_mask": torch.tensor(MASK, dtype=torch.bool),
    }


def test_registered_under_mu_grpo() -> None:
    assert get_policy_loss_fn("mu_grpo") is losses.compute_policy_loss_mu_grpo


def test_registered_in_a_fresh_process_via_verl_external_modules() -> None:
    """What every Ray worker does: `import verl` imports VERL_USE_EXTERNAL_MODULES."""
    env = dict(os.environ, VERL_USE_EXTERNAL_MODULES="coolsampler.worker.losses")
    code = (
        "import verl\n"
        "from verl.trainer.ppo.core_algos import get_policy_loss_fn\n"
        "print(get_policy_loss_fn('mu_grpo').__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "coolsampler.worker.losses"


def test_per_token_terms_veto_and_clip() -> None:
    b = _batch()
    t = losses.mu_grpo_terms(b["log_prob"], b["old_log_prob"], b["advantages"], b["response_mask"])
    expected = torch.tensor(
        [[-1.0, -2.0, -5.0], [0.5, 10.0, 1.0], [1.0, 1e-5, 1.0], [-1.0, -1e-5, -1e-6], [2.0, 1e-6, 1e-6]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(t["pg_losses"], expected)
    assert t["vetoed"].tolist() == [False, False, True, False, False]
    kept = [[1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0], [1, 0, 0]]
    assert t["mask"].int().tolist() == kept
    # clip active only where rho > 5 and A > 0 (row 0, token 3); row 1's rho=10 has A < 0
    assert t["clipped"].int().tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_ratio_at_veto_threshold_is_not_vetoed() -> None:
    """The rule is rho < 1e-4, strict."""
    lp = torch.tensor([[LN(2e-4), 0.0]], dtype=torch.float64)
    t = losses.mu_grpo_terms(lp, torch.zeros_like(lp), -torch.ones_like(lp), torch.ones_like(lp, dtype=torch.bool))
    assert not t["vetoed"].item()
    lp = torch.tensor([[LN(5e-5), 0.0]], dtype=torch.float64)
    t = losses.mu_grpo_terms(lp, torch.zeros_like(lp), -torch.ones_like(lp), torch.ones_like(lp, dtype=torch.bool))
    assert t["vetoed"].item()


def test_loss_token_mean_and_metrics() -> None:
    loss, metrics = get_policy_loss_fn("mu_grpo")(**_batch(), loss_agg_mode="token-mean", config=None)
    assert loss.item() == pytest.approx(KEPT_SUM / KEPT_TOKENS, rel=1e-12)
    assert metrics["mu_grpo/veto_frac"] == pytest.approx(1 / 5)
    assert metrics["mu_grpo/clip_frac"] == pytest.approx(1 / VALID_TOKENS)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(1 / VALID_TOKENS)
    # learner-sampler KL over valid tokens: mean(log beta - log pi) = -mean(log rho)
    log_rho = [LN(r) for row, m in zip(RHO, MASK, strict=True) for r, k in zip(row, m, strict=True) if k]
    assert metrics["rollout_corr/kl"] == pytest.approx(-sum(log_rho) / VALID_TOKENS, rel=1e-6)
    assert all(isinstance(v, float) for v in metrics.values())


def test_loss_uses_verl_global_batch_info() -> None:
    """Inside verl the token mean divides by the mini-batch's token count (before the veto)."""
    cfg = SimpleNamespace(global_batch_info={"dp_size": 1, "batch_num_tokens": VALID_TOKENS})
    loss, _ = losses.compute_policy_loss_mu_grpo(**_batch(), loss_agg_mode="token-mean", config=cfg)
    assert loss.item() == pytest.approx(KEPT_SUM / VALID_TOKENS, rel=1e-12)


def test_other_aggregation_modes_pass_through() -> None:
    loss, _ = losses.compute_policy_loss_mu_grpo(**_batch(), loss_agg_mode="seq-mean-token-mean")
    per_seq = [(-8) / 3, 11.5 / 3, (-1 - 1e-5) / 2, 2.0]  # vetoed row 2 has no tokens and is excluded
    assert loss.item() == pytest.approx(sum(per_seq) / 4, rel=1e-6)


def test_gradients() -> None:
    """d loss / d log pi = -A rho / N where the unclipped term is active, 0 where clipped or vetoed."""
    b = _batch(requires_grad=True)
    loss, _ = losses.compute_policy_loss_mu_grpo(**b, loss_agg_mode="token-mean")
    loss.backward()
    g = b["log_prob"].grad * KEPT_TOKENS
    expected = torch.tensor(
        [[-1.0, -2.0, 0.0], [0.5, 10.0, 1.0], [0.0, 0.0, 0.0], [-1.0, -1e-5, 0.0], [2.0, 0.0, 0.0]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(g, expected)


def test_all_vetoed_gives_zero_not_nan() -> None:
    lp = torch.tensor([[LN(1e-6), 0.0]], dtype=torch.float64, requires_grad=True)
    loss, metrics = losses.compute_policy_loss_mu_grpo(
        old_log_prob=torch.zeros(1, 2, dtype=torch.float64),
        log_prob=lp,
        advantages=-torch.ones(1, 2, dtype=torch.float64),
        response_mask=torch.ones(1, 2, dtype=torch.bool),
    )
    assert loss.item() == 0.0
    loss.backward()
    assert metrics["mu_grpo/veto_frac"] == 1.0


def test_rollout_is_weights_are_refused() -> None:
    b = _batch()
    with pytest.raises(ValueError, match="bypass_mode"):
        losses.compute_policy_loss_mu_grpo(**b, rollout_is_weights=torch.ones(5, 3, dtype=torch.float64))

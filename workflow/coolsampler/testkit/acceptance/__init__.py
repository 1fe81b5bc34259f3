"""The acceptance check of a machine: the 1.5B recipe for a few steps through the real stack, one command.

``coolsampler acceptance`` is its CLI. On the first machine with a GPU it answers, in under ten minutes,
whether the patched stack does there what the CPU tests show it does here:

* staleness: at refresh interval N=4 the logged ``staleness/staleness`` is (t-1) mod 4 and the sampler is
  refreshed only after steps that are multiples of 4 (patch 0001), with validation between refreshes;
* decoupled temperature on real tokens (patch 0002): at step 1 (both sides still hold the initial
  weights) the sampler's recorded log-probs equal log_softmax(z/Tb) and the learner's old log-probs
  log_softmax(z/Tl), z recomputed with transformers from the initial model (``coolsampler.testkit.tap``
  records both);
* what the sampler holds, on the real engine: at every step, after each sleep and wake and after each
  fresh-weights validation, its recorded behaviour log-probs equal the stale snapshot's log-probs
  recomputed at Tb on the learner side (``coolsampler.testkit.sampler_check``; the engine's weights are
  never dumped, which verl's GPU worker extension cannot do), and differ from the neighbouring
  version's; the learner-sampler KL resets at each refresh and grows within a cycle. The staleness arm
  trains at ``STALENESS_LR`` so that a cycle moves the learner further than bf16's rounding; with two or
  more GPUs a second staleness arm runs the sampler at tensor-parallel size 2. These checks are judged
  always, behind a precondition that is itself judged: the model learnt (some step's rewards varied, some
  step's gradient was non-zero). A model that learns nothing leaves every sampler version equal, and a
  check that passed then would have tested nothing;
* resume (patch 0004): a run killed at a checkpoint's save resumes inside a refresh cycle with the stale
  sampler restored: its gate state equals the uninterrupted arm's at every step, and its sampler holds
  version 0 after the resume;
* step time: refresh every step (N=1) vs every 8 steps (N=8) vs unpatched verl 0.9.1 at N=1 (the
  installed patched tree with the patches reverse-applied, put first on PYTHONPATH, as the real-stack
  tests do with ``tests.stack.pristine_verl``); medians of the steps after warm-up, as ratios;
* memory: peak GPU memory (``nvidia-smi`` polled while a run trains; another process's CUDA counters are
  not visible) and peak host memory (the summed PSS of the run's process session, from /proc).

Models: ``--model``, else the first Qwen2-family snapshot in the offline Hugging Face cache (the paper's
Qwen2.5-Math-1.5B first), else a toy Qwen2 of GPU size warm-started on the sums in seconds (the summary
says so). On the ``cpu`` platform: the rehearsal's toy Qwen2 (``coolsampler.world.toy``), so that the
script itself is tested on the CPU stack. Data: toy sums in GSM8K's format
(``coolsampler.world.toy.write_rehearsal_task``).

Before any engine is built, a GPU without bf16 stops the check with one line
(``coolsampler.worker.gpu_check``). ``Options.break_gate`` (the CLI's hidden ``--break-gate``) is the
check's self-test: the sampler refreshed at every step, which must fail the sampler check.

Every run goes through ``coolsampler.train.launch.run_verl`` (timeout, stall watchdog, session kill). This
package imports neither verl, vLLM nor torch at import time (the log-prob and model code import torch
when they run).

The package holds one module per concern: ``models`` (which model), ``world`` (model and data),
``pristine`` (upstream verl for comparison), ``monitor`` (memory), ``arms`` (the runs), ``checks``,
``summary``, and ``run`` (the whole check in order).
"""

from __future__ import annotations

from coolsampler.testkit.acceptance.arms import (
    N_STALE,
    STALENESS_LR,
    TB,
    TL,
    WARMUP_STEPS,
    Arm,
    ArmResult,
    acceptance_recipe,
    arm_overrides,
    forget_tap_after,
    records,
    run_arm,
)
from coolsampler.testkit.acceptance.checks import (
    LOGPROB_TOL,
    TIME_LIMITS,
    Check,
    kl_cycle_checks,
    learning_checks,
    logprob_checks,
    logprob_errors,
    memory_checks,
    resume_checks,
    sampler_state_checks,
    staleness_checks,
    timing_checks,
)
from coolsampler.testkit.acceptance.models import PAPER_MODEL_REPO, find_model, hub_roots
from coolsampler.testkit.acceptance.pristine import parse_patch, reverse_patch, unpatched_verl
from coolsampler.testkit.acceptance.run import Options, run_acceptance
from coolsampler.testkit.acceptance.summary import summary_markdown, write_summary
from coolsampler.testkit.acceptance.world import World, make_world, say

__all__ = [
    "LOGPROB_TOL",
    "N_STALE",
    "PAPER_MODEL_REPO",
    "STALENESS_LR",
    "TB",
    "TIME_LIMITS",
    "TL",
    "WARMUP_STEPS",
    "Arm",
    "ArmResult",
    "Check",
    "Options",
    "World",
    "acceptance_recipe",
    "arm_overrides",
    "find_model",
    "forget_tap_after",
    "hub_roots",
    "kl_cycle_checks",
    "learning_checks",
    "logprob_checks",
    "logprob_errors",
    "make_world",
    "memory_checks",
    "parse_patch",
    "records",
    "resume_checks",
    "reverse_patch",
    "run_acceptance",
    "run_arm",
    "sampler_state_checks",
    "say",
    "staleness_checks",
    "summary_markdown",
    "timing_checks",
    "unpatched_verl",
    "write_summary",
]

"""Build-time check of the coolsampler image: everything a training step imports, and the learner's
attention as verl's FSDP engine drives it. Run by containers/install.sh after the install (CPU only:
no GPU at build time), and by tests/train/test_containers.py against the CPU stack.

Why a check at build time: a training job finds a missing package, a vLLM class verl expects, or an
attention implementation transformers cannot serve only after Ray, vLLM and the model have started,
minutes into a GPU allocation. Here the image fails to build instead.

What it imports, derived where it can be:

* the package modules the image's training code reaches and every module they import, lazy imports
  included (``coolsampler.train.container.image_modules`` / ``external_imports``: an ``ast`` walk from
  ``coolsampler.worker.*`` and ``coolsampler.worker.rewards``); a ``from m import name`` must resolve too;
* verl's entry points of a GRPO step (``VERL_ENTRY_POINTS``): main_ppo, the v1 trainers and agent
  loop, the FSDP engine and its workers, the vLLM async server and worker extension (which import
  the vLLM classes verl uses: AsyncLLM, the OpenAI server, the headless CLI);
* then it builds a tiny Qwen2 the way verl does (``AutoConfig.from_pretrained(...,
  attn_implementation=...)``, ``from_pretrained``, verl's ``apply_monkey_patch``) with the image's
  attention (``coolsampler.train.container.IMAGE_ATTENTION``), feeds it the inputs verl's FSDP engine
  builds (``FSDPEngineWithLMHead.prepare_model_inputs``) for a batch of sequences of different
  lengths, and checks each sequence's logits against that sequence alone.

Exit status 0 when all holds; 1 with every failure listed otherwise.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from types import SimpleNamespace

# verl modules a training step imports (the driver, the Ray workers, the rollout server).
VERL_ENTRY_POINTS = (
    "verl.trainer.main_ppo",
    "verl.trainer.ppo.v1",
    "verl.trainer.ppo.v1.trainer_sync",
    "verl.trainer.ppo.v1.agent_loop_tq",
    "verl.trainer.ppo.core_algos",
    "verl.workers.engine_workers",
    "verl.workers.engine.fsdp.transformer_impl",
    "verl.workers.rollout.vllm_rollout.vllm_async_server",
    "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension",
    "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer",
    "verl.models.transformers.monkey_patch",
    "verl.utils.reward_score.gsm8k",
    "verl.utils.reward_score.math_reward",
    "vllm.v1.engine.async_llm.AsyncLLM",
    "transformers.models.qwen2.modeling_qwen2.Qwen2ForCausalLM",
    "transfer_queue",
    "ray",
)


def import_target(name: str) -> object:
    """Import ``a.b.c``; if ``a.b.c`` is not a module, it must be an attribute of module ``a.b``
    (the ``from a.b import c`` case)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name or "." not in name:
            raise
    parent, _, attr = name.rpartition(".")
    module = import_target(parent)
    if not hasattr(module, attr):
        raise ImportError(f"{parent} has no {attr}")
    return getattr(module, attr)


def package_targets() -> list[str]:
    """The coolsampler modules of the image and the non-stdlib names they import."""
    from coolsampler.train.container import external_imports, image_modules

    roots = set(sys.stdlib_module_names)
    return [*image_modules(), *(n for n in external_imports() if n.split(".")[0] not in roots)]


def check_imports(names: Iterable[str]) -> list[str]:
    failures = []
    for name in names:
        try:
            import_target(name)
        except Exception:  # every failure is reported, not only the first
            failures.append(f"import {name}:\n{traceback.format_exc(limit=3)}")
    return failures


def _micro_batch(seqs: list[list[int]], use_remove_padding: bool):
    """A micro-batch as verl's v1 trainer hands it to the FSDP engine: jagged input/position ids."""
    import torch
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.dataset_utils import DatasetPadMode

    ids = torch.nested.as_nested_tensor([torch.tensor(s) for s in seqs], layout=torch.jagged)
    pos = torch.nested.as_nested_tensor([torch.arange(len(s)) for s in seqs], layout=torch.jagged)
    td = tu.get_tensordict({"input_ids": ids, "position_ids": pos, "temperature": torch.ones(len(seqs))})
    tu.assign_non_tensor(
        td,
        use_remove_padding=use_remove_padding,
        pad_mode=DatasetPadMode.NO_PADDING,
        use_fused_kernels=False,
        pad_token_id=0,
    )
    return td


def check_attention(attention: dict[str, object], *, tol: float = 1e-4) -> list[str]:
    """The image's attention on a tiny Qwen2, through verl's model loading and input preparation."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config
    from verl.models.transformers.monkey_patch import apply_monkey_patch
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    impl = str(attention["+actor_rollout_ref.model.override_config.attn_implementation"])
    rmpad = bool(attention["actor_rollout_ref.model.use_remove_padding"])
    if impl == "flash_attention_2":
        import flash_attn  # noqa: F401 - transformers serves flash_attention_2 only from this package

        return []  # its kernels need a GPU; nothing more to run at build time
    torch.manual_seed(0)
    tiny = Qwen2Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    with tempfile.TemporaryDirectory() as tmp:
        AutoModelForCausalLM.from_config(tiny).save_pretrained(tmp)
        # verl/workers/config/model.py: the config carries the implementation, from_pretrained uses it
        config = AutoConfig.from_pretrained(tmp, attn_implementation=impl)
        model = AutoModelForCausalLM.from_pretrained(tmp, config=config, torch_dtype=torch.float32).eval()
    failures = []
    if model.config._attn_implementation != impl:
        failures.append(f"model runs {model.config._attn_implementation!r}, not {impl!r}")
    apply_monkey_patch(model=model, use_remove_padding=rmpad, ulysses_sp_size=1)

    seqs = [[5, 17, 9, 33, 2, 71, 8], [40, 3], [11, 12, 13, 14, 15]]
    engine = SimpleNamespace(pad_to_length=False, use_ulysses_sp=False, pass_packed_cu_seqlens=False)
    engine._get_packed_pad_size = lambda n: FSDPEngineWithLMHead._get_packed_pad_size(engine, n)
    inputs, _ = FSDPEngineWithLMHead.prepare_model_inputs(engine, _micro_batch(seqs, rmpad))
    with torch.no_grad():
        logits = model(**inputs, use_cache=False).logits
        alone = [model(input_ids=torch.tensor([s]), use_cache=False).logits[0] for s in seqs]
    start = 0
    for b, (s, ref) in enumerate(zip(seqs, alone, strict=True)):
        got = logits[0, start : start + len(s)] if rmpad else logits[b, : len(s)]
        start += len(s)
        err = (got - ref).abs().max().item()
        if not err < tol:
            failures.append(f"{impl}, use_remove_padding={rmpad}: sequence {b} logits off by {err:.2e}")
    return failures


def main(argv: list[str] | None = None) -> int:
    from coolsampler.train.container import IMAGE_ATTENTION

    steps: list[tuple[str, Callable[[], list[str]]]] = [
        ("verl / vLLM entry points", lambda: check_imports(VERL_ENTRY_POINTS)),
        ("coolsampler training code and its imports", lambda: check_imports(package_targets())),
        (
            "attention " + ", ".join(f"{k}={v}" for k, v in IMAGE_ATTENTION.items()),
            lambda: check_attention(IMAGE_ATTENTION),
        ),
    ]
    failed = False
    for title, step in steps:
        try:
            problems = step()
        except Exception:  # a step that crashes is a failure too
            problems = [traceback.format_exc()]
        print(f"check_image: {'FAIL' if problems else 'ok'}: {title}", flush=True)
        for p in problems:
            print(p, file=sys.stderr)
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The acceptance check of a machine: the 1.5B recipe for a few steps through the real stack, one command.

``workflow/scripts/gpu_acceptance.py`` is its CLI. On the first machine with a GPU it answers, in under
ten minutes, whether the patched stack does there what the CPU tests show it does here:

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
  more GPUs a second staleness arm runs the sampler at tensor-parallel size 2;
* step time: refresh every step (N=1) vs every 8 steps (N=8) vs unpatched verl 0.9.1 at N=1 (the
  installed patched tree with the patches reverse-applied, put first on PYTHONPATH, as the real-stack
  tests do with ``tests.stack.pristine_verl``); medians of the steps after warm-up, as ratios;
* memory: peak GPU memory (``nvidia-smi`` polled while a run trains; another process's CUDA counters are
  not visible) and peak host memory (the summed PSS of the run's process session, from /proc).

Models: ``--model``, else the first Qwen2-family snapshot in the offline Hugging Face cache (the paper's
Qwen2.5-Math-1.5B first), else a randomly initialised model with Qwen2.5-Math-1.5B's architecture
(``QWEN25_MATH_15B``; the summary says so). On the ``cpu`` platform: the rehearsal's toy Qwen2
(``coolsampler.testkit.toy``), so that the script itself is tested on the CPU stack. Data: toy sums in GSM8K's
format (``coolsampler.testkit.toy.write_rehearsal_task``).

Every run goes through ``coolsampler.train.launch.run_verl`` (timeout, stall watchdog, session kill). This
module imports neither verl, vLLM nor torch at import time (the log-prob and model code import torch
when they run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coolsampler.spec.study import Run, parse_key
from coolsampler.spec.temperature import num
from coolsampler.train.launch import TrainingFailed, proc_table, run_verl
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import get_platform
from coolsampler.train.rehearsal import REHEARSAL_RECIPE
from coolsampler.train.version import REPO

# Qwen2.5-Math-1.5B's config.json (Hugging Face, Qwen/Qwen2.5-Math-1.5B): the architecture of the
# fallback model when no real one is cached. Weights random, so rewards are all zero and nothing is
# learnt; shapes, memory and step time are those of the 1.5B model.
QWEN25_MATH_15B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "max_window_layers": 21,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "sliding_window": 4096,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "torch_dtype": "bfloat16",
}
PAPER_MODEL_REPO = "Qwen/Qwen2.5-Math-1.5B"
N_STALE = 4  # the staleness run's refresh interval
# The staleness arm's learning rate: 50 times the paper's, so that each step of a refresh cycle moves the
# learner (and the next snapshot) clearly further than rounding moves a log-prob (bf16 on GPU): the drift
# check needs the learner's distance from its sampler to grow step by step, and the sampler-state check
# two versions it can tell apart. At 10x (2e-5) the CPU rehearsal model's drift over a cycle stayed at
# 1e-9-1e-8, within the noise of which prompts a step drew. Eight steps at it change nothing else the
# checks read: they are about what is held where, not about learning well.
STALENESS_LR = 1e-4
TB, TL = 0.8, 1.0  # sampler and learner temperature of every run here
WARMUP_STEPS = 2  # steps 1-2 include compilation and cache warm-up: not timed

# Pass thresholds. GPU: the patches must cost nothing at N=1 and N=8 must not be slower (it skips 7 of
# 8 weight pushes); 10-15 % covers run-to-run noise of a few steps. CPU: the ratios are printed, not
# judged. The CPU run rehearses the script on 2 cores shared with other jobs (CI runs it beside the
# paper rehearsal), where a 2-step median moves by more than any limit that would still mean something:
# measured N=8/N=1 = 1.65 with the machine shared, under 1.5 alone, for the same code.
TIME_LIMITS: dict[str, dict[str, float] | None] = {
    "gpu": {"n8_over_n1": 1.10, "n1_over_upstream": 1.15},
    "cpu": None,
}
# Log-prob agreement. CPU: sampler and learner both fp32 (the platform's precision substitution),
# recomputed in fp32: 1e-4 as in tests/stack/test_verl_stack.py. GPU: vLLM and the FSDP learner compute in
# bf16 (8 mantissa bits: logits off by ~1e-2 relative), the reference in fp32: mean absolute error per
# token at most 0.05 nats. On both, each recorded log-prob must be closer to its own temperature's
# reference than to the other temperature's (mean error at most half): a tied or swapped temperature fails.
LOGPROB_TOL = {"cpu": ("max", 1e-4), "gpu": ("mean", 0.05)}


def say(msg: str) -> None:
    print(f"[acceptance {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------------
# Model discovery


def hub_roots() -> list[Path]:
    """Where an offline Hugging Face hub cache may be: HF_HUB_CACHE, HF_HOME/hub, ~/.cache, ./.cache
    (the docker recipe of docs/paper-study.md sets HF_HOME=$PWD/.cache/huggingface)."""
    roots = []
    if os.environ.get("HF_HUB_CACHE"):
        roots.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        roots.append(Path(os.environ["HF_HOME"]) / "hub")
    roots += [Path.home() / ".cache" / "huggingface" / "hub", Path.cwd() / ".cache" / "huggingface" / "hub"]
    out: list[Path] = []
    for r in roots:
        if r not in out:
            out.append(r)
    return out


def _usable(snapshot: Path) -> bool:
    """A snapshot verl and vLLM can load: a qwen2 config, weights and a tokenizer, all present."""
    try:
        cfg = json.loads((snapshot / "config.json").read_text())
    except (OSError, ValueError):
        return False
    if cfg.get("model_type") != "qwen2":
        return False
    weights = any(p.exists() for p in snapshot.glob("*.safetensors"))  # dangling links: not downloaded
    tokenizer = (snapshot / "tokenizer.json").exists() or (snapshot / "vocab.json").exists()
    return weights and tokenizer


def _repo_of(snapshot: Path) -> str:
    name = snapshot.parent.parent.name  # models--Qwen--Qwen2.5-Math-1.5B/snapshots/<rev>
    return name.removeprefix("models--").replace("--", "/")


def find_model(roots: list[Path] | None = None) -> tuple[Path, str] | None:
    """The first usable Qwen2-family snapshot: the paper's Qwen2.5-Math-1.5B, then any "1.5B" Qwen2,
    then the others by name (deterministic). Returns (path, repo id) or None."""
    found: list[tuple[int, str, Path]] = []
    for root in roots if roots is not None else hub_roots():
        for snap in sorted(root.glob("models--*/snapshots/*")):
            if not _usable(snap):
                continue
            repo = _repo_of(snap)
            rank = 0 if repo == PAPER_MODEL_REPO else 1 if "1.5b" in repo.lower() else 2
            found.append((rank, repo, snap))
    if not found:
        return None
    rank, repo, snap = min(found, key=lambda x: (x[0], x[1]))
    return snap, repo


def filler_tokenizer(out: Path, vocab_size: int):
    """A tokenizer for the random model: the rehearsal's characters (so the toy sums encode), padded with
    distinct filler tokens ``<i>`` to the model's vocabulary size, so that any id the sampler draws decodes."""
    from transformers import Qwen2Tokenizer

    from coolsampler.testkit import toy

    chars = toy.REHEARSAL_VOCAB
    byte_level = {" ": "Ġ", "\n": "Ċ"}
    vocab = {byte_level.get(t, t): i for i, t in enumerate(chars)}
    for i in range(len(vocab), vocab_size):
        vocab[f"<{i}>"] = i
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})  # already in the vocabulary
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(out)
    return tok


def random_qwen2(out: Path, config: dict[str, Any] = QWEN25_MATH_15B, *, seed: int = 0) -> Path:
    """Save a Qwen2 with ``config``'s architecture and random weights (bf16, as the real one ships), with
    the filler tokenizer. Built on the GPU when there is one (seconds, not minutes)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = filler_tokenizer(out, config["vocab_size"])
    cfg = Qwen2Config(
        **{k: v for k, v in config.items() if k not in ("architectures", "model_type")},
    )
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "acceptance-model.json").write_text(json.dumps({"kind": "random", "architecture": "Qwen2.5-Math-1.5B"}))
    return out


def count_parameters(config: dict[str, Any] = QWEN25_MATH_15B) -> int:
    """Parameters of ``config``'s model, counted on the meta device (no memory, no time)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**{k: v for k, v in config.items() if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    return sum(p.numel() for p in model.parameters())


@dataclass
class World:
    model: Path
    kind: str  # "real" | "random" | "toy"
    label: str  # what the summary says about the model
    train: Path
    val: Path


def make_world(platform: str, root: Path, model: Path | None, *, sft_steps: int = 100) -> World:
    """Model and data for the runs (reused when ``root`` holds them from an earlier call)."""
    from coolsampler.testkit import toy

    data = root / "data"
    if not (data / "train.parquet").exists():
        toy.write_rehearsal_task(data, "gsm8k")
    train, val = data / "train.parquet", data / "test.parquet"
    if model is not None:
        kind = "toy" if platform == "cpu" else "real"
        return World(model.resolve(), kind, f"{model} (given)", train, val)
    if platform == "cpu":
        toy_dir = root / "toy-model"
        if not (toy_dir / "model.safetensors").exists():
            import torch

            # one thread, as the platform gives every verl process (OMP_NUM_THREADS=1): on a loaded 2-core
            # machine two spinning OpenMP threads make a tiny model's step many times slower
            torch.set_num_threads(1)
            say(f"cpu platform: warm-starting the rehearsal's toy Qwen2 ({sft_steps} SFT steps at most)")
            toy.sft_warm_start(toy_dir, steps=sft_steps, target_acc=0.3, rehearsal=True, log=say)
        return World(toy_dir, "toy", "toy Qwen2 of the rehearsal (coolsampler.testkit.toy; cpu platform)", train, val)
    hit = find_model()
    if hit is not None:
        return World(hit[0], "real", f"{hit[1]} (offline cache: {hit[0]})", train, val)
    rand = root / "random-qwen2.5-math-1.5b"
    if not (rand / "model.safetensors").exists() and not any(rand.glob("model*.safetensors")):
        say("no Qwen2 model in the offline cache: building a RANDOMLY INITIALISED Qwen2.5-Math-1.5B")
        random_qwen2(rand)
    label = (
        "RANDOM WEIGHTS with Qwen2.5-Math-1.5B's architecture (no Qwen2 model in the offline cache; "
        "rewards are zero, nothing is learnt; mechanics, memory and step time only)"
    )
    return World(rand, "random", label, train, val)


# ---------------------------------------------------------------------------------------------------
# Unpatched verl


def parse_patch(text: str) -> list[tuple[str, list[tuple[list[str], list[str]]]]]:
    """A unified diff as [(path, [(old lines, new lines), ...])] (paths without the a/ b/ prefix)."""
    files: list[tuple[str, list[tuple[list[str], list[str]]]]] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if lines[i].startswith("+++ "):
            path = lines[i][4:].split("\t")[0].strip().split("/", 1)[1]
            files.append((path, []))
        elif lines[i].startswith("@@ ") and files:
            m = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
            n_old, n_new = int(m[1] or 1), int(m[2] or 1)
            old: list[str] = []
            new: list[str] = []
            i += 1
            while (len(old) < n_old or len(new) < n_new) and i < len(lines):
                line = lines[i]
                tag, body = line[:1], line[1:]
                if tag in (" ", "\n"):
                    body = body if tag == " " else "\n"
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                    target = new if tag == "+" else old if tag == "-" else None
                    for lst in [target] if target is not None else [old, new]:
                        lst[-1] = lst[-1].rstrip("\n")
                    i += 1
            files[-1][1].append((old, new))
            continue
        i += 1
    return files


def reverse_patch(tree: Path, patch: Path) -> None:
    """Undo ``patch`` in ``tree``: each hunk's new text must occur exactly once and becomes its old text.
    Pure Python (an image need not have GNU patch); raises naming the file and hunk that does not match."""
    for path, hunks in parse_patch(patch.read_text()):
        f = tree / path
        text = f.read_text()
        for k, (old, new) in enumerate(hunks, 1):
            new_s, old_s = "".join(new), "".join(old)
            if text.count(new_s) != 1:
                raise RuntimeError(f"{patch.name}: hunk {k} of {path} is not in the installed verl exactly once")
            text = text.replace(new_s, old_s, 1)
        f.write_text(text)


def unpatched_verl(dest: Path, patches_dir: Path) -> Path:
    """A copy of the installed (patched) verl with every patch reverse-applied, newest first: upstream verl
    0.9.1, to put first on PYTHONPATH. Offline, and from exactly the tree that the patched runs use."""
    import importlib.util

    spec = importlib.util.find_spec("verl")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("verl is not installed")
    src = Path(next(iter(spec.submodule_search_locations)))
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    for p in sorted(patches_dir.glob("*.patch"), reverse=True):
        reverse_patch(dest, p)
    (dest / "verl" / "version" / "version").write_text("0.9.1\n")
    (dest / "verl" / "coolsampler_patches.txt").unlink(missing_ok=True)
    return dest


# ---------------------------------------------------------------------------------------------------
# Memory


def _pss_kb(pid: int) -> int:
    """Proportional set size (shared pages split among their users, so a sum over processes is honest);
    RSS where smaps_rollup cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return 0


def session_memory_mb(parent: int) -> float:
    """Host memory of every process session a child of ``parent`` leads (run_verl starts verl with
    start_new_session: its pid is the session id, and Ray and vLLM stay in that session)."""
    table = proc_table()
    sessions = {p.pid for p in table if p.ppid == parent and p.session == p.pid}
    return sum(_pss_kb(p.pid) for p in table if p.session in sessions and p.state != "Z") / 1024


def gpu_memory_mb() -> list[tuple[float, float]] | None:
    """(used, total) MiB per GPU from nvidia-smi; None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [tuple(float(x) for x in line.split(",")) for line in out.strip().splitlines() if "," in line]
    return rows or None  # type: ignore[return-value]


class PeakMonitor(threading.Thread):
    """Polls host (session PSS) and GPU (nvidia-smi) memory while a run trains; keeps the peaks."""

    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.interval_s = interval_s
        self.host_mb = 0.0
        self.gpu_mb: float | None = None  # peak of the busiest GPU
        self.gpu_total_mb: float | None = None
        self._halt = threading.Event()  # not _stop: threading.Thread has a _stop method

    def run(self) -> None:
        me = os.getpid()
        while not self._halt.is_set():
            self.host_mb = max(self.host_mb, session_memory_mb(me))
            gpus = gpu_memory_mb()
            if gpus:
                used = max(u for u, _ in gpus)
                self.gpu_mb = used if self.gpu_mb is None else max(self.gpu_mb, used)
                self.gpu_total_mb = max(t for _, t in gpus)
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)


# ---------------------------------------------------------------------------------------------------
# Runs


@dataclass
class Arm:
    name: str
    N: int
    steps: int
    val_every: int  # 0: no validation (timing arms)
    tap: bool = False
    upstream: bool = False  # unpatched verl on PYTHONPATH
    lr: float = 2e-6
    tp: int = 1  # the sampler's tensor-parallel size (gpu platform)


@dataclass
class ArmResult:
    arm: Arm
    records: dict[int, dict] = field(default_factory=dict)
    wall_s: float = 0.0
    startup_s: float | None = None
    host_mb: float = 0.0
    gpu_mb: float | None = None
    gpu_total_mb: float | None = None
    error: str | None = None
    dir: Path | None = None


def records(jsonl: Path) -> dict[int, dict]:
    """verl's JSONL as {step: metrics} (a step's records merged)."""
    by_step: dict[int, dict] = {}
    for line in jsonl.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        by_step.setdefault(int(rec["step"]), {}).update(rec.get("data", {}))
    return by_step


def acceptance_run(arm: Arm) -> Run:
    lr = num(arm.lr)
    key = f"qwen2.5-math-1.5b/gsm8k/N{arm.N}_lr{lr}_tis_Tb{TB:g}_Tl{TL:g}_s1_st{arm.steps}_v{max(arm.val_every, 1)}"
    return replace(parse_key(key), val_every=arm.val_every)


def acceptance_recipe(platform: str, response_length: int) -> dict[str, Any]:
    """The study recipe of every run here. GPU: the paper's (16 prompts x 8 samples, lr, KL, TIS) with
    shorter responses to fit ten minutes; CPU: the rehearsal's batch and lengths. Both: a small greedy
    validation set and no checkpoints (saving a 1.5B model and optimiser takes longer than a step)."""
    base = dict(REHEARSAL_RECIPE) if platform == "cpu" else {"max_response_length": response_length}
    return {**base, "val_samples": 16, "save_every": 0}


def set_override(overrides: list[str], key: str, value: str) -> list[str]:
    """Replace ``key``'s override (with or without a leading +) or add it."""
    out = [o for o in overrides if o.split("=", 1)[0].lstrip("+") != key.lstrip("+")]
    return [*out, f"{key}={value}"]


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def arm_overrides(arm: Arm, world: World, out: Path, platform: str, recipe: dict[str, Any], gpus: int) -> list[str]:
    run = acceptance_run(arm)
    paths = RunPaths(model=str(world.model), train=str(world.train), val=str(world.val), out_dir=str(out))
    o = verl_overrides(run, paths, platform=platform, study_recipe=recipe, experiment="coolsampler-acceptance")
    if platform == "gpu":
        # the paper's runs hold 4 GPUs (tensor parallel 1 for 1.5B); this machine may have fewer
        n = max(1, min(gpus, 4))
        o = set_override(o, "trainer.n_gpus_per_node", str(n - n % arm.tp))
        o = set_override(o, "actor_rollout_ref.rollout.tensor_model_parallel_size", str(arm.tp))
    if arm.val_every == 0:
        o = set_override(o, "trainer.val_before_train", "false")
    return o


def run_arm(
    arm: Arm,
    world: World,
    out: Path,
    *,
    platform: str,
    recipe: dict[str, Any],
    gpus: int,
    timeout_s: float,
    upstream_tree: Path | None = None,
) -> ArmResult:
    out.mkdir(parents=True, exist_ok=True)
    res = ArmResult(arm, dir=out)
    env = get_platform(platform).env()
    # offline by definition (the model is a local directory): no hub look-up may wait on a network
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"})
    if arm.tap:
        (out / "tap").mkdir(exist_ok=True)
        env["COOLSAMPLER_TAP_DIR"] = str(out / "tap")
        env["COOLSAMPLER_TAP_SAMPLER"] = "0"  # the engine's weights are seen through its log-probs instead
        env["VERL_USE_EXTERNAL_MODULES"] += ",coolsampler.testkit.tap"
    if arm.upstream:
        assert upstream_tree is not None
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(upstream_tree), os.environ.get("PYTHONPATH")]))
    stall = 300.0 if platform == "cpu" else 180.0
    mon = PeakMonitor()
    mon.start()
    t0 = time.time()
    try:
        # One retry, as rule train does, of an attempt that stalled or died before its first step (on a
        # shared machine: a start-up slower than the limit, a port another job took); not of a timeout.
        for attempt in (1, 2):
            left = timeout_s - (time.time() - t0)
            try:
                prog = run_verl(
                    arm_overrides(arm, world, out, platform, recipe, gpus),
                    jsonl=out / "train.jsonl",
                    log=out / "train.log",
                    total_steps=arm.steps,
                    env=env,
                    timeout_s=left,
                    stall_s=stall,
                    startup_s=min(left, 2 * stall),
                    on_progress=lambda s: say(f"{arm.name}: {s}"),
                )
                res.startup_s = None if prog.first_step_at is None else prog.first_step_at - t0
                res.error = None
                break
            except TrainingFailed as e:
                res.error = str(e).splitlines()[0]
                say(f"{arm.name}: attempt {attempt} FAILED: {res.error} (log: {out / 'train.log'})")
                early = e.progress is not None and e.progress.step == 0 and not res.error.startswith("timeout")
                if attempt == 2 or not (early or res.error.startswith("stalled")):
                    break
                if timeout_s - (time.time() - t0) < 120:
                    break
    finally:
        mon.stop()
    res.wall_s = time.time() - t0
    res.host_mb, res.gpu_mb, res.gpu_total_mb = mon.host_mb, mon.gpu_mb, mon.gpu_total_mb
    jsonl = out / "train.jsonl"
    if jsonl.exists():
        res.records = records(jsonl)
    return res


# ---------------------------------------------------------------------------------------------------
# Checks


@dataclass
class Check:
    name: str
    value: str
    status: str  # "pass" | "fail" | "info"
    limit: str = ""


def staleness_checks(res: ArmResult, n: int = N_STALE) -> list[Check]:
    rec, steps = res.records, res.arm.steps
    arm = "" if res.arm.name == "staleness" else f" ({res.arm.name})"
    logged = sorted(s for s in rec if s > 0 and "staleness/staleness" in rec[s])
    seq = [int(rec[t]["staleness/staleness"]) for t in logged]
    want = [(t - 1) % n for t in range(1, steps + 1)]
    refreshed = [t for t in logged if bool(rec[t].get("staleness/refreshed"))]
    want_ref = [t for t in range(1, steps + 1) if t % n == 0]
    versions_ok = all(int(rec[t].get("staleness/sampler_version", -1)) == n * ((t - 1) // n) for t in logged)
    val_steps = [t for t in logged if any(k.startswith("val-core/") for k in rec[t])]
    return [
        Check(
            f"staleness sequence, N={n}{arm}",
            " ".join(map(str, seq)) or "none logged",
            "pass" if logged == list(range(1, steps + 1)) and seq == want else "fail",
            "(t-1) mod N: " + " ".join(map(str, want)),
        ),
        Check(
            f"sampler refreshed after steps{arm}",
            " ".join(map(str, refreshed)) or "none",
            "pass" if refreshed == want_ref and versions_ok else "fail",
            "multiples of N: " + " ".join(map(str, want_ref)) + "; sampler_version = N*floor((t-1)/N)",
        ),
        Check(
            f"validation between refreshes{arm}",
            " ".join(map(str, val_steps)) or "none",
            "pass"
            if val_steps == [t for t in range(1, steps + 1) if t % res.arm.val_every == 0 or t == steps]
            else "fail",
            f"every {res.arm.val_every} steps and the last, training then stale again",
        ),
    ]


def logprob_errors(tap_dir: Path, model: Path, *, tb: float, tl: float, max_seqs: int) -> dict[str, float]:
    """Step 1's recorded sampler (q) and learner (old) log-probs against log_softmax(z/T) for T = tb and tl,
    z from transformers on the initial model (fp32; on the GPU when there is one)."""
    import torch
    from transformers import AutoModelForCausalLM

    rec = torch.load(tap_dir / "step_1.pt")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="sdpa").to(device)
    lm.eval()
    errs: dict[str, list[torch.Tensor]] = {k: [] for k in ("q@Tb", "q@Tl", "old@Tl", "old@Tb")}
    n_tok = 0
    fields = ("prompts", "responses", "rollout_log_probs", "old_log_probs", "response_mask")
    triples = zip(*(rec[f] for f in fields), strict=True)
    for i, (prompt, response, q, old, mask) in enumerate(triples):
        if i >= max_seqs:
            break
        n = int(mask.bool().sum())
        resp = response[:n].to(device)
        ids = torch.cat([prompt.to(device), resp]).unsqueeze(0)
        with torch.no_grad():
            z = lm(input_ids=ids).logits[0].float()[len(prompt) - 1 : len(prompt) - 1 + n]
        lp = {t: torch.log_softmax(z / t, -1).gather(1, resp[:, None]).squeeze(1).cpu() for t in (tb, tl)}
        q, old = q[:n].float().cpu(), old[:n].float().cpu()
        errs["q@Tb"].append((q - lp[tb]).abs())
        errs["q@Tl"].append((q - lp[tl]).abs())
        errs["old@Tl"].append((old - lp[tl]).abs())
        errs["old@Tb"].append((old - lp[tb]).abs())
        n_tok += n
    out: dict[str, float] = {"tokens": float(n_tok)}
    for k, v in errs.items():
        cat = torch.cat(v) if v else torch.zeros(0)
        out[f"{k} mean"] = float(cat.mean()) if len(cat) else float("nan")
        out[f"{k} max"] = float(cat.max()) if len(cat) else float("nan")
    return out


def logprob_checks(err: dict[str, float], platform: str) -> list[Check]:
    stat, tol = LOGPROB_TOL[platform]
    checks = []
    for label, right, wrong in (
        ("sampler log-probs = log_softmax(z/Tb)", "q@Tb", "q@Tl"),
        ("learner old log-probs = log_softmax(z/Tl)", "old@Tl", "old@Tb"),
    ):
        e, other = err[f"{right} {stat}"], err[f"{wrong} mean"]
        ok = err["tokens"] > 0 and e <= tol and err[f"{right} mean"] <= 0.5 * other
        checks.append(
            Check(
                label,
                f"{stat} abs err {e:.2e} over {int(err['tokens'])} tokens (other T: mean {other:.2e})",
                "pass" if ok else "fail",
                f"{stat} <= {tol:g}; mean <= half the other T's",
            )
        )
    return checks


def sampler_state_checks(res: ArmResult, world: World, platform: str, max_seqs: int) -> tuple[list[Check], list | None]:
    """What the engine held at every step, through its recorded log-probs (``sampler_check``): each step
    equals its version's snapshot at Tb (the platform's log-prob tolerance), steps right after a wake on
    kept weights, after a stale validation (the stale sampler pushed back) and after a refresh included;
    and the check tells versions apart (each step at most half as far from its own as from the
    neighbouring version), which a model that learns nothing (random weights) cannot show."""
    from coolsampler.testkit.sampler_check import check_sampler_state

    name = f"sampler holds its snapshot at every step ({res.arm.name})"
    tap = res.dir / "tap" if res.dir else None
    if tap is None or not tap.exists() or res.error:
        return [Check(name, "no tap record" if not res.error else f"run failed: {res.error}", "fail")], None
    temps = {t: float(r["sampler/temperature"]) for t, r in res.records.items() if "sampler/temperature" in r}
    try:
        states = check_sampler_state(tap, world.model, temps, max_seqs=max_seqs, learner_temperature=TL)
    except (FileNotFoundError, ValueError) as err:
        return [Check(name, str(err), "fail")], None
    stat, tol = LOGPROB_TOL[platform]
    worst = max(states, key=lambda x: x.max_err if stat == "max" else x.mean_err)
    err = worst.max_err if stat == "max" else worst.mean_err
    val = {t for t, r in res.records.items() if any(k.startswith("val-core/") for k in r)}
    after_val = [x.step for x in states if x.step - 1 in val]
    ok = bool(states) and all((x.max_err if stat == "max" else x.mean_err) <= tol for x in states)
    ok = ok and [x.step for x in states] == list(range(1, res.arm.steps + 1))
    rows = [
        Check(
            name,
            f"steps {states[0].step}-{states[-1].step} (after a stale validation: {after_val or 'none'}); "
            f"worst {stat} abs err {err:.2e} at step {worst.step} (version {worst.version})",
            "pass" if ok else "fail",
            f"{stat} <= {tol:g} at every step, against snapshot version N*floor((t-1)/N)",
        )
    ]
    told = [x for x in states if x.other_mean_err is not None]
    ratio = max((x.mean_err / x.other_mean_err for x in told if x.other_mean_err), default=float("nan"))
    apart = bool(told) and all(x.other_mean_err and x.mean_err <= 0.5 * x.other_mean_err for x in told)
    rows.append(
        Check(
            f"sampler versions told apart ({res.arm.name})",
            f"own / neighbouring version's mean error: at most {ratio:.2g} over {len(told)} steps",
            ("pass" if apart else "fail") if world.kind != "random" else "info",
            "<= 0.5" + (" (not judged: random weights learn nothing)" if world.kind == "random" else ""),
        )
    )
    return rows, states


def kl_cycle_checks(res: ArmResult, world: World, states: list | None, n: int = N_STALE) -> list[Check]:
    """The learner-sampler KL resets at each refresh and grows within each cycle: the sampler really went
    stale between refreshes and really was refreshed. Read as the learner's drift from the sampler's
    snapshot, both at the learner temperature (``StepState.drift_k3``): verl's logged KL also holds the
    constant that Tb != Tl adds, which hides a small drift; it is printed beside."""
    name = f"KL resets at each refresh and grows within a cycle ({res.arm.name})"
    drift = {x.step: x.drift_k3 for x in states or [] if x.drift_k3 == x.drift_k3}
    steps = res.arm.steps
    resets = [(r, drift.get(r), drift.get(r + 1)) for r in range(n, steps, n)]
    cycles = [(a, min(a + n - 1, steps)) for a in range(1, steps + 1, n) if min(a + n - 1, steps) > a]
    grows = [(a, b, drift.get(a), drift.get(b)) for a, b in cycles]
    ok = bool(drift) and all(x is not None and y is not None and y < x for _, x, y in resets)
    ok = ok and all(x is not None and y is not None and y > x for _, _, x, y in grows)
    logged = {t: r.get("rollout_corr/k3_kl") for t, r in res.records.items() if t > 0}
    value = ", ".join(f"{t}: {drift[t]:.1e}" for t in sorted(drift)) or "no tap record"
    value += "; verl's rollout_corr/k3_kl: " + ", ".join(f"{t}: {v:.1e}" for t, v in sorted(logged.items()) if v)
    return [
        Check(
            name,
            f"learner vs snapshot k3 at Tl by step: {value}",
            ("pass" if ok else "fail") if world.kind != "random" else "info",
            "falls after each refresh, rises from a cycle's first step to its last"
            + (" (not judged: random weights learn nothing)" if world.kind == "random" else ""),
        )
    ]


def median_step(res: ArmResult, key: str = "timing_s/step") -> float | None:
    vals = [res.records[t][key] for t in sorted(res.records) if t > WARMUP_STEPS and key in res.records[t]]
    return statistics.median(vals) if vals else None


def _judge_ratio(r: float, limit: float | None) -> tuple[str, str]:
    """(status, limit text) of a step-time ratio: judged where the platform sets a limit, else printed."""
    if limit is None:
        return "info", "not judged on this platform (shared CPU cores); judged on gpu"
    return ("pass" if r <= limit else "fail"), f"<= {limit}"


def timing_checks(results: dict[str, ArmResult], platform: str) -> list[Check]:
    lim = TIME_LIMITS[platform] or {}
    med = {k: median_step(r) for k, r in results.items()}
    sync = {k: median_step(r, "timing_s/update_weights") for k, r in results.items()}
    rows = [
        Check(
            f"median step time {k}",
            f"{v:.3f} s" if v else "n/a",
            "info" if v else "fail",
            f"steps {WARMUP_STEPS + 1}..{results[k].arm.steps}; weight sync "
            + (f"{sync[k] * 1000:.0f} ms" if sync[k] is not None else "n/a"),
        )
        for k, v in med.items()
    ]
    if med.get("N=8") and med.get("N=1"):
        r = med["N=8"] / med["N=1"]
        rows.append(Check("step time N=8 / N=1", f"{r:.3f}", *_judge_ratio(r, lim.get("n8_over_n1"))))
    if med.get("N=1") and med.get("unpatched"):
        r = med["N=1"] / med["unpatched"]
        rows.append(
            Check("step time N=1 patched / unpatched", f"{r:.3f}", *_judge_ratio(r, lim.get("n1_over_upstream")))
        )
        up = results["unpatched"].records
        really = bool(up) and not any("staleness/staleness" in m for m in up.values())
        rows.append(
            Check(
                "unpatched arm ran upstream verl",
                "no staleness/* metrics" if really else "patched metrics",
                "pass" if really else "fail",
                "the gate's metrics absent",
            )
        )
    return rows


def memory_checks(results: dict[str, ArmResult], platform: str) -> list[Check]:
    plat = get_platform(platform)
    host = max((r.host_mb for r in results.values()), default=0.0)
    per_arm = ", ".join(f"{k} {r.host_mb / 1024:.1f}" for k, r in results.items())
    rows = [
        Check(
            "peak host memory (PSS of the run's session)",
            f"{host / 1024:.2f} GiB ({per_arm})",
            "pass" if 0 < host <= plat.mem_mb else "fail",
            f"<= the platform's mem_mb ({plat.mem_mb} MB)",
        )
    ]
    gpu = [r.gpu_mb for r in results.values() if r.gpu_mb is not None]
    total = max((r.gpu_total_mb or 0 for r in results.values()), default=0)
    if platform == "gpu":
        peak = max(gpu) if gpu else None
        rows.append(
            Check(
                "peak GPU memory (nvidia-smi, busiest GPU)",
                f"{peak / 1024:.1f} of {total / 1024:.0f} GiB" if peak else "not measured",
                "pass" if peak and peak <= 0.98 * total else "fail",
                "measured, below the GPU's memory",
            )
        )
    else:
        rows.append(Check("peak GPU memory", "no GPU (cpu platform)", "info"))
    return rows


# ---------------------------------------------------------------------------------------------------
# The whole check


@dataclass
class Options:
    platform: str = "gpu"
    out: Path = Path("results/acceptance")
    model: Path | None = None
    steps: int = 8
    timing_steps: int = 5
    quick: bool = False  # no unpatched arm
    response_length: int = 256
    budget_s: float = 570.0
    logprob_seqs: int = 32
    sft_steps: int = 100
    patches: Path = REPO / "patches" / "verl"


def arms(opt: Options, gpus: int = 0) -> list[Arm]:
    val = 3  # validation at step 3 falls between refreshes (4, 8): the sampler must go back to stale
    out = [Arm("staleness", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR)]
    if opt.platform == "gpu" and gpus >= 2:  # the sampler sharded over two GPUs (the 7B's TP size)
        out.append(Arm("staleness TP=2", N_STALE, opt.steps, val, tap=True, lr=STALENESS_LR, tp=2))
    out += [Arm("N=1", 1, opt.timing_steps, 0), Arm("N=8", 8, opt.timing_steps, 0)]
    if not opt.quick:
        out.append(Arm("unpatched", 1, opt.timing_steps, 0, upstream=True))
    return out


def run_acceptance(opt: Options, log: Callable[[str], None] = say) -> dict[str, Any]:
    t0 = time.time()
    opt.out.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count() if opt.platform == "gpu" else 0
    if opt.platform == "gpu" and gpus == 0:
        log("WARNING: platform gpu but nvidia-smi sees no GPU")
    world = make_world(opt.platform, opt.out / "world", opt.model, sft_steps=opt.sft_steps)
    log(f"model: {world.label}")
    recipe = acceptance_recipe(opt.platform, opt.response_length)
    plan = arms(opt, gpus)
    upstream_tree = None
    if any(a.upstream for a in plan):
        upstream_tree = unpatched_verl(opt.out / "unpatched-verl", opt.patches)
        log(f"unpatched verl 0.9.1: {upstream_tree} (patches reverse-applied to the installed tree)")
    results: dict[str, ArmResult] = {}
    for arm in plan:
        left = opt.budget_s - (time.time() - t0) - (45 if arm.tap else 10)  # keep time for the log-prob check
        if left < 60:
            log(f"{arm.name}: not run, {left:.0f}s of the budget left")
            results[arm.name] = ArmResult(arm, error="not run: time budget spent")
            continue
        log(f"{arm.name}: N={arm.N}, {arm.steps} steps" + (" (unpatched verl)" if arm.upstream else ""))
        results[arm.name] = run_arm(
            arm,
            world,
            opt.out / "runs" / arm.name.replace("=", ""),
            platform=opt.platform,
            recipe=recipe,
            gpus=gpus,
            timeout_s=left,
            upstream_tree=upstream_tree,
        )
        r = results[arm.name]
        log(f"{arm.name}: {'done' if not r.error else 'FAILED'} in {r.wall_s:.0f}s")
    checks: list[Check] = []
    for name, r in results.items():
        if r.error:
            checks.append(Check(f"run {name}", r.error, "fail"))
    st = results["staleness"]
    checks += staleness_checks(st)
    tap = st.dir / "tap" if st.dir else None
    if tap is not None and (tap / "step_1.pt").exists():
        log("recomputing step 1's log-probs with transformers")
        err = logprob_errors(tap, world.model, tb=TB, tl=TL, max_seqs=opt.logprob_seqs)
        checks += logprob_checks(err, opt.platform)
    else:
        err = {}
        checks.append(Check("decoupled log-probs", "no tap record of step 1", "fail"))
    for r in results.values():
        if r.arm.tap:
            log(f"{r.arm.name}: recomputing every step's sampler log-probs from its snapshot")
            rows, states = sampler_state_checks(r, world, opt.platform, opt.logprob_seqs)
            checks += rows + kl_cycle_checks(r, world, states)
            if r.arm.name != "staleness":
                checks += staleness_checks(r)
    timed = {k: v for k, v in results.items() if not v.arm.tap}
    checks += timing_checks(timed, opt.platform)
    checks += memory_checks(results, opt.platform)
    if opt.quick:
        checks.append(Check("step time vs unpatched verl", "skipped (--quick)", "info"))
    summary = {
        "platform": opt.platform,
        "model": {"kind": world.kind, "label": world.label, "path": str(world.model)},
        "gpus": gpus,
        "recipe": recipe,
        "runs": {
            k: {
                "N": r.arm.N,
                "steps": r.arm.steps,
                "wall_s": round(r.wall_s, 1),
                "startup_s": None if r.startup_s is None else round(r.startup_s, 1),
                "host_peak_mb": round(r.host_mb),
                "gpu_peak_mb": r.gpu_mb,
                "error": r.error,
                "dir": str(r.dir),
            }
            for k, r in results.items()
        },
        "logprob_errors": err,
        "checks": [c.__dict__ for c in checks],
        "passed": all(c.status != "fail" for c in checks),
        "wall_s": round(time.time() - t0, 1),
    }
    write_summary(summary, opt.out)
    return summary


def summary_markdown(s: dict[str, Any]) -> str:
    lines = [
        f"# Acceptance ({s['platform']} platform): {'PASSED' if s['passed'] else 'FAILED'}",
        "",
        f"Model: {s['model']['label']}",
        "",
    ]
    if s["model"]["kind"] == "random":
        lines += ["**WARNING: no real model was available offline; the weights are random.**", ""]
    lines += [
        f"Wall time {s['wall_s']:.0f} s; GPUs {s['gpus']}.",
        "",
        "| check | value | limit | result |",
        "|---|---|---|---|",
    ]
    for c in s["checks"]:
        lines.append(f"| {c['name']} | {c['value']} | {c['limit']} | {c['status'].upper()} |")
    lines += [
        "",
        "| run | N | steps | wall s | start-up s | host peak MB | GPU peak MB | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, r in s["runs"].items():
        lines.append(
            f"| {k} | {r['N']} | {r['steps']} | {r['wall_s']} | {r['startup_s']} | {r['host_peak_mb']} "
            f"| {r['gpu_peak_mb']} | {r['error'] or ''} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(s: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(s, indent=1, default=str))
    (out / "summary.md").write_text(summary_markdown(s))


__all__ = ["Options", "QWEN25_MATH_15B", "find_model", "run_acceptance", "unpatched_verl"]

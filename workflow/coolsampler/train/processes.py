"""Every process one verl run starts, how many of each kind a run's overrides make, and the host
memory (PSS) each kind was measured to hold on the CPU stack.

Why: a run is not "an actor and a vLLM worker per GPU". verl's defaults start 8 agent-loop workers,
8 reward workers, 8 TransferQueue storage units, 8 DataLoader workers per loader, a vLLM HTTP server,
engine core and tensor-parallel workers per replica, and Ray's own daemons; each imports torch and
verl. The cpu platform turns most of those counts down to 1 (``CPU_SUBSTITUTIONS`` "process
counts"); the gpu platform keeps verl's defaults. ``process_counts`` reads the counts from a run's
overrides (verl's defaults where the overrides say nothing), and ``measured_pss`` is a table measured
on a real run (``coolsampler memory --measure``, written to ``pss_cpu.json`` beside this module), so
``coolsampler.train.memory.host_budget`` multiplies counts by measurements instead of guessing.

Measuring: a run started by ``coolsampler.train.launch.run_verl`` is a session of its own (the verl
driver's pid is the session id; Ray's daemons and workers and vLLM's processes stay in it).
``sample_session`` reads ``Pss:`` of ``/proc/<pid>/smaps_rollup`` of every member and sorts it into a
kind by its command line (Ray names its worker processes ``ray::<ActorClass>.<method>``); a process
of no known kind is kept under its own command line, never dropped. Light: no verl, torch or Ray.
"""

from __future__ import annotations

import datetime
import json
import os
import platform as _platform
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024**2
PSS_TABLE = Path(__file__).with_name("pss_cpu.json")

# verl 0.9.1's defaults (verl/trainer/config/_generated_ppo_trainer.yaml) for the keys that set how
# many processes a run starts; a test pins them to the installed verl's yaml.
VERL_DEFAULTS: dict[str, Any] = {
    "trainer.nnodes": 1,
    "trainer.n_gpus_per_node": 8,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "data.dataloader_num_workers": 8,
    "actor_rollout_ref.rollout.agent.num_workers": 8,
    "reward.num_workers": 8,
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": 8,
}
# Not in verl's yaml: the vLLM server passes distributed_executor_backend="mp" to vLLM unless
# engine_kwargs override it (verl/workers/rollout/vllm_rollout/vllm_async_server.py); "mp" runs each
# tensor-parallel rank in a worker process of its own beside the engine core.
EXECUTOR_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend"
VLLM_DEFAULT_EXECUTOR = "mp"

# Process kinds. Ray's daemons are counted as seen in the measured run: they do not follow overrides.
DRIVER = "verl driver (main_ppo)"
TASK_RUNNER = "TaskRunner (trainer)"
DATALOADER = "DataLoader worker"
ACTOR = "actor/ref worker (WorkerDict)"
SERVER = "vLLMHttpServer"
ENGINE_CORE = "vLLM engine core"
TP_WORKER = "vLLM TP worker"
AGENT = "AgentLoopWorker"
REWARD = "RewardLoopWorker"
STORAGE = "SimpleStorageUnit"
CONTROLLER = "TransferQueueController"
BALANCER = "GlobalRequestLoadBalancer"
RAY_PREFIX = "ray: "  # Ray's own daemons: "ray: gcs_server", "ray: raylet", ...

# Ray actor class (the word after "ray::") -> kind
_RAY_ACTORS = {
    "TaskRunner": TASK_RUNNER,
    "WorkerDict": ACTOR,
    "vLLMHttpServer": SERVER,
    "AgentLoopWorker": AGENT,
    "RewardLoopWorker": REWARD,
    "SimpleStorageUnit": STORAGE,
    "TransferQueueController": CONTROLLER,
    "GlobalRequestLoadBalancer": BALANCER,
}
# Ray's own processes that carry a "ray::" title: the agents, and workers Ray starts ahead of use
_RAY_TITLED = {
    "DashboardAgent": "dashboard agent",
    "RuntimeEnvAgent": "runtime env agent",
    "IDLE": "idle worker",
}
# a fragment of a Ray daemon's command line -> its kind (first match wins)
_RAY_DAEMONS = (
    ("ray-dashboard-", "dashboard module"),  # the dashboard's head modules, forked by its forkserver
    ("multiprocessing.forkserver", "dashboard forkserver"),
    ("multiprocessing.resource_tracker", "multiprocessing resource tracker"),
    ("dashboard/agent.py", "dashboard agent"),
    ("dashboard/dashboard.py", "dashboard"),
    ("runtime_env/agent/main.py", "runtime env agent"),
    ("log_monitor.py", "log monitor"),
    ("autoscaler/_private/monitor.py", "monitor"),
    ("ray_client_server", "client server"),
    # last: the agents' command lines name the raylet and the GCS too
    ("gcs_server", "gcs_server"),
    ("raylet", "raylet"),
)


def override_map(overrides: Mapping[str, Any] | Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (as ``verl_overrides`` returns them) or a mapping, keys without Hydra's
    ``+``, values as given."""
    pairs = overrides.items() if isinstance(overrides, Mapping) else (o.split("=", 1) for o in overrides)
    return {k.lstrip("+"): v for k, v in pairs}


def _int(o: Mapping[str, Any], key: str) -> int:
    return int(o.get(key, VERL_DEFAULTS[key]))


def process_counts(overrides: Mapping[str, Any] | Iterable[str]) -> dict[str, int]:
    """How many processes of each kind one node of the run holds at its busiest (Ray's daemons apart),
    from the run's overrides and verl's defaults. Each vLLM replica is an HTTP server actor and an
    engine-core process (verl starts the engine core apart on every platform; the measured CPU run
    has one), plus one worker per tensor-parallel rank under the "mp" executor.

    DataLoader workers count twice: verl builds a train and a validation ``StatefulDataLoader`` with
    ``data.dataloader_num_workers`` each (not persistent), and a validation in mid-epoch iterates the
    validation loader while the train loader's iterator, with its workers, is alive."""
    o = override_map(overrides)
    gpus = _int(o, "trainer.n_gpus_per_node")  # per node; the budget is one node's
    tp = _int(o, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    replicas = max(1, gpus // tp)
    tp_processes = str(o.get(EXECUTOR_KEY, VLLM_DEFAULT_EXECUTOR)) == "mp"
    return {
        DRIVER: 1,
        TASK_RUNNER: 1,
        DATALOADER: 2 * _int(o, "data.dataloader_num_workers"),
        ACTOR: gpus,
        SERVER: replicas,
        ENGINE_CORE: replicas,
        TP_WORKER: replicas * tp if tp_processes else 0,
        AGENT: _int(o, "actor_rollout_ref.rollout.agent.num_workers"),
        REWARD: _int(o, "reward.num_workers"),
        STORAGE: _int(o, "transfer_queue.backend.SimpleStorage.num_data_storage_units"),
        CONTROLLER: 1,
        BALANCER: 1,
    }


def cuda_processes(counts: Mapping[str, int]) -> int:
    """Processes that open a CUDA context on the gpu platform: the FSDP actor workers and vLLM's
    tensor-parallel workers (the engine core and the HTTP server only schedule)."""
    return counts.get(ACTOR, 0) + counts.get(TP_WORKER, 0)


# ---------------------------------------------------------------------------------------------------
# measuring


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str


def classify(proc: Proc, by_pid: Mapping[int, Proc]) -> str:
    """The kind of ``proc`` from its command line (and its parent's, for forked children)."""
    cmd = proc.cmdline
    parent = by_pid.get(proc.ppid)
    if parent is not None and parent.cmdline == cmd and cmd.startswith("ray::"):
        # a fork of a Ray worker keeps its title: the TaskRunner's children are DataLoader workers
        kind = classify(parent, by_pid)
        return DATALOADER if kind == TASK_RUNNER else f"{kind} (fork)"
    if cmd.startswith("ray::"):
        # "ray::Class.method", or "ray::<actor name>:Class.method" for a named actor
        cls = cmd[5:].split(".", 1)[0].split(" ", 1)[0].rsplit(":", 1)[-1]
        if cls in _RAY_TITLED:
            return RAY_PREFIX + _RAY_TITLED[cls]
        # verl names some actors with a version suffix (TaskRunnerV1)
        known = next((k for k in _RAY_ACTORS if cls == k or (cls.startswith(k) and cls[len(k) :].isalnum())), None)
        return _RAY_ACTORS[known] if known else f"ray::{cls}"
    if cmd.startswith("VLLM::EngineCore"):
        return ENGINE_CORE
    if (
        "from multiprocessing.spawn import spawn_main" in cmd
        and parent is not None
        and "vLLMHttpServer" in parent.cmdline
    ):
        # vLLM spawns its engine core as a fresh interpreter, which names itself only once it runs:
        # the same process, counted under its later name
        return ENGINE_CORE
    if cmd.startswith("VLLM::Worker"):
        return TP_WORKER
    if "verl.trainer.main_ppo" in cmd:
        return DRIVER
    for fragment, name in _RAY_DAEMONS:
        if fragment in cmd:
            return RAY_PREFIX + name
    return "other: " + cmd[:80]


def read_procs(pids: Iterable[int]) -> list[Proc]:
    """Each process of ``pids`` still there: its parent and command line, read from /proc."""
    out = []
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.append(Proc(pid, ppid, raw.replace(b"\0", b" ").decode(errors="replace").strip()))
    return out


def pss_kib(pid: int) -> int | None:
    """``Pss:`` of ``/proc/<pid>/smaps_rollup`` (kB): the process's private pages plus its share of
    every page it shares, so that summing PSS over processes counts shared libraries once."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def sample_session(members: Iterable[int]) -> dict[str, list[float]]:
    """One sample: every member's PSS (MiB), by kind."""
    procs = read_procs(members)
    by_pid = {p.pid: p for p in procs}
    out: dict[str, list[float]] = {}
    for p in procs:
        kib = pss_kib(p.pid)
        if kib is not None and p.cmdline:  # kernel threads and exited processes have neither
            out.setdefault(classify(p, by_pid), []).append(kib / 1024)
    return out


def measure(
    members: Callable[[], list[int]],
    *,
    interval_s: float = 2.0,
    until: Callable[[], bool],
    say: Callable[[str], None] = lambda s: None,
) -> dict[str, dict[str, float]]:
    """Sample ``members()`` every ``interval_s`` until ``until()`` or no member is left; per kind the
    largest count seen at once and the largest PSS of one process of it (MiB)."""
    kinds: dict[str, dict[str, float]] = {}
    samples = 0
    while not until():
        pids = members()
        if not pids:
            break
        sample = sample_session(pids)
        samples += 1
        for kind, values in sample.items():
            row = kinds.setdefault(kind, {"count_seen": 0, "pss_mib": 0.0})
            row["count_seen"] = max(row["count_seen"], len(values))
            row["pss_mib"] = max(row["pss_mib"], max(values))
        say(f"sample {samples}: {len(pids)} processes, {sum(sum(v) for v in sample.values()):.0f} MiB PSS")
        time.sleep(interval_s)
    return {
        k: {"count_seen": int(v["count_seen"]), "pss_mib": round(v["pss_mib"], 1)} for k, v in sorted(kinds.items())
    }


def table_document(kinds: Mapping[str, Mapping[str, float]], *, how: str, interval_s: float) -> dict[str, Any]:
    """The file ``measured_pss`` reads: the table with how, when and where it was measured."""
    return {
        "how": how,
        "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{_platform.machine()}, {os.cpu_count()} cores, Linux {_platform.release()}",
        "interval_s": interval_s,
        "kinds": {k: dict(v) for k, v in kinds.items()},
    }


def measured_pss(path: Path = PSS_TABLE) -> dict[str, Any]:
    """The measured table (``pss_cpu.json``): ``kinds`` maps each kind to ``count_seen`` and
    ``pss_mib`` (the largest PSS of one process of that kind over the run)."""
    return json.loads(path.read_text())

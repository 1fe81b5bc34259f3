"""Training inside the project's image: the container settings of a study and the command prefix.

A GPU run must use exactly the torch/vLLM/verl stack the image was built with, not whatever the
submitting host has; so rule ``train`` prepends ``apptainer exec --nv <sif>`` or
``docker run --gpus ... <image id>`` to verl's command (``coolsampler.train.launch.run_verl(prefix=...)``),
and each run's ``run.yaml`` records the image digest it was trained with.

Design choices, each for a reason:

* The digest, not the name. Docker runs the image *id* that rule ``image`` wrote to
  ``results/build/image.digest``; a re-tagged or rebuilt image cannot slip under a finished DAG.
* Secrets by name only. Docker gets ``-e WANDB_API_KEY`` (value read from the caller's environment);
  Apptainer inherits the host environment. No value of a secret is ever on a command line, in a
  log or in ``run.yaml``.
* Same paths inside and out. The working directory is bind-mounted at its own path, so the absolute
  data, model, run-directory and reward-function paths that ``verl_overrides`` writes are valid in
  the container unchanged.
* Nothing from the host's Python. Apptainer passes the host environment through, so the prefix
  empties ``PYTHONPATH`` and turns off user site-packages (``$HOME`` is mounted): the image's
  Python must see only the image's packages.

It also says what goes into the image: ``image_sources`` walks the imports of the code
verl runs (``coolsampler.worker.*`` and ``coolsampler.worker.rewards``, loaded by verl by name or path) with
``ast``, never by importing it, so rule ``image`` depends on every package file a training step can
execute and on nothing else: editing the analysis or plotting code does not rebuild the image (and
with it retrain every run). ``IMAGE_ATTENTION`` is the attention implementation the image supports.

The Apptainer argv (``apptainer exec`` here, ``apptainer build`` for rule ``image``) and the Apptainer
recipe, derived from the Dockerfile, are in ``coolsampler.train.apptainer``.

This module never imports verl and starts nothing itself except the short ``verl_version_in`` and
``remove_container`` calls.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from coolsampler.train.apptainer import exec_prefix
from coolsampler.train.code import PACKAGE, PACKAGE_DIR, imported_modules, module_files
from coolsampler.worker.env import RUN_TOKEN_ENV

ENGINES = ("none", "docker", "apptainer")
DEFAULT_DOCKER_IMAGE = "coolsampler:latest"
DEFAULT_SIF = "results/build/coolsampler.sif"

# Variables handed to the containerised verl by name (docker ``-e NAME``; apptainer inherits them).
# The first three are set by run_verl itself (RUN_TOKEN_ENV names the attempt's private weight-push
# socket directory, coolsampler.worker.weight_socket); the rest are the user's, read at run time.
PASS_ENV: tuple[str, ...] = (
    "VERL_FILE_LOGGER_PATH",
    "PYTHONUNBUFFERED",
    RUN_TOKEN_ENV,
    "WANDB_API_KEY",
    "WANDB_MODE",
    "WANDB_ENTITY",
    "WANDB_PROJECT",
    "WANDB_BASE_URL",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_HUB_OFFLINE",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "TRANSFORMERS_OFFLINE",
    "NCCL_DEBUG",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "RAY_DEDUP_LOGS",
)

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_NAME_RE = re.compile(r"[^a-zA-Z0-9_.-]+")


class ContainerError(RuntimeError):
    """A container setting or image that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class ContainerSpec:
    """The study's ``container:`` block: which engine runs training, and which image.

    ``image`` is the Docker tag rule ``image`` builds (``engine: docker``) or the path of the
    ``.sif`` file it builds (``engine: apptainer``).
    """

    engine: str = "none"
    image: str = ""

    @property
    def enabled(self) -> bool:
        return self.engine != "none"

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> ContainerSpec:
        """From the study config (``container: {engine: docker|apptainer|none, image: NAME}``)."""
        block = dict((config or {}).get("container") or {})
        engine = str(block.get("engine", "none"))
        if engine not in ENGINES:
            raise ContainerError(f"container.engine: {engine!r}; allowed: {', '.join(ENGINES)}")
        image = str(block.get("image") or {"docker": DEFAULT_DOCKER_IMAGE, "apptainer": DEFAULT_SIF}.get(engine, ""))
        if engine == "apptainer" and not image.endswith(".sif"):
            raise ContainerError(f"container.image: {image!r}; with engine apptainer it is the .sif to build")
        return cls(engine, image)

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def read_digest(path: str | Path) -> str:
    """The ``sha256:<64 hex>`` that rule ``image`` recorded; anything else is an error."""
    text = Path(path).read_text().strip()
    if not _DIGEST_RE.match(text):
        raise ContainerError(f"{path}: {text[:80]!r} is not an image digest (sha256:<64 hex>)")
    return text


def container_name(key: str, pid: int | None = None) -> str:
    """A Docker container name for one training attempt, so a killed client can be cleaned up."""
    return f"coolsampler-{_NAME_RE.sub('-', key)}-{os.getpid() if pid is None else pid}"[:128]


def docker_gpus(cuda_visible_devices: str | None) -> str:
    """``--gpus`` value: the devices the scheduler gave this job, else all of them.

    On a box with more GPUs than one run needs, a scheduler that sets CUDA_VISIBLE_DEVICES keeps
    two runs from sharing devices; without it every container would see every GPU.
    """
    devs = (cuda_visible_devices or "").strip()
    if not devs or devs.lower() == "all":
        return "all"
    return f'"device={devs}"'


def training_prefix(
    spec: ContainerSpec,
    digest: str,
    *,
    workdir: str | Path,
    binds: Sequence[str | Path] = (),
    env_names: Iterable[str] = PASS_ENV,
    extra_env: Mapping[str, str] | None = None,
    name: str | None = None,
    uid_gid: tuple[int, int] | None = None,
    cuda_visible_devices: str | None = None,
    hf_home: str | None = None,
) -> list[str]:
    """The argv that goes before ``python3 -m verl.trainer.main_ppo ...`` to run it in the image.

    ``digest`` is what rule ``image`` recorded: Docker runs that image id; for Apptainer it is the
    sha256 of ``spec.image`` and only recorded (the .sif path is what runs). ``extra_env`` holds
    non-secret values (e.g. the CPU stack's settings) that must be set inside; ``env_names`` are
    forwarded by name only.
    """
    workdir = str(Path(workdir).resolve())
    mounts = [workdir, *(str(Path(b).resolve()) for b in binds)]
    names = list(dict.fromkeys([*env_names, *(extra_env or {})]))
    if spec.engine == "docker":
        uid, gid = uid_gid if uid_gid is not None else (os.getuid(), os.getgid())
        cmd = ["docker", "run", "--rm", "--init"]
        if name:
            cmd += ["--name", name]
        cmd += ["--gpus", docker_gpus(cuda_visible_devices)]
        cmd += ["--ipc=host"]  # NCCL and Ray's object store need more than docker's 64 MB /dev/shm
        cmd += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
        cmd += ["--user", f"{uid}:{gid}"]  # results stay owned by the user who ran Snakemake
        cmd += ["--workdir", workdir]
        cmd += ["-e", "HOME=/tmp"]  # the image's home belongs to its own user, not to --user's uid
        cmd += ["-e", f"HF_HOME={hf_home or workdir + '/.cache/huggingface'}"]
        for m in dict.fromkeys(mounts):
            cmd += ["-v", f"{m}:{m}"]
        if hf_home:
            cmd += ["-v", f"{hf_home}:{hf_home}"]
        for n in names:
            cmd += ["-e", n]  # by name: docker copies the value from its own environment
        return [*cmd, digest]
    if spec.engine == "apptainer":
        return exec_prefix(spec.image, workdir=workdir, binds=binds)
    raise ContainerError(f"no training prefix for engine {spec.engine!r}")


def verl_version_in(prefix: Sequence[str], *, timeout_s: float = 600) -> str:
    """The verl version installed in the image, read through the same prefix training will use."""
    probe = "import importlib.metadata as m; print(m.version('verl'))"
    try:
        res = subprocess.run([*prefix, "python3", "-c", probe], capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:  # e.g. a compute node without Apptainer: say so, not a traceback
        raise ContainerError(
            f"{prefix[0]} is not on PATH on {os.uname().nodename}: this training job runs in the image "
            f"(container.engine {prefix[0]}); install it there or set container.engine"
        ) from None
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-5:]
        raise ContainerError(f"cannot read verl's version in the image ({' '.join(prefix[:3])}): {tail}")
    return res.stdout.strip().splitlines()[-1]


def remove_container(spec: ContainerSpec, name: str | None) -> None:
    """Remove a training container whose ``docker run`` client was killed (the container outlives it).

    Apptainer needs nothing: its processes are children of the killed process group.
    """
    if spec.engine != "docker" or not name:
        return
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120, check=False)


# ------------------------------------------------------------------------------ what the image holds

# The attention implementation of the learner (FSDP actor and reference) in the image, as verl
# overrides. Decided, not left to verl's default, because the default cannot run in the image:
#
# * verl 0.9.1 defaults to flash_attention_2 (verl/workers/config/model.py:185,
#   ``override_config.get("attn_implementation", "flash_attention_2")``, handed to
#   ``AutoConfig.from_pretrained``), which transformers serves only from the ``flash_attn`` package.
#   install.sh installs ``verl[verl-core]``, which does not require it (only verl's ``fsdp`` and
#   ``megatron`` extras do, as ``flash-attn==2.8.3``); the vLLM 0.24.0 base image ships vLLM's own
#   bundled ``vllm.vllm_flash_attn``, not ``flash_attn``; and PyPI has no flash-attn wheel at all,
#   only the sdist (``pip download --only-binary=:all: flash-attn==2.8.3`` finds no distribution),
#   so flash-attn would mean a CUDA source build inside the image.
# * sdpa is torch's own kernel (flash / memory-efficient backends on CUDA): nothing to install.
# * With sdpa, ``use_remove_padding`` is False. True makes verl's FSDP engine feed the model
#   one packed row, ``attention_mask=None`` and position ids restarting at each sequence
#   (verl/workers/engine/fsdp/transformer_impl.py:1182-1272, "only pass input_ids and position_ids
#   to enable flash_attn_varlen"); its monkey patch replaces only flash-attention's
#   ``_flash_attention_forward`` (verl/models/transformers/monkey_patch.py:544-552). sdpa then
#   depends on transformers re-deriving a block-diagonal mask from the position ids
#   (masking_utils.find_packed_sequence_indices): correct (check_attention gives each sequence its
#   own logits that way too, with transformers 5.9.0 on CPU), but attention then runs over the whole
#   packed micro-batch (tokens^2 instead of sequences x length^2) with a tokens^2 mask, which rules
#   out sdpa's flash backend. False takes the
#   engine's padded path (transformer_impl.py:1274-1309: ``to_padded_tensor`` plus an explicit
#   attention mask from ``build_attention_mask_from_nested``), the path the CPU stack runs end to end
#   with the same verl and sdpa.
# containers/check_image.py instantiates Qwen2 with this implementation at image build time and
# checks that a padded batch gives each sequence's own logits.
IMAGE_ATTENTION: Final[dict[str, Any]] = {
    "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
    "actor_rollout_ref.model.use_remove_padding": False,
}

# Files of the repository that define the image besides the package code (install.sh runs
# check_image.py; image-lock.json pins what install.sh adds to the base image).
IMAGE_FILES: Final[tuple[str, ...]] = (
    "containers/install.sh",
    "containers/check_image.py",
    "containers/image-lock.json",
    "pyproject.toml",
)
_DEFINITION = {
    "docker": ("containers/Dockerfile", "containers/Dockerfile.dockerignore"),
    "apptainer": ("containers/coolsampler.def",),
}


def image_root_modules(package_dir: str | Path = PACKAGE_DIR) -> list[str]:
    """The package's modules that verl loads by name or path: the entry points of the image's code.

    Every module of ``coolsampler.worker``: the layering rule puts all code that runs inside verl's
    processes there (VERL_USE_EXTERNAL_MODULES, the vLLM worker extension, the patches' imports, the
    reward function verl loads by path).
    """
    worker = Path(package_dir) / "worker"
    modules = sorted(f"{PACKAGE}.worker.{p.stem}" for p in worker.glob("*.py") if p.stem != "__init__")
    return [f"{PACKAGE}.worker", *modules]


def image_module_files(roots: Iterable[str] | None = None, package_dir: str | Path = PACKAGE_DIR) -> dict[str, Path]:
    """Module name -> file of every package module the image's code reaches (``coolsampler.train.code``)."""
    return module_files(image_root_modules(package_dir) if roots is None else roots, package_dir)


def image_modules(roots: Iterable[str] | None = None, package_dir: str | Path = PACKAGE_DIR) -> list[str]:
    """The package's modules a training step can import (what check_image.py imports)."""
    return list(image_module_files(roots, package_dir))


def external_imports(roots: Iterable[str] | None = None, package_dir: str | Path = PACKAGE_DIR) -> list[str]:
    """Dotted names from other packages those modules import (``verl.trainer.ppo.core_algos``,
    ``verl.trainer.ppo.core_algos.agg_loss``, ``torch``, the standard library's too), lazy imports
    included: the image check imports each, so a package or name missing in the image fails its build."""
    out: set[str] = set()
    for name, path in image_module_files(roots, package_dir).items():
        for imp in imported_modules(path.read_text(), name, is_package=path.name == "__init__.py"):
            top = imp.split(".")[0]
            if top and top not in (PACKAGE, "__future__"):
                out.add(imp)
    return sorted(out)


def image_sources(repo: str | Path, engine: str | None = None, roots: Iterable[str] | None = None) -> list[str]:
    """Repository-relative files rule ``image`` depends on: the image definition for ``engine``
    (docker/apptainer; both when None), install.sh, check_image.py, the lock, pyproject.toml, and
    every package file the roots reach. Nothing else: not the analysis, figures or tables code."""
    repo = Path(repo).resolve()
    engines = [engine] if engine else list(_DEFINITION)
    unknown = [e for e in engines if e not in _DEFINITION]
    if unknown:
        raise ContainerError(f"no image definition for engine {unknown[0]!r}")
    files = [f for e in engines for f in _DEFINITION[e]] + list(IMAGE_FILES)
    package_dir = repo / "workflow" / PACKAGE
    files += [str(p.relative_to(repo)) for p in image_module_files(roots, package_dir).values()]
    return sorted(dict.fromkeys(files))

"""The body of rule ``train``: settings -> overrides -> verl under its guards -> JSONL.

Kept out of the Snakemake script so that it is importable and testable; never imports verl (the
check that the installed verl is the built wheel reads package metadata only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from coolsampler.spec.provenance import run_record
from coolsampler.spec.study import Run
from coolsampler.train.container import (  # training inside the image
    ContainerError,
    ContainerSpec,
    container_name,
    read_digest,
    remove_container,
    training_prefix,
    verl_version_in,
)
from coolsampler.train.launch import TrainingFailed, run_verl
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import get_platform
from coolsampler.train.version import installed_verl


def wheel_version(wheel: str | Path) -> str:
    """``verl-0.9.1+coolsampler.abc-py3-none-any.whl`` -> ``0.9.1+coolsampler.abc``."""
    return Path(wheel).name.split("-")[1]


def check_installed_verl(wheel: str | Path, prefix: list[str] | None = None) -> str:
    """The verl that will run must be the wheel this DAG built from patches/verl.

    With a container ``prefix`` the verl that runs is the image's, so it is asked there.
    """
    want = wheel_version(wheel)
    if prefix:
        try:
            have = verl_version_in(prefix)
        except ContainerError as e:
            raise TrainingFailed(str(e)) from None
        if have != want:
            raise TrainingFailed(
                f"the image has verl {have}, but the DAG built {want} from patches/verl: rebuild it "
                "(snakemake image; the rule reruns when the wheel changes)"
            )
        return have
    have = installed_verl() or "none"
    if have != want:
        raise TrainingFailed(
            f"installed verl is {have}, but the DAG built {want} from patches/verl: "
            f"install it (pip install --no-deps --force-reinstall {wheel}) or rerun workflow/tools/setup_env.sh"
        )
    return have


def check_gpus(prefix: list[str] | None = None) -> None:
    """The GPUs the job sees (in the image with a container ``prefix``) can train in bf16: one line if
    not, before any engine is built (``coolsampler.worker.gpu_check``)."""
    cmd = [*prefix, "python3"] if prefix else [sys.executable]
    res = subprocess.run([*cmd, "-m", "coolsampler.worker.gpu_check"], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        lines = (res.stdout or res.stderr).strip().splitlines()
        raise TrainingFailed(lines[-1] if lines else f"the GPU check exited with code {res.returncode}")


def train(
    run: Run,
    paths: RunPaths,
    *,
    wheel: str,
    platform: str,
    recipe: dict[str, Any],
    study: str,
    settings_out: Path,
    jsonl: Path,
    log: Path,
    timeout_min: float,
    stall_min: float,
    stall_retries: int = 1,
    container: ContainerSpec | None = None,
    image_digest: str | None = None,
    training_key: Mapping[str, Any] | None = None,
) -> None:
    # the platform's environment: worker modules (the μ-GRPO loss) on every platform, CPU settings on cpu
    plat = get_platform(platform)
    env, needs_bf16 = plat.env(), plat.needs_bf16
    if getattr(run.model_info, "revision", None):  # prefetched on the submitting host: never reach the Hub
        env = {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # inside the image when the study says so; the prefix runs the recorded image digest
    prefix, name, probe, image = None, None, None, None
    if container is not None and container.enabled:
        if not image_digest:
            raise TrainingFailed(f"container.engine is {container.engine} but no image digest was given")
        name = container_name(run.key)
        kw = dict(
            workdir=Path.cwd(),
            extra_env=env,
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            hf_home=os.environ.get("HF_HOME"),
        )
        prefix = training_prefix(container, image_digest, name=name, **kw)
        probe = training_prefix(container, image_digest, **kw)
        image = {**container.as_dict(), "digest": image_digest}  # recorded in run.yaml
    verl_version = check_installed_verl(wheel, probe)
    if needs_bf16:
        check_gpus(probe)
    overrides = verl_overrides(run, paths, platform=platform, study_recipe=recipe, experiment=f"coolsampler-{study}")
    settings_out.parent.mkdir(parents=True, exist_ok=True)
    # Written when the run has finished: a killed job must leave no declared output behind, so that
    # rerunning Snakemake simply resumes it (from verl's checkpoint and the per-attempt logs).
    # the effective recipe (read back from these overrides), the repository commit and the package
    # versions (coolsampler.spec.provenance), and the training key that decides reruns (coolsampler.train.rerun)
    settings_text = yaml.safe_dump(
        run_record(
            study=study,
            settings=run.settings(),
            source=run.source,
            overrides=overrides,
            platform=platform,
            verl=verl_version,
            image=image,
            env=env,
            training_key=training_key,
        ),
        sort_keys=False,
    )
    t0 = time.time()

    def progress(msg: str) -> None:
        line = f"[coolsampler] {run.key}: {msg}"
        print(line, file=sys.stderr, flush=True)
        with log.open("a") as f:
            f.write(line + "\n")

    try:
        # A stalled attempt (the CPU stack can hang silently, e.g. in a weight push) is killed and
        # retried: from the last checkpoint when there is one (exactly, see patch 0004), else anew.
        for attempt in range(stall_retries + 1):
            try:
                prog = run_verl(
                    overrides,
                    jsonl=jsonl,
                    log=log,
                    total_steps=run.steps,
                    env=env,
                    timeout_s=timeout_min * 60,
                    stall_s=stall_min * 60,
                    # start-up (~1-2 min alone on 2 cores) stretches under load: give it twice the stall limit
                    startup_s=2 * stall_min * 60,
                    on_progress=progress,
                    prefix=prefix,
                )
                break
            except TrainingFailed as e:
                if not str(e).startswith("stalled") or attempt == stall_retries:
                    raise
                progress(f"attempt {attempt + 1} {str(e).splitlines()[0]}; retrying")
    finally:
        remove_container(container or ContainerSpec(), name)  # a killed docker client leaves its container behind
    first = (prog.first_step_at or time.time()) - t0
    progress(f"finished {run.steps} steps in {time.time() - t0:.0f}s (start-up {first:.0f}s)")
    settings_out.write_text(settings_text)


def train_from_snakemake(smk: Any) -> None:
    # SIGTERM (Snakemake cancelling, scancel, a preemption notice) must stop verl's whole session:
    # as an exception it unwinds through run_verl, whose `finally` kills the session by id.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    run: Run = smk.params.run
    paths: RunPaths = smk.params.paths  # coolsampler.train.paths.run_paths: absolute, as verl needs them
    log = Path(smk.log[0])  # appended to: a resumed run keeps the story of its earlier attempts
    try:
        train(
            run,
            paths,
            wheel=smk.input.wheel,
            platform=smk.params.platform,
            recipe=dict(smk.params.recipe),
            study=smk.params.study,
            settings_out=Path(smk.output.settings),
            jsonl=Path(smk.output.jsonl),
            log=log,
            timeout_min=float(smk.params.timeout_min),
            stall_min=float(smk.params.stall_min),
            stall_retries=int(smk.params.stall_retries),
            # rule train passes these only when container.engine is not none
            container=ContainerSpec(**smk.params.container) if smk.params.get("container") else None,
            image_digest=read_digest(smk.input.image) if smk.input.get("image") else None,
            training_key=smk.params.get("training_key"),  # coolsampler.train.rerun
        )
    except TrainingFailed as e:
        # the job's log says why (coolsampler status reads it): also failures before verl started
        with log.open("a") as f:
            f.write(f"[coolsampler] {run.key}: failed: {str(e).splitlines()[0]}\n")
        sys.exit(f"train {run.key} failed: {e}")

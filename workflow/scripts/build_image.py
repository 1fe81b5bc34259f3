#!/usr/bin/env python3
"""Build the training image and record its digest: the body of rule ``image``.

    python workflow/scripts/build_image.py --engine docker --image coolsampler:latest \
        --verl-version 0.9.1+coolsampler.<hash> --digest-out results/build/image.digest

Docker: ``docker build -f containers/Dockerfile`` from the repository root (BuildKit, so that
containers/Dockerfile.dockerignore limits the context), the image id from ``--iidfile``.
Apptainer: ``apptainer build`` of containers/coolsampler.def into the ``.sif`` (the argv from
``coolsampler.train.apptainer.build_command``), the digest is the sha256 of that file. That recipe is
derived from the Dockerfile (``coolsampler.train.apptainer``); a copy that is not what the Dockerfile
gives now is refused before anything is built.
Either way the digest file holds one line, ``sha256:<64 hex>``, which each
training job runs (docker) or records (apptainer) and writes into its run.yaml.

The wheel the image installs must already exist (rule verl_wheel); the build fails otherwise.
``COOLSAMPLER_BASE_IMAGE`` in the environment replaces the Dockerfile's pinned base (its ``BASE_IMAGE``
build argument): a stand-in built locally where Docker Hub is out of reach (workflow/tools/docker_bases.py).
``COOLSAMPLER_BUILD_NETWORK=host`` builds with the host's network (``--network host``): a Docker daemon
without a bridge network (``dockerd --bridge=none``) gives the build's pip none otherwise.
Apptainer as a user without root (a cluster's login node): the recipe's ``%post`` installs packages as
root, so the build is run with ``--fakeroot`` (an entry in /etc/subuid, or
Apptainer >= 1.1's root-mapped namespace with the ``fakeroot`` program); when that fails the error says
what to ask for, or where else to build (``FAKEROOT_HELP``). Standard library and coolsampler.train.apptainer
(whose staleness check needs spython, the ``apptainer`` extra) only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from coolsampler.train import apptainer

ROOT = Path(__file__).resolve().parents[2]
BASE_ENV = "COOLSAMPLER_BASE_IMAGE"
NETWORK_ENV = "COOLSAMPLER_BUILD_NETWORK"


class ImageBuildError(RuntimeError):
    pass


# What a user without root can do when ``apptainer build --fakeroot`` fails (docs/paper-study.md).
FAKEROOT_HELP = (
    "as a user without root the build needs fakeroot: ask an admin for `apptainer config fakeroot --add $USER`"
    " (an /etc/subuid entry), or install the `fakeroot` program (Apptainer >= 1.1 then maps root itself); or"
    " build the .sif where you are root (the same checkout: snakemake --cores 1 image with the study's container"
    " setting) and copy results/build/coolsampler.sif and results/build/image.digest here"
)


def build_command(
    engine: str, image: str, verl_version: str, *, iidfile: Path | None = None, root: Path = ROOT
) -> list[str]:
    """The build argv for ``engine`` (run from ``root``, the repository root)."""
    arg = f"VERL_VERSION={verl_version}"
    if engine == "docker":
        cmd = ["docker", "build", "-f", str(root / "containers" / "Dockerfile"), "--build-arg", arg, "-t", image]
        if os.environ.get(BASE_ENV):
            cmd += ["--build-arg", f"BASE_IMAGE={os.environ[BASE_ENV]}"]
        if os.environ.get(NETWORK_ENV):
            cmd += ["--network", os.environ[NETWORK_ENV]]
        if iidfile is not None:
            cmd += ["--iidfile", str(iidfile)]
        return [*cmd, str(root)]
    if engine == "apptainer":
        return apptainer.build_command(
            root / apptainer.RECIPE, image, {"VERL_VERSION": verl_version}, fakeroot=os.geteuid() != 0
        )
    raise ImageBuildError(f"engine {engine!r}: allowed docker, apptainer")


def buildkit_missing() -> str | None:
    """Why this docker client cannot build with BuildKit, or None. The build needs it: only BuildKit reads
    containers/Dockerfile.dockerignore, without which the whole repository (environments, results) is the
    build context. Docker clients before 23 carry BuildKit; later ones need the buildx plugin, which
    Debian 12 does not package (its docker.io client is 20.10)."""
    ver = subprocess.run(["docker", "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True)
    major = ver.stdout.strip().split(".")[0]
    if major.isdigit() and int(major) < 23:
        return None
    if subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0:
        return None
    where = shutil.which("docker")
    return (
        f"the docker client {where} (version {ver.stdout.strip() or '?'}) builds with BuildKit only through "
        "the buildx plugin, which is missing: install it, or put a client with BuildKit built in first on "
        "PATH (Debian's docker.io: /usr/bin/docker)"
    )


def recipe_stale(root: Path = ROOT) -> str | None:
    """Why containers/coolsampler.def is not the recipe the Dockerfile gives, or None: an image is built
    from the one definition, never from a copy left behind by an edit of the Dockerfile."""
    try:
        return apptainer.stale(root)
    except ImportError as e:
        return f"checking {apptainer.RECIPE} against {apptainer.DOCKERFILE} needs spython ({e}): pip install spython"
    except apptainer.RecipeError as e:
        return str(e)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def build(engine: str, image: str, verl_version: str, digest_out: Path, *, root: Path = ROOT) -> str:
    """Build the image, write its digest to ``digest_out`` and return it."""
    wheel = root / "results" / "build" / f"verl-{verl_version}-py3-none-any.whl"
    if not wheel.exists():
        raise ImageBuildError(f"{wheel} is missing: build it first (snakemake verl_wheel)")
    if shutil.which(engine) is None:
        raise ImageBuildError(f"{engine} is not on PATH; set container.engine to what this host has (or none)")
    if engine == "docker" and (why := buildkit_missing()):
        raise ImageBuildError(why)
    if engine == "apptainer" and (why := recipe_stale(root)):
        raise ImageBuildError(why)
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        iid = Path(tmp) / "iid"
        if engine == "apptainer":
            image = str(Path(image).resolve())  # the build runs in root, the path is the caller's
            Path(image).parent.mkdir(parents=True, exist_ok=True)
        cmd = build_command(engine, image, verl_version, iidfile=iid, root=root)
        print("$ " + " ".join(cmd), flush=True)
        res = subprocess.run(cmd, cwd=root, env=env)
        if res.returncode != 0:
            hint = f"; {FAKEROOT_HELP}" if engine == "apptainer" and os.geteuid() != 0 else ""
            raise ImageBuildError(f"{engine} build failed with exit code {res.returncode}{hint}")
        digest = iid.read_text().strip() if engine == "docker" else sha256_file(Path(image))
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise ImageBuildError(f"{engine} reported {digest!r}, not an image digest")
    digest_out.parent.mkdir(parents=True, exist_ok=True)
    digest_out.write_text(digest + "\n")
    return digest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, choices=["docker", "apptainer"])
    ap.add_argument("--image", required=True, help="docker tag, or the .sif path for apptainer")
    ap.add_argument("--verl-version", required=True, help="build_verl.py --print-version")
    ap.add_argument("--digest-out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        print(build(args.engine, args.image, args.verl_version, args.digest_out))
    except ImageBuildError as e:
        print(f"build_image: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Local base images, for building the project's images where no image registry can be reached.

    python workflow/tools/docker_bases.py debian                 # coolsampler-local/debian:bookworm
    python workflow/tools/docker_bases.py gpu-stand-in --python-prefix ~/.pyenv/versions/3.12.1
                                                                 # coolsampler-local/vllm-openai:v0.24.0

``debian``: a Debian 12 root filesystem written by ``mmdebstrap`` from the Debian mirror apt uses (the
packages the images need: CA certificates, the libraries a CPython build links, ``patch``), imported with
``docker import``. It is the base of the CPU image (containers/Dockerfile.cpu) and of the stand-in below.
Certificate authorities the host added (/usr/local/share/ca-certificates) are added to it, so that a build
reaches the package indexes the way the host does (e.g. through a TLS-inspecting proxy).

``gpu-stand-in``: containers/stand-in/vllm-openai.Dockerfile on that Debian, with the CPython 3.12 tree
given by ``--python-prefix`` (built against Debian 12's libraries, e.g. pyenv's) in its build context:
the stand-in for ``vllm/vllm-openai:v0.24.0`` that ``containers/Dockerfile`` takes through
``--build-arg BASE_IMAGE=coolsampler-local/vllm-openai:v0.24.0``. Several GB from PyPI (torch's CUDA wheels).

Builds use the host's network (``docker build --network=host``): a daemon started with ``--bridge=none``
gives a build no other. Standard library only; each step prints its command and how long it took.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_IMAGE = "coolsampler-local/debian:bookworm"
GPU_STAND_IN = "coolsampler-local/vllm-openai:v0.24.0"
# Debian packages of the base: certificates (pip over HTTPS), the shared libraries a CPython 3.12 build links
# (its ssl, ctypes, lzma, bz2, sqlite3, readline, curses, dbm, uuid modules), patch (setup_env.sh's verl
# patches), git (the provenance of a run records the commit).
DEBIAN_PACKAGES = (
    "ca-certificates",
    "libexpat1",
    "libssl3",
    "libffi8",
    "zlib1g",
    "libbz2-1.0",
    "liblzma5",
    "libsqlite3-0",
    "libreadline8",
    "libncursesw6",
    "libgdbm6",
    "libuuid1",
    "patch",
    "git",
)
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
# Parts of a CPython tree an image never runs
PYTHON_SKIP = ("test", "idlelib", "tkinter", "turtledemo", "__pycache__", "ensurepip")


def run(cmd: list[str], **kw) -> float:
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True, **kw)
    took = time.time() - t0
    print(f"({took:.0f}s)", flush=True)
    return took


def image_size(image: str) -> str:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", image], capture_output=True, text=True)
    return f"{int(out.stdout.strip()) / 1e9:.2f} GB" if out.returncode == 0 else "?"


def debian(tag: str = DEBIAN_IMAGE) -> None:
    # Certificate authorities this host added to its own trust store (a TLS-inspecting proxy's, a company's):
    # what lets this host reach the package indexes lets the images' builds reach them too.
    hooks = []
    local_cas = sorted(LOCAL_CAS.glob("*.crt"))
    if local_cas:
        hooks.append(f'--customize-hook=mkdir -p "$1{LOCAL_CAS}"')
        hooks += [f"--customize-hook=copy-in {ca} {LOCAL_CAS}" for ca in local_cas]
        hooks.append('--customize-hook=chroot "$1" update-ca-certificates')
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "rootfs.tar"
        cmd = ["mmdebstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", *hooks]
        run([*cmd, "bookworm", str(tar), *MIRRORS])
        run(["docker", "import", str(tar), tag])
    print(f"{tag}: {image_size(tag)}")


def gpu_stand_in(python_prefix: Path, tag: str = GPU_STAND_IN, debian_image: str = DEBIAN_IMAGE) -> None:
    version = subprocess.run(
        [str(python_prefix / "bin" / "python3"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if version != "3.12":
        sys.exit(f"docker_bases: {python_prefix} is Python {version}; the vLLM image's is 3.12")
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Path(tmp)
        shutil.copytree(python_prefix, ctx / "python", symlinks=True, ignore=shutil.ignore_patterns(*PYTHON_SKIP))
        dockerfile = ROOT / "containers" / "stand-in" / "vllm-openai.Dockerfile"
        cmd = ["docker", "build", "--network=host", "-f", str(dockerfile)]
        cmd += ["--build-arg", f"DEBIAN_IMAGE={debian_image}", "-t", tag, str(ctx)]
        # the classic builder: the context is this temporary folder (no .dockerignore to honour), and it
        # needs no buildx, which a Docker >= 23 client requires for BuildKit and Debian 12 does not package
        run(cmd, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    print(f"{tag}: {image_size(tag)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("debian", help=f"build {DEBIAN_IMAGE}")
    g = sub.add_parser("gpu-stand-in", help=f"build {GPU_STAND_IN} on {DEBIAN_IMAGE}")
    g.add_argument("--python-prefix", type=Path, required=True, help="a CPython 3.12 installation to copy in")
    args = ap.parse_args(argv)
    if args.what == "debian":
        debian()
    else:
        gpu_stand_in(args.python_prefix.expanduser().resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

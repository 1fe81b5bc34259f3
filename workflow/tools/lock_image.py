#!/usr/bin/env python3
"""Resolve the training image's Python packages once, with pip's resolver, into containers/image-lock.json.

    python workflow/tools/lock_image.py --python /path/to/python3.12   # needs PyPI, not Docker

Why: containers/install.sh adds the patched verl (``[verl-core]``), transformers and coolsampler
(``[workflow]``) to the vLLM base image. Left to pip on the day of a build, those loose requirements
resolve to whatever PyPI serves then, and a conflict with the base image shows up only in a built
image, if at all. Here one resolution of *everything* (the base pins vllm, torch; the pins of
install.sh; verl's and coolsampler's requirements) is computed on this machine and committed;
install.sh installs under it as a constraints file, and tests/train/test_containers.py checks offline
(``check_lock``) that it is complete, free of conflicts and in step with the pins, verl's
requirements and pyproject.toml.

The image's platform: CPython 3.12 on Linux x86-64 (the vllm/vllm-openai:v0.24.0 image). pip's
``--platform`` mode needs a wheel for every package and some of the graph is sdist-only, so the
resolver runs under a real CPython 3.12 on Linux x86-64 (``--python``, with a recent pip: pip 23.2
downloaded every wheel, GBs of CUDA libraries, where pip 26.3 reads most from PyPI's metadata
files; the lock records the pip version), with ``--dry-run --ignore-installed``: nothing is
installed; the marker environment it resolved for is recorded in the lock and is what
``check_lock`` evaluates markers with.

``check_lock`` needs ``packaging`` only; the rest is the standard library.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "containers" / "image-lock.json"
PIN_NAMES = {"vllm": "VLLM_VERSION", "torch": "TORCH_VERSION", "transformers": "TRANSFORMERS_VERSION"}
IMAGE_PYTHON = "3.12"
# --prefer-binary: the newest version with a wheel, an sdist only where no version has one (the
# graph has pure-Python sdist-only packages: connection-pool, pylatexenc, antlr4-python3-runtime
# under hydra-core). Without it pip took a fresh sdist-only release and compiled it (contourpy, a
# meson C++ build) just to read its metadata; with --only-binary=:all: it backtracked silently to
# hydra-core 0.11.3 rather than take antlr4's sdist.


class LockError(RuntimeError):
    pass


def image_pins(root: Path = ROOT) -> dict[str, str]:
    """vllm / torch / transformers versions the image definition pins (containers/Dockerfile ENV)."""
    text = (root / "containers" / "Dockerfile").read_text()
    env = dict(re.findall(r"\b([A-Z_]+_VERSION)=(\S+)", text))
    return {pkg: env[var] for pkg, var in PIN_NAMES.items()}


def project_requirements(root: Path = ROOT) -> list[str]:
    """coolsampler's requirements as install.sh installs it (``/opt/coolsampler/src[workflow]``)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["workflow"]]


def resolver_inputs(root: Path = ROOT, verl: str = "verl") -> list[str]:
    """What the resolver gets: the base pins, what install.sh installs, coolsampler's requirements.
    ``verl`` is the patched wheel's path when resolving, the plain name when recorded."""
    pins = image_pins(root)
    return [
        f"vllm=={pins['vllm']}",
        f"torch=={pins['torch']}",
        f"transformers=={pins['transformers']}",
        f"{verl}[verl-core]",
        *project_requirements(root),
    ]


def verl_wheel(root: Path = ROOT) -> Path:
    version = subprocess.run(
        [sys.executable, str(root / "workflow/scripts/build_verl.py"), "--print-version"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    wheel = root / "results" / "build" / f"verl-{version}-py3-none-any.whl"
    if not wheel.is_file():
        raise LockError(f"{wheel} missing: build it first (snakemake verl_wheel)")
    return wheel


def lock_from_report(report: dict[str, Any], inputs: list[str]) -> dict[str, Any]:
    """The lock: the resolver's inputs, its marker environment, and each package's version, extras
    and requirements (what ``check_lock`` needs to re-check the resolution without the network)."""
    packages = {}
    for item in report["install"]:
        meta = item["metadata"]
        name = canonical(meta["name"])
        packages[name] = {
            "version": meta["version"],
            "extras": sorted(canonical(e) for e in item.get("requested_extras") or []),
            "requires_dist": list(meta.get("requires_dist") or []),
        }
    env = report["environment"]
    _close_extras(packages, env)
    return {
        "generated_by": "workflow/tools/lock_image.py",
        "pip_version": report.get("pip_version"),
        "inputs": inputs,
        "environment": env,
        "packages": dict(sorted(packages.items())),
    }


def _close_extras(packages: dict[str, dict[str, Any]], env: dict[str, str]) -> None:
    """Add the extras other packages ask for (``ray[default]``, ``fastapi[standard]``, ...): pip's
    report lists only the extras requested on its command line."""
    from packaging.requirements import Requirement

    changed = True
    while changed:
        changed = False
        for pkg in packages.values():
            for line in pkg["requires_dist"]:
                req = Requirement(line)
                name = canonical(req.name)
                if not req.extras or name not in packages or not _active(req, pkg["extras"], env):
                    continue
                have = set(packages[name]["extras"])
                want = have | {canonical(e) for e in req.extras}
                if want != have:
                    packages[name]["extras"] = sorted(want)
                    changed = True


def _active(req: Any, extras: list[str], env: dict[str, str]) -> bool:
    """Does ``req`` apply to a package installed with ``extras``, in the marker environment ``env``?"""
    return req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in ["", *extras])


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_lock(lock: dict[str, Any], *, inputs: list[str], verl_requires: list[str] | None = None) -> list[str]:
    """Problems with a lock, offline: [] when it is a complete, conflict-free resolution of ``inputs``.

    Every input and every requirement of every locked package (markers evaluated in the lock's
    environment, each requested extra followed) must name a locked package whose version satisfies
    it and that carries the extras asked for; the environment must be the image's Python on Linux
    x86-64; ``verl_requires`` (the patched verl's Requires-Dist, when known) must equal the locked
    verl's.
    """
    from packaging.requirements import Requirement
    from packaging.version import Version

    problems: list[str] = []
    env = dict(lock["environment"])
    if not (env.get("python_version") == IMAGE_PYTHON and env.get("sys_platform") == "linux"):
        problems.append(f"resolved for {env.get('python_version')}/{env.get('sys_platform')}, not {IMAGE_PYTHON}/linux")
    if env.get("platform_machine") != "x86_64":
        problems.append(f"resolved for {env.get('platform_machine')}, not x86_64")
    if lock["inputs"] != inputs:
        problems.append(f"resolved for inputs {lock['inputs']}, now {inputs}: regenerate the lock")
    pkgs = lock["packages"]

    def need(req: Requirement, who: str) -> None:
        name = canonical(req.name)
        if name not in pkgs:
            problems.append(f"{who} requires {req}: {name} is not in the lock")
            return
        version = Version(pkgs[name]["version"])
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{who} requires {req}: the lock has {name} {version}")
        missing = {canonical(e) for e in req.extras} - set(pkgs[name]["extras"])
        if missing:
            problems.append(f"{who} requires {req}: {name} is locked without extras {sorted(missing)}")

    for spec in inputs:
        need(Requirement(spec), "input")
    for name, pkg in pkgs.items():
        for line in pkg["requires_dist"]:
            req = Requirement(line)
            if _active(req, pkg["extras"], env):
                need(req, f"{name} {pkg['version']}")
    if verl_requires is not None:
        if "verl" not in pkgs:
            problems.append("verl is not in the lock")
        elif sorted(pkgs["verl"]["requires_dist"]) != sorted(verl_requires):
            problems.append("the patched verl's requirements differ from the locked verl's: regenerate the lock")
    return problems


def resolve(python: str, root: Path = ROOT, keep_report: Path | None = None) -> dict[str, Any]:
    """Run pip's resolver under ``python`` (CPython 3.12, Linux x86-64) and return the lock
    (pip's own report is kept at ``keep_report`` when given)."""
    wheel = verl_wheel(root)
    with tempfile.TemporaryDirectory() as tmp:
        report = keep_report or Path(tmp) / "report.json"
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        cmd += ["--prefer-binary"]
        cmd += ["--report", str(report), *resolver_inputs(root, verl=str(wheel))]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise LockError(f"pip's resolver failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
        return lock_from_report(json.loads(report.read_text()), resolver_inputs(root))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default="python3.12", help="a CPython 3.12 on Linux x86-64 with pip")
    ap.add_argument("--out", type=Path, default=LOCK)
    ap.add_argument("--keep-report", type=Path, help="also keep pip's --report here")
    ap.add_argument("--from-report", type=Path, help="make the lock from this pip report; no resolver run")
    args = ap.parse_args(argv)
    try:
        if args.from_report:
            lock = lock_from_report(json.loads(args.from_report.read_text()), resolver_inputs())
        else:
            lock = resolve(args.python, keep_report=args.keep_report)
    except LockError as err:
        print(f"lock_image: {err}", file=sys.stderr)
        return 1
    problems = check_lock(lock, inputs=resolver_inputs())
    if problems:
        print("lock_image: the resolution does not check out:\n" + "\n".join(problems), file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(lock, indent=1, sort_keys=False) + "\n")
    print(f"lock_image: {len(lock['packages'])} packages -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

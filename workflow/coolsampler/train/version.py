"""``coolsampler --version``: the package version and the patched verl it trains with.

Why both: a run's results depend on the patches as much as on this package, and the wheel's local
version (``0.9.1+coolsampler.<patch hash>``) names them. Read from package metadata and from the
patches themselves (``workflow/scripts/build_verl.py``, the one place the hash is computed), never by
importing verl, so it works with the light core install.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]  # workflow/coolsampler/train/version.py -> the repository root


def package_version() -> str:
    """This package's version from its installed metadata, else pyproject.toml of the checkout."""
    try:
        return importlib.metadata.version("coolsampler")
    except importlib.metadata.PackageNotFoundError:
        import tomllib

        pyproject = REPO / "pyproject.toml"
        if pyproject.exists():
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        return "unknown"


def installed_verl() -> str | None:
    """The installed verl's version (metadata only: no import), or None when verl is not installed."""
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return None


def patched_verl() -> str | None:
    """The local version the DAG builds from ``patches/verl`` (as rule verl_wheel names the wheel), or
    None outside a checkout (no patches, or no build script beside the package)."""
    script, patches = REPO / "workflow" / "scripts" / "build_verl.py", REPO / "patches" / "verl"
    if not script.exists() or not patches.is_dir():
        return None
    spec = importlib.util.spec_from_file_location("coolsampler_build_verl", script)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # standard library only: the script runs before anything is installed
    return str(mod.local_version(sorted(patches.glob("*.patch"))))


def version_text() -> str:
    """One line per fact: the package, the verl the patches build, the verl installed (and whether they agree)."""
    lines = [f"coolsampler {package_version()}"]
    want, have = patched_verl(), installed_verl()
    if want:
        lines.append(f"patched verl (from patches/verl): {want}")
    if have is None:
        lines.append("installed verl: none (the light core install; training needs the patched wheel)")
    elif want and have != want:
        lines.append(f"installed verl: {have} (differs: rerun workflow/tools/setup_env.sh)")
    else:
        lines.append(f"installed verl: {have}")
    return "\n".join(lines)

"""The study, claims, hardware and profile files that ship with the package, found by name or by path.

Why: the documented commands name ``config/paper.yaml``, ``config/claims.yaml`` or a profile, and must
work from any directory and from a plain ``pip install .``, where there is no checkout beside the
package. The package carries these files as package data under ``shipped_files/``: in a checkout that
folder holds links to the repository's ``config/`` and ``profiles/`` (so there is one copy of each file),
in an installed wheel the files themselves. Either way ``ROOT`` is a directory laid out like the
repository root for these two folders.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "shipped_files"  # holds config/ and profiles/ as in the repository
CONFIG = ROOT / "config"
HARDWARE = CONFIG / "hardware"  # the overlays: one's own GPUs merged over a study (``--overlay``)
PROFILES = ROOT / "profiles"


def shipped_studies() -> list[str]:
    """The names of the shipped studies (``config/NAME.yaml`` files with runs), for messages and ``--study NAME``."""
    return sorted(p.stem for p in CONFIG.glob("*.yaml") if not p.stem.endswith("claims"))


def shipped_overlays() -> list[str]:
    """The names of the shipped overlays (``config/hardware/NAME.yaml``), for messages and ``--overlay NAME``."""
    return sorted(p.stem for p in HARDWARE.glob("*.yaml"))


class ShippedFileError(FileNotFoundError, argparse.ArgumentTypeError):
    """A study, claims or profile file found neither where the command runs nor among the shipped ones;
    argparse reports it as the option's error, and outside a parser it is a ``FileNotFoundError``."""


def find_config(value: str | Path) -> Path:
    """``value`` where it exists from the current directory; else the shipped file it names, as a path
    from the repository root (``config/paper.yaml``, ``profiles/slurm/config.v8+.yaml``) or as a bare
    study or claims name (``paper``, ``claims``, ``hardware/80gb``). A name that is neither raises
    ``ShippedFileError`` listing the shipped studies."""
    given = Path(value)
    if given.exists():
        return given
    candidates = [ROOT / given, CONFIG / given, CONFIG / f"{given}.yaml"] if not given.is_absolute() else []
    for path in candidates:
        if path.is_file():
            return path.resolve()  # in a checkout: the repository's own file, not the link's path
    raise ShippedFileError(
        f"no such file: {value} (here or among the shipped files; shipped studies: {', '.join(shipped_studies())})"
    )


def find_overlay(value: str | Path) -> Path:
    """An overlay (a file merged over a study, ``--overlay``): ``value`` where it exists from the current
    directory; else the shipped one it names, by path (``config/hardware/one-gpu.yaml``) or by name
    (``one-gpu``, ``hardware/one-gpu``). A name that is neither raises ``ShippedFileError`` listing the
    shipped overlays, the files ``--overlay`` takes (not the studies)."""
    given = Path(value)
    if given.exists():
        return given
    if not given.is_absolute():
        for path in (ROOT / given, CONFIG / given, CONFIG / f"{given}.yaml", HARDWARE / f"{given}.yaml"):
            if path.is_file():
                return path.resolve()
    raise ShippedFileError(
        f"no such overlay: {value} (here or among the shipped ones; shipped overlays:"
        f" {', '.join(shipped_overlays())}, in config/hardware/)"
    )


__all__ = [
    "CONFIG",
    "HARDWARE",
    "PROFILES",
    "ROOT",
    "ShippedFileError",
    "find_config",
    "find_overlay",
    "shipped_overlays",
    "shipped_studies",
]

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
import os
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


def is_name(value: str | Path) -> bool:
    """A bare name (``paper``, ``one-gpu``), not a path: no slash and no ``.yaml``/``.yml`` ending. A name
    means the shipped file first, so a folder or file called ``paper`` where the command runs (a results
    or checkout directory often has one) does not shadow ``--study paper``; a path means the file here."""
    text = str(value)
    return "/" not in text and os.sep not in text and not text.lower().endswith((".yaml", ".yml"))


def _shipped(candidates: list[Path]) -> Path | None:
    # resolved: in a checkout, the repository's own file, not the link's path
    return next((path.resolve() for path in candidates if path.is_file()), None)


def find_config(value: str | Path) -> Path:
    """A bare name (``paper``, ``claims``; ``is_name``): the shipped study or claims file of that name
    first, else a file of that name here. A path: the file here where it exists, else the shipped file
    it names from the repository root (``config/paper.yaml``, ``profiles/slurm/config.v8+.yaml``,
    ``hardware/80gb``). Neither raises ``ShippedFileError`` listing the shipped studies. A directory
    found here is returned as it is: reading it is refused in one line (``spec.yaml_file``)."""
    given = Path(value)
    candidates = [ROOT / given, CONFIG / given, CONFIG / f"{given}.yaml"] if not given.is_absolute() else []
    if is_name(value) and (found := _shipped([CONFIG / f"{given}.yaml"])) is not None:
        return found
    if given.exists():
        return given
    if (found := _shipped(candidates)) is not None:
        return found
    raise ShippedFileError(
        f"no such file: {value} (here or among the shipped files; shipped studies: {', '.join(shipped_studies())})"
    )


def find_overlay(value: str | Path) -> Path:
    """An overlay (a file merged over a study, ``--overlay``), as ``find_config`` finds a study: a bare
    name (``one-gpu``) is the shipped overlay first, else a file of that name here; a path is the file
    here, else the shipped one it names (``config/hardware/one-gpu.yaml``, ``hardware/one-gpu``). Neither
    raises ``ShippedFileError`` listing the shipped overlays, the files ``--overlay`` takes (not the studies)."""
    given = Path(value)
    candidates = [ROOT / given, CONFIG / given, CONFIG / f"{given}.yaml", HARDWARE / f"{given}.yaml"]
    if is_name(value) and (found := _shipped([HARDWARE / f"{given}.yaml"])) is not None:
        return found
    if given.exists():
        return given
    if not given.is_absolute() and (found := _shipped(candidates)) is not None:
        return found
    raise ShippedFileError(
        f"no such overlay: {value} (here or among the shipped ones; shipped overlays:"
        f" {', '.join(shipped_overlays())}, in config/hardware/)"
    )

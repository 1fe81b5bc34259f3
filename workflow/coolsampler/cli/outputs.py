"""Output flags (``--out``, ``--figure``) checked before a command reads anything.

Why first: a command that writes at the end (analyze's tables and figure, parse's metrics table, the
claims report) used to find out only then that its output could not be written, and printed a
traceback under a report the user had waited for; a bad figure format was refused after the tables were
already written. So every command calls ``check_outputs`` right after its arguments are parsed, and a
bad output is one ``InputError`` line (``coolsampler <cmd>: <path>: --flag ...``) before any work.

The rules, the same for every command: a file output has an allowed suffix (its format) and is not a
directory; an existing file there is overwritten, as is the convention, a directory never is. A
directory output is not a file. Folders missing on the way are made by the writer, as before, so the
check is that the nearest existing one is a directory this process can create files in: tried for
real, since root passes every permission test yet cannot write under ``/proc``, ``/sys`` or a
read-only mount, and nothing can be made under a path that is a file (``/etc/passwd/x``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coolsampler.spec.inputs import InputError


@dataclass(frozen=True)
class Output:
    """What one output flag names: ``flag`` as the user typed it; ``directory``: a folder the command
    fills (else one file); ``suffixes``: a file's allowed formats (lower case, with the dot; empty: any)."""

    flag: str
    directory: bool = False
    suffixes: tuple[str, ...] = ()


def _writable_dir(d: Path) -> bool:
    """A file can be created in ``d`` (and is removed at once)."""
    try:
        with tempfile.TemporaryFile(dir=d):
            return True
    except OSError:
        return False


def _nearest_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        if os.path.lexists(p):
            return p
    return Path(".")


def check_output(value: str | os.PathLike[str] | None, out: Output) -> None:
    """Raise ``InputError`` naming ``value`` if ``out`` cannot be written there (module docstring);
    ``None`` (the flag not given) passes."""
    if value is None:
        return
    text = os.fspath(value)
    if text == "":
        raise InputError("''", f"{out.flag} names no file; {_wanted(out)}")
    path = Path(text)
    if not out.directory and out.suffixes and path.suffix.lower() not in out.suffixes:
        suffix = path.suffix or "(none)"
        raise InputError(path, f"{out.flag}: unknown format {suffix}; name {_wanted(out)} (the format is the suffix)")
    if path.is_dir() and not out.directory:
        raise InputError(path, f"{out.flag} names a directory; it takes {_wanted(out)}, and never overwrites one")
    if path.exists() and not path.is_dir() and out.directory:
        raise InputError(path, f"{out.flag} names a file, not a directory; it takes a directory to write into")
    base = _nearest_existing(path)
    if path.exists() and not path.is_dir():  # an existing file: overwritten, if this process may
        if not os.access(path, os.W_OK):
            raise InputError(path, f"{out.flag}: the file is not writable")
        return
    if not base.is_dir():
        raise InputError(path, f"{out.flag}: {base} is a file, not a directory: nothing can be written under it")
    if not _writable_dir(base):
        raise InputError(path, f"{out.flag}: {base} is not writable: nothing can be written there")


def check_outputs(*outputs: tuple[str | os.PathLike[str] | None, Output]) -> None:
    """Every ``(value, Output)`` a command was given, checked in order (``check_output``). The one call a
    command makes right after parsing its arguments, before it reads anything."""
    for value, out in outputs:
        check_output(value, out)


def _wanted(out: Output) -> str:
    if out.directory:
        return "a directory"
    if not out.suffixes:
        return "a file"
    names = list(out.suffixes)
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"
    return f"a {listed} file"

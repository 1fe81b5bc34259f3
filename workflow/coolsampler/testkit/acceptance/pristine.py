"""Upstream verl 0.9.1 for the timing comparison: the installed patched tree with every patch reverse-applied,
in pure Python (an image need not have GNU patch)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path


def parse_patch(text: str) -> list[tuple[str, list[tuple[list[str], list[str]]]]]:
    """A unified diff as [(path, [(old lines, new lines), ...])] (paths without the a/ b/ prefix)."""
    files: list[tuple[str, list[tuple[list[str], list[str]]]]] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if lines[i].startswith("+++ "):
            path = lines[i][4:].split("\t")[0].strip().split("/", 1)[1]
            files.append((path, []))
        elif lines[i].startswith("@@ ") and files:
            m = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
            n_old, n_new = int(m[1] or 1), int(m[2] or 1)
            old: list[str] = []
            new: list[str] = []
            i += 1
            while (len(old) < n_old or len(new) < n_new) and i < len(lines):
                line = lines[i]
                tag, body = line[:1], line[1:]
                if tag in (" ", "\n"):
                    body = body if tag == " " else "\n"
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                    target = new if tag == "+" else old if tag == "-" else None
                    for lst in [target] if target is not None else [old, new]:
                        lst[-1] = lst[-1].rstrip("\n")
                    i += 1
            files[-1][1].append((old, new))
            continue
        i += 1
    return files


def reverse_patch(tree: Path, patch: Path) -> None:
    """Undo ``patch`` in ``tree``: each hunk's new text must occur exactly once and becomes its old text.
    Pure Python (an image need not have GNU patch); raises naming the file and hunk that does not match."""
    for path, hunks in parse_patch(patch.read_text()):
        f = tree / path
        text = f.read_text()
        for k, (old, new) in enumerate(hunks, 1):
            new_s, old_s = "".join(new), "".join(old)
            if text.count(new_s) != 1:
                raise RuntimeError(f"{patch.name}: hunk {k} of {path} is not in the installed verl exactly once")
            text = text.replace(new_s, old_s, 1)
        f.write_text(text)


def unpatched_verl(dest: Path, patches_dir: Path) -> Path:
    """A copy of the installed (patched) verl with every patch reverse-applied, newest first: upstream verl
    0.9.1, to put first on PYTHONPATH. Offline, and from exactly the tree that the patched runs use."""
    import importlib.util

    spec = importlib.util.find_spec("verl")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("verl is not installed")
    src = Path(next(iter(spec.submodule_search_locations)))
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    for p in sorted(patches_dir.glob("*.patch"), reverse=True):
        reverse_patch(dest, p)
    (dest / "verl" / "version" / "version").write_text("0.9.1\n")
    (dest / "verl" / "coolsampler_patches.txt").unlink(missing_ok=True)
    return dest

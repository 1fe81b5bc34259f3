"""CITATION.cff names the software as the package does: its version and license are pyproject.toml's, and
the paper it points to is the one the README's BibTeX entry cites."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_the_citation_file_agrees_with_the_package_and_the_readme() -> None:
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    for key in ("cff-version", "message", "title", "authors", "type", "preferred-citation"):  # CFF 1.2.0's core
        assert cff.get(key), key
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert cff["type"] == "software"
    assert str(cff["version"]) == project["version"] and cff["license"] == project["license"]
    eprint = re.search(r"eprint\s*=\s*\{([\d.]+)\}", (REPO / "README.md").read_text())[1]
    ids = [i["value"] for i in cff["preferred-citation"]["identifiers"]]
    assert f"arXiv:{eprint}" in ids and eprint in cff["preferred-citation"]["url"]
    title = re.search(r"title\s*=\s*\{(.*?)\},", (REPO / "README.md").read_text(), flags=re.S)[1]
    assert " ".join(title.split()) == cff["preferred-citation"]["title"]

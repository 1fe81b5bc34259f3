"""The manual's generated parts (workflow/tools/generate_docs.py): the study and claims reference pages
from their schemas, the memory budget from ``coolsampler memory``; the committed pages are what the
generator writes now."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "workflow" / "tools" / "generate_docs.py"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("generate_docs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_committed_pages_are_up_to_date():
    """Fails when a schema (or the memory model) changed and the pages were not regenerated."""
    res = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def test_check_fails_on_a_stale_page_and_writing_fixes_it(gen, tmp_path, monkeypatch):
    shutil.copy(gen.MEMORY_PAGE, tmp_path / "platforms.md")
    monkeypatch.setattr(gen, "OUT", tmp_path / "reference")
    monkeypatch.setattr(gen, "MEMORY_PAGE", tmp_path / "platforms.md")
    assert gen.main(["--check"]) == 1  # no reference pages there yet
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    page = tmp_path / "reference" / "study.md"
    page.write_text(page.read_text().replace("refresh interval", "refresh period"))
    assert gen.main(["--check"]) == 1


def _fields(node: dict, schema: dict, seen: set[int]) -> set[str]:
    """Every property name anywhere in a schema (following $ref once)."""
    if not isinstance(node, dict) or id(node) in seen:
        return set()
    seen.add(id(node))
    if "$ref" in node:
        target = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _fields(target, schema, seen)
    out = set(node.get("properties", {}))
    subs = list(node.get("properties", {}).values()) + node.get("anyOf", []) + node.get("oneOf", [])
    subs += [node[k] for k in ("items", "additionalProperties") if isinstance(node.get(k), dict)]
    for sub in subs:
        out |= _fields(sub, schema, seen)
    return out


@pytest.mark.parametrize("name", ["study", "claims"])
def test_every_field_has_a_row_with_its_schema_description(gen, name):
    schema = yaml.safe_load((gen.SCHEMAS / f"{name}.schema.yaml").read_text())
    text = gen.pages()[gen.OUT / f"{name}.md"]
    fields = _fields(schema, schema, set())
    assert len(fields) > 10
    missing = [f for f in fields if f"| `{f}` |" not in text]
    assert not missing, missing
    # a description is shown as the schema writes it (whitespace folded)
    desc = " ".join(schema["properties"]["name" if name == "study" else "claims"]["description"].split())
    assert desc in text


def test_study_reference_links_nested_objects_and_forms(gen):
    text = gen.pages()[gen.OUT / "study.md"]
    assert "| `runs` | list of objects: see [`defaults` and `runs[]`](#entry) |" in text
    assert "## `Tb (controller form)` {#tb-controller-form}" in text
    assert "| `recipe` | see [`recipe`](#recipe) |" in text
    assert "| `name` | string matching `^[a-z0-9][a-z0-9_-]*$` | **required.**" in text


def test_a_description_broken_by_an_unquoted_comma_is_refused(gen):
    """YAML reads {description: a, b} as a description 'a' and a key 'b': the validator ignores the key,
    so the generator must not (the page would lose half the sentence)."""
    schema = yaml.safe_load("properties: {x: {type: string, description: prompt, data_source}}")
    with pytest.raises(SystemExit, match="data_source"):
        gen.Page(schema)


def test_the_memory_block_is_what_coolsampler_memory_prints(gen):
    block = gen.memory_block()
    assert block.startswith(gen.MEMORY_BEGIN) and block.endswith(gen.MEMORY_END)
    assert "qwen2.5-math-7b gsm8k on 4 x 95.6 GiB GPUs: fits" in block
    assert block in gen.MEMORY_PAGE.read_text()


def test_the_site_home_shows_the_readmes_front_block(gen):
    """One source for the quick start: docs/index.md holds the README's front block, links rewritten."""
    readme = gen.README.read_text()
    home = gen.HOME_PAGE.read_text()
    block = gen.front_block(readme)
    assert block in home
    assert "no GPU run exists yet" in block and "source .venv/bin/activate" in block
    assert "](docs/" not in block and "](reconstruction.md)" in block
    with pytest.raises(SystemExit, match="links outside docs/"):
        gen.front_block(readme.replace("<!-- /front -->", "[x](LICENSE)\n<!-- /front -->"))

"""The one YAML reader for every file a researcher hands the tools: studies, overlays, claims files,
profiles and run records. It returns plain data or raises ``InputError`` naming the file and the line.

Why not ``yaml.safe_load``: it executes no tag, but it takes a file that is not what it looks like.
A duplicate key silently keeps the last block (a second ``runs:`` drops the first one's runs); an
anchor that refers to itself builds a cyclic object that a later recursive walk (the schema check,
an overlay merge) turns into a ``RecursionError``; and a kilobyte of nested aliases ("billion
laughs") loads into a graph that shares its nodes, so the load is quick but every walk after it
visits a billion of them and hangs. Here the composed node graph is checked before anything is
built from it: a cycle, an expansion past ``MAX_NODES`` nodes or ``MAX_DEPTH`` levels, or a tag
other than plain YAML's is refused in one line, in time proportional to the file's own size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from coolsampler.spec.inputs import InputError

# The expanded size a file may reach: every node counted once per path to it (an alias counts its
# anchor's whole subtree again). The largest shipped file (config/claims.yaml, 88 KB, its runs written
# with ``<<: *base``) expands to about 7 700 nodes; a file 30 times larger is a bomb or a mistake, and
# every walk of it (the schema check, an overlay merge) would be slow.
MAX_NODES = 250_000
# Nesting deeper than this is no study, claims file or overlay; it would only exhaust Python's
# recursion in a later walk (libyaml stops at about a thousand levels itself).
MAX_DEPTH = 100
# A study or claims file is a few kilobytes to 100 KB; a file far beyond is not one (a log named .yaml).
MAX_BYTES = 8 * 1024 * 1024

_CORE = "tag:yaml.org,2002:"
# The tags plain YAML resolves by itself (what a file without any ``!`` means): anything else was
# written on purpose (``!!python/object``, ``!!binary``, ``!!set``, a custom ``!tag``) and is refused.
ALLOWED_TAGS = frozenset(_CORE + t for t in ("null", "bool", "int", "float", "str", "seq", "map", "timestamp", "merge"))

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where installed: claims.yaml is 88 KB


def _line(node_or_mark: Any) -> int | None:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return None if mark is None else mark.line + 1


def _key_text(node: Node) -> str:
    text = str(node.value) if isinstance(node, ScalarNode) else f"a {node.id} key"
    return text if len(text) <= 60 else text[:57] + "..."


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """The safe loader that also refuses a key written twice in one mapping (at any depth)."""

    file: str = "<yaml>"

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first: dict[Any, int | None] = {}
            for key_node, _ in node.value:
                if key_node.tag == _CORE + "merge" or not isinstance(key_node, ScalarNode):
                    continue  # ``<<: *base`` may repeat and is overridden by design; complex keys: the base check
                key = self.construct_object(key_node, deep=True)
                if key in first:
                    raise InputError(
                        self.file,
                        f"duplicate key {_key_text(key_node)!r} (first at line {first[key]}); YAML keeps only"
                        " the last one, so the earlier block would be dropped",
                        where=_line(key_node),
                    )
                first[key] = _line(key_node)
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor(_CORE + "map", _Loader.construct_yaml_map)


def check_graph(node: Node | None, file: str) -> None:
    """Refuse a composed document that is cyclic, expands past ``MAX_NODES`` or ``MAX_DEPTH``, or carries
    a tag plain YAML does not resolve. Iterative, and each distinct node is sized once, so a bomb costs
    the time of its own few nodes."""
    if node is None:
        return
    size: dict[int, int] = {}  # a finished node: its expanded size
    depth: dict[int, int] = {}  # a finished node: its expanded depth
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        i = id(n)
        if n.tag not in ALLOWED_TAGS:
            raise InputError(file, f"the tag {n.tag.replace(_CORE, '!!')} is not allowed (plain YAML only)", _line(n))
        children: list[Node] = []
        if isinstance(n, SequenceNode):
            children = list(n.value)
        elif isinstance(n, MappingNode):
            children = [c for pair in n.value for c in pair]
        if done:
            on_path.discard(i)
            size[i] = 1 + sum(size[id(c)] for c in children)
            depth[i] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[i] > MAX_NODES:
                raise InputError(
                    file,
                    f"its anchors and aliases expand past {MAX_NODES} values (an alias bomb?); refused unexpanded",
                    _line(n),
                )
            if depth[i] > MAX_DEPTH:
                raise InputError(file, f"nested deeper than {MAX_DEPTH} levels", _line(n))
            continue
        if i in size:
            continue
        on_path.add(i)
        stack.append((n, True))
        for c in children:
            if id(c) in on_path:
                raise InputError(
                    file, "an alias refers to its own anchor (a cycle); a YAML value must be finite", _line(c)
                )
            if id(c) not in size:
                stack.append((c, False))


def _problem(e: yaml.YAMLError) -> tuple[str, int | None]:
    """A YAML error's one-line problem and line."""
    if isinstance(e, yaml.reader.ReaderError):
        return f"not YAML text: {e.reason} (character {e.position})", None
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    parts = [getattr(e, "context", None), getattr(e, "problem", None)]
    text = "; ".join(p for p in parts if p) or str(e)
    return f"not valid YAML: {' '.join(text.split())}", _line(mark)


def parse_yaml(text: str, file: str | Path = "<yaml>") -> Any:
    """``text`` as plain data (dicts, lists, scalars), or ``InputError`` naming ``file`` and the line."""
    file = str(file)
    loader = _Loader(text)
    loader.file = file
    try:
        node = loader.get_single_node()
        check_graph(node, file)
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as e:
        problem, where = _problem(e)
        raise InputError(file, problem, where) from None
    except RecursionError:
        raise InputError(file, f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path, *, mapping: bool = False, what: str = "YAML file") -> Any:
    """The file at ``path`` as plain data; ``mapping``: its top level must be a mapping (an empty file is
    ``{}``). Every way it can be wrong (missing, a directory, unreadable, binary, too large, not YAML,
    a duplicate key, a tag, an anchor cycle or bomb) is one ``InputError`` naming the file and line."""
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(p, f"is a directory, not a {what}")
        if p.stat().st_size > MAX_BYTES:
            raise InputError(p, f"is {p.stat().st_size} bytes; a {what} is under {MAX_BYTES // 2**20} MiB")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, f"no such {what}") from None
    except OSError as e:
        raise InputError(p, f"cannot be read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(p, f"not UTF-8 text (byte {e.start}); a {what} is YAML text") from None
    data = parse_yaml(text, p)
    if mapping:
        if data is None:
            return {}
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else f"the {type(data).__name__} {str(data)[:40]!r}"
            raise InputError(p, f"a {what} is a mapping of keys (key: value), not {kind}", where=1)
    return data

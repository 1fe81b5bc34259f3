"""What of a code file can change what it does: the content a key over code is computed from.

Lives in the spec layer because keys at every layer use it: the training key (``coolsampler.train.code``,
``coolsampler.train.rerun``) and a generated world's key (``coolsampler.spec.world``). ``ast`` only.
"""

from __future__ import annotations

import ast
from pathlib import Path


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    # a module may be empty; a class or function needs a statement
                    node.body = body[1:] or ([] if isinstance(node, ast.Module) else [ast.Pass()])
    return tree


def code_content(path: str | Path) -> bytes:
    """What of a code file can change what it does: for Python, its syntax tree without docstrings
    (comments are not in the tree; positions are not dumped), else the bytes."""
    path = Path(path)
    if path.suffix != ".py":
        return path.read_bytes()
    return ast.dump(_strip_docstrings(ast.parse(path.read_text(), str(path)))).encode()

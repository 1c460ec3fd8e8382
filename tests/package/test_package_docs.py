"""Each layer's package docstring names every module in it, so that a reader finds a module
from its package and a new module is placed, and described, where it belongs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "continuum"
LAYERS = sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").exists() and p.name[0] == "_")


@pytest.mark.parametrize("layer", LAYERS, ids=lambda p: p.name)
def test_a_layers_docstring_names_each_of_its_modules(layer: Path) -> None:
    doc = ast.get_docstring(ast.parse((layer / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in layer.glob("*.py") if p.stem != "__init__")
    unnamed = [m for m in modules if not re.search(rf"\b{m}\b", doc)]
    assert not unnamed, f"continuum/{layer.name}/__init__.py does not name {unnamed}"

"""A small model zoo written like a research repository's ``models/`` package.

The runtime-verification tests import it as a package (relative imports, a registry
filled as a side effect of importing the submodules) and verify every class: the
healthy models must come back clean, each buggy twin with its finding.
"""
from .registry import MODELS, register_model
from . import buggy, distill, heads, moe, resnet, seq, text, train, vit  # noqa: F401 - registers the models

__all__ = ["MODELS", "register_model"]

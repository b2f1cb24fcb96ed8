"""torchlint's findings inside flake8: ``flake8 --select TL`` (entry point ``TL`` in pyproject.toml).

check_source already drops what torchlint's own ``# noqa`` and ``# torchlint: noqa``
comments silence; flake8 then applies its own selection, ``# noqa`` and output. Severities
and ``[tool.torchlint]`` are not used here: flake8's configuration decides.
"""
from __future__ import annotations

import ast
from typing import Iterator, List, Tuple

from . import __version__
from .engine import check_source


class Flake8Plugin:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: List[str]) -> None:
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        result = check_source("".join(self.lines), self.filename)
        for finding in result.findings:  # a file that does not parse is flake8's E999
            start = finding.range.start
            yield start.line, start.column, "%s %s" % (finding.code, finding.message), type(self)

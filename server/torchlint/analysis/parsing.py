"""Parsing a file's text into a syntax tree, once per text, one tree at a time.

Shared by the engine (torchlint.engine), the jedi layer, notebooks and verification.
"""
from __future__ import annotations

import ast
import threading
import warnings
import weakref
from collections import OrderedDict

from typing import Optional, Tuple

from .findings import ParseError, Position

# A text's syntax tree and None, or None and why it does not parse.
Parsed = Tuple[Optional[ast.Module], Optional[ParseError]]

# CPython 3.11's AST builder is not safe in two threads at once ("AST constructor recursion
# depth mismatch"), and the language server analyses in threads: one parse at a time.
PARSE_LOCK = threading.Lock()
# The last few trees: the server's waves, hovers and code actions parse the same text again.
# Bounded by their texts' size too: a tree's memory grows with its text, and the older versions
# of a file being edited are not asked for again (a tree's size, and the server's memory with and
# without the bound: benchmarks/README.md#tuned-constants).
_RECENT_TREES: "OrderedDict[Tuple[str, str], Parsed]" = OrderedDict()  # (path, text) -> its parse
_RECENT_LIMIT = 8
_RECENT_CHARS = 300_000  # characters of the texts kept; the newest tree stays whatever its size
# Every tree something in this process still holds (a check's, one of the files a worker read to
# resolve another's bases), by its text: a text is not parsed again while one of its trees lives.
# A worker often reads a model file for another's bases before it checks that file.
_LIVE_TREES: "weakref.WeakValueDictionary[str, ast.Module]" = weakref.WeakValueDictionary()


def parse(text: str, path: str) -> Parsed:
    """The syntax tree, or a ParseError saying where and why it does not parse."""
    key = (path, text)
    with PARSE_LOCK:
        cached = _RECENT_TREES.get(key)
        if cached is None:
            cached = _RECENT_TREES[key] = _parse_shared(text, path)
            while len(_RECENT_TREES) > 1 and (len(_RECENT_TREES) > _RECENT_LIMIT or sum(
                    len(kept) for _, kept in _RECENT_TREES) > _RECENT_CHARS):
                _RECENT_TREES.popitem(last=False)
        else:
            _RECENT_TREES.move_to_end(key)
    return cached


def forget(path: str) -> None:
    """A document was closed: its recent trees go."""
    with PARSE_LOCK:
        for key in [key for key in _RECENT_TREES if key[0] == path]:
            del _RECENT_TREES[key]


def shared_tree(text: str, path: str) -> Optional[ast.Module]:
    """The tree of ``text`` (None where it does not parse): one that lives already, else a new one
    that later parses of the same text get while it lives."""
    with PARSE_LOCK:
        return _parse_shared(text, path)[0]


def _parse_shared(text: str, path: str) -> Parsed:
    tree = _LIVE_TREES.get(text)
    if tree is not None:
        return tree, None
    parsed = _parse(text, path)
    if parsed[0] is not None:
        _LIVE_TREES[text] = parsed[0]
    return parsed


def parse_fresh(text: str, path: str) -> Parsed:
    """Like :func:`parse`, for a text parsed once (a piece of a file, a reduced copy of one):
    kept out of the recent trees, so it never pushes out the tree of a whole file."""
    with PARSE_LOCK:
        return _parse(text, path)


def _parse(text: str, path: str) -> Parsed:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours to report
            # A byte-order mark is an encoding detail, not code (editors may send one).
            return ast.parse(text[1:] if text.startswith("\ufeff") else text, filename=path), None
    except SyntaxError as err:
        line = err.lineno or 1
        column = max((err.offset or 1) - 1, 0)
        return None, ParseError("SyntaxError: %s" % (err.msg,), Position(line, column))
    except (ValueError, RecursionError, MemoryError) as err:  # null bytes, absurd nesting
        return None, ParseError("cannot parse: %s" % (str(err) or "too deeply nested",), Position(1, 0))

"""parso's pickles of module trees, kept in jedi's cache folder, that the CLI's workers (and an
editor's jedi beside them) write and read at the same time (inference.jedi_access)."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import parso
import parso.cache
import pytest

from torchlint.inference import jedi_access  # noqa: F401  (puts the whole writes in place)

SOURCE = "import torch\n\n\ndef helper(x):\n    return x * 2\n"
CHANGED = SOURCE + "\n\nclass Net:\n    pass\n"


@pytest.fixture(autouse=True)
def pickles_on_disk(monkeypatch):
    """As a layer with disk caches has it (a --no-cache run earlier in this process turned them off)."""
    monkeypatch.setattr(jedi_access, "_pickles_on_disk", lambda: True)


def parse_cached(module: Path, cache: Path):
    grammar = parso.load_grammar()
    # What this process keeps in memory would answer first: the test is about the files.
    parso.cache.parser_cache.get(grammar._hashed, {}).pop(module, None)
    return grammar.parse(path=str(module), cache=True, cache_path=str(cache))


def files_in(cache: Path):
    return sorted(path.name for path in cache.rglob("*") if path.is_file())


def test_a_write_cut_short_leaves_the_whole_pickle_that_was_there(tmp_path, monkeypatch):
    module, cache = tmp_path / "helpers.py", tmp_path / "cache"
    module.write_text(SOURCE)
    parse_cached(module, cache)
    pickles = list(cache.rglob("*.pkl"))
    assert len(pickles) == 1
    whole = pickles[0].read_bytes()
    assert len(files_in(cache)) == 2  # the pickle and parso's lock file: nothing left beside them

    module.write_text(CHANGED)
    os.utime(module, (os.path.getmtime(pickles[0]) + 10,) * 2)  # newer than its pickle: parsed and saved

    def half_a_dump(item, handle, protocol):  # a worker stopped in the middle of writing
        handle.write(whole[:len(whole) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(pickle, "dump", half_a_dump)
    with pytest.raises(KeyboardInterrupt):
        parse_cached(module, cache)
    assert pickles[0].read_bytes() == whole
    assert len(files_in(cache)) == 2


def test_half_a_pickle_written_in_place_is_parsed_again_not_an_error(tmp_path):
    """Another jedi tool writes its pickles in place: a load in the middle of that write reads
    half a file, which made the question fail with EOFError."""
    module, cache = tmp_path / "helpers.py", tmp_path / "cache"
    module.write_text(SOURCE)
    parse_cached(module, cache)
    (pickled,) = cache.rglob("*.pkl")
    whole = pickled.read_bytes()
    pickled.write_bytes(whole[:len(whole) // 2])
    os.utime(pickled, (os.path.getmtime(module) + 10,) * 2)  # newer than the module: parso loads it

    tree = parse_cached(module, cache)
    assert tree.get_code() == SOURCE
    assert [node.name.value for node in tree.iter_funcdefs()] == ["helper"]
    assert len(pickled.read_bytes()) > len(whole) // 2  # and saved whole again

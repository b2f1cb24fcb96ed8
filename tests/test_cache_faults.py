"""The same findings whatever the disk caches hold or cannot hold: entries of torchlint's cache that
are well formed but not what they claim (other answers, another key, another version, emptied
dependencies) are dropped and computed again, counted in ``-v``; a cache folder that cannot be
written (not a folder, a disk that refuses every write) costs only time, said once on stderr.

Each run is a ``torchlint check`` child with the budget off, on a small package whose findings
depend on jedi's answers (a base, a helper returning a tensor, a helper returning a layer, all in
another module), so that only the caches can make a difference.
"""
from __future__ import annotations

import json
import os
import resource
import textwrap
import time
from pathlib import Path

import pytest

from testkit.support import check_in_a_process

BASE = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)


    def make_table(n):
        return torch.zeros(n, n)


    def make_layer():
        return nn.Linear(4, 4)
""")

MODEL = textwrap.dedent("""\
    import torch
    from .base import Block, make_table, make_layer


    class Net(Block):
        def __init__(self):
            super().__init__()
            self.table = make_table(4)
            self.layers = [make_layer() for _ in range(3)]

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x @ self.table


    class Masked(Block):
        def __init__(self):
            super().__init__()
            self.mask = make_table(2)

        def forward(self, x):
            return self.lin(x) + self.mask
""")

# What the package's findings are with jedi; by names alone there are none (each depends on a
# base, a helper or a layer defined in pkg/base.py).
EXPECTED = [("pkg/model.py", 8, "TL101"), ("pkg/model.py", 9, "TL102"), ("pkg/model.py", 20, "TL101")]


@pytest.fixture
def project(tmp_path):
    package = tmp_path / "project" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(BASE)
    (package / "model.py").write_text(MODEL)
    return package.parent


def check(project: Path, cache: Path, jedi_home: Path, *flags: str, preexec_fn=None):
    """A check of ``project`` with torchlint's cache in ``cache`` and jedi's (parso's pickles)
    under ``jedi_home``: (findings as (file, line, code), the finished child)."""
    done = check_in_a_process(["--infer-budget", "0", "--format", "json", *flags, "pkg"], project,
                              preexec_fn=preexec_fn, TORCHLINT_CACHE_DIR=str(cache), XDG_CACHE_HOME=str(jedi_home))
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    entries = json.loads(done.stdout)
    found = sorted((str(Path(e["filename"]).relative_to(project)), e["location"]["row"], e["code"])
                   for e in entries if e["code"] is not None)
    return found, done


def entries_of(cache: Path):
    return sorted(cache.glob("v*/*/*.json"))


def test_the_package_needs_jedi_and_a_clean_run_caches_it(project, tmp_path):
    names_only = check_in_a_process(["--no-infer", "--format", "json", "pkg"], project)
    assert json.loads(names_only.stdout) == []
    found, _ = check(project, tmp_path / "cache", tmp_path / "home")
    assert found == EXPECTED
    assert len(entries_of(tmp_path / "cache")) == 1  # model.py's (base.py asks jedi nothing)
    again, done = check(project, tmp_path / "cache", tmp_path / "home", "-v")
    assert again == EXPECTED and "failed their checks" not in done.stderr


@pytest.mark.parametrize("planted", [None, 0, "tensor", ["tensor", False, None, None, False], {"kind": "tensor"}, False])
def test_answers_of_other_values_are_dropped_and_asked_again(project, tmp_path, planted):
    """Every answer of the entry rewritten to one value, the entry still valid JSON with the right
    keys: None (for a value: "jedi could not tell") lost findings on the code before this check."""
    cache, home = tmp_path / "cache", tmp_path / "home"
    check(project, cache, home)
    (entry,) = entries_of(cache)
    stored = json.loads(entry.read_text())
    stored["answers"] = {key: planted for key in stored["answers"]}
    entry.write_text(json.dumps(stored))
    found, done = check(project, cache, home, "-v")
    assert found == EXPECTED
    assert "1 cache entry failed their checks" in done.stderr
    # Computed again and stored whole: the next run uses it.
    assert json.loads(entry.read_text())["answers"] != stored["answers"]
    found, done = check(project, cache, home, "-v")
    assert found == EXPECTED and "failed their checks" not in done.stderr


def damage_by_name(entry: Path, cache: Path) -> None:
    """The entry of another text in this one's place: its answers are about other lines."""
    stored = json.loads(entry.read_text())
    stored["answers"] = {"b:5:10": False, "b:17:13": False}
    stored["key"] = "0" * 64
    entry.write_text(json.dumps(stored))


def damage_version(entry: Path, cache: Path) -> None:
    stored = json.loads(entry.read_text())
    stored["version"], stored["answers"] = "0.0.0", {key: None for key in stored["answers"]}
    entry.write_text(json.dumps(stored))


def damage_dependencies(entry: Path, cache: Path) -> None:
    """No files the answers came from: answers that no change of base.py would ever invalidate."""
    stored = json.loads(entry.read_text())
    stored["dependencies"] = []
    stored["answers"] = {key: None for key in stored["answers"]}
    entry.write_text(json.dumps(stored))


@pytest.mark.parametrize("damage", [damage_by_name, damage_version, damage_dependencies])
def test_an_entry_that_is_not_what_it_claims_is_dropped(project, tmp_path, damage):
    cache, home = tmp_path / "cache", tmp_path / "home"
    check(project, cache, home)
    (entry,) = entries_of(cache)
    damage(entry, cache)
    found, done = check(project, cache, home, "-v")
    assert found == EXPECTED
    assert "1 cache entry failed their checks" in done.stderr


def test_a_cache_that_is_not_a_folder_costs_only_time(project, tmp_path):
    """TORCHLINT_CACHE_DIR and jedi's cache folder are files: nothing can be written under them
    (as for a read-only folder, whatever the user's rights). parso let the error through, and
    jedi's questions failed: the findings were lost."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    clean, clean_run = check(project, tmp_path / "cache", tmp_path / "home")
    found, done = check(project, blocked, blocked)
    assert found == clean == EXPECTED and done.returncode == clean_run.returncode == 1
    warnings = [line for line in done.stderr.splitlines() if "not kept on disk" in line]
    assert len(warnings) == 2, done.stderr  # torchlint's answers and jedi's parsed modules, once each
    assert all("the findings are the same" in line for line in warnings)


def test_a_disk_that_refuses_every_write_costs_only_time(project, tmp_path):
    """A full disk: every write to a file past a few bytes fails (the file size limit, whose signal
    Python ignores, makes each write fail with EFBIG as a full disk fails with ENOSPC)."""
    def full_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))

    cache, home = tmp_path / "cache", tmp_path / "home"
    found, done = check(project, cache, home, preexec_fn=full_disk)
    assert found == EXPECTED
    assert len([line for line in done.stderr.splitlines() if "not kept on disk" in line]) == 2, done.stderr
    assert not [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size]  # (nothing whole was kept)
    # The next run, with room again, computes and keeps them.
    found, done = check(project, cache, home)
    assert found == EXPECTED and "not kept on disk" not in done.stderr
    assert len(entries_of(cache)) == 1


def test_temporary_files_of_killed_writers_are_deleted_and_live_ones_kept(project, tmp_path):
    """A writer killed between its temporary file and the rename (kill -9) leaves the file: torchlint's
    entries (``.*.tmp`` beside them) and parso's pickles (``.torchlint-*.tmp``). A later run deletes
    those an hour old, in both folders (torchlint's at its trim whatever the size, parso's where
    jedi first reads it), and keeps a fresh one: another run may be writing it."""
    cache, home = tmp_path / "cache", tmp_path / "home"
    check(project, cache, home)
    (entry,) = entries_of(cache)
    (pickles,) = {pickle.parent for pickle in (home / "jedi").rglob("*.pkl")}
    hour_ago = time.time() - 3600
    planted = {}
    for folder, prefix in ((entry.parent, "."), (pickles, ".torchlint-")):
        for age in ("old", "fresh"):
            planted[folder, age] = folder / ("%s%s-writer.tmp" % (prefix, age))
            planted[folder, age].write_bytes(b"\x80half a pickle" * 1000)
        os.utime(planted[folder, "old"], (hour_ago, hour_ago))
    unrelated = pickles / "notes.tmp"  # not a name torchlint writes: not its to delete
    unrelated.write_text("")
    os.utime(unrelated, (hour_ago, hour_ago))
    with open(project / "pkg" / "model.py", "a") as model:
        model.write("# changed: asked again, and jedi loads the pickles of what it imports\n")
    found, _ = check(project, cache, home)
    assert found == EXPECTED
    left = {(folder, age) for (folder, age), path in planted.items() if path.exists()}
    assert left == {(entry.parent, "fresh"), (pickles, "fresh")}
    assert unrelated.exists() and len(entries_of(cache)) == 2

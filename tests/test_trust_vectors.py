"""The trust model, vector by vector: in-process analysis never imports or executes anything
from a path the repository chose or shipped (docs/SECURITY.md).

Each test builds a hostile repository in tmp_path with a planted marker: code (a sourceless
``.pyc``, a ``.pth`` line, a ``sitecustomize``, a pickle, a shell script named as an
interpreter) that writes the marker file if anything ever runs it. The test runs torchlint on
the repository, through the command line (one process, then the worker pool) or the language
server, checks that jedi really was asked (a finding only the jedi layer reports), and asserts
the marker was never written.

The helpers take torchlint from ``$TORCHLINT_SERVER_DIR``, else from the first ``PYTHONPATH``
entry that holds a torchlint package, else from this checkout's server/: so that
``PYTHONPATH=/other/tree/server pytest tests/test_trust_vectors.py`` runs these tests against
another tree's code (an older commit, to see a test fail where the vector was open).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import py_compile
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import HELPER_MADE, open_document, serving, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VERSION = "%d.%d" % sys.version_info[:2]
CLI_TIMEOUT = 180  # the bound on every torchlint process a test starts
LSP_TIMEOUT = 240  # the bound on waiting for the server's jedi wave


def _server_dir() -> str:
    """Where the torchlint under test lives (see the module's docstring)."""
    if os.environ.get("TORCHLINT_SERVER_DIR"):
        return os.path.abspath(os.environ["TORCHLINT_SERVER_DIR"])
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isfile(os.path.join(entry, "torchlint", "__init__.py")):
            return os.path.abspath(entry)
    return str(ROOT / "server")


SERVER_DIR = _server_dir()
# What the user's environment may hold that would choose an interpreter for torchlint: none of it here.
_CHOOSERS = ("TORCHLINT_PYTHON", "TORCHLINT_TRUST_WORKSPACE", "VIRTUAL_ENV", "PYTHONSTARTUP")


def environment(tmp_path: Path, **extra: str) -> Dict[str, str]:
    """The environment of a torchlint process: this tree's torchlint, a cache folder of the test's own."""
    environ = {k: v for k, v in os.environ.items() if k not in _CHOOSERS}
    environ.update(PYTHONPATH=SERVER_DIR, TORCHLINT_CACHE_DIR=str(tmp_path / "torchlint-cache"))
    environ.update(extra)
    return environ


def torchlint(args, cwd: Path, tmp_path: Path, stdin: Optional[str] = None, **env: str):
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=str(cwd), env=environment(tmp_path, **env),
                          input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT)


def findings(output: str) -> List[Tuple[str, int, str]]:
    """(file, line, code) of each finding of the text report."""
    found = []
    for line in output.splitlines():
        place, sep, rest = line.partition(": TL")
        if sep:
            path, line_number, _ = place.rsplit(":", 2)  # a notebook's path: "nb.ipynb:cell 1"
            found.append((path, int(line_number), "TL" + rest.split()[0]))
    return sorted(found)


# -- what the hostile repositories hold ----------------------------------------------------------

def marker_code(marker: Path, what: str) -> str:
    return "open(%r, 'a').write(%r)\n" % (str(marker), what + "\n")


def marker_script(path: Path, marker: Path) -> Path:
    """An "interpreter" that leaves a marker, then runs the real Python."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho ran >> "%s"\nexec "%s" "$@"\n' % (marker, os.path.realpath(sys.executable)))
    path.chmod(0o755)
    return path


def sourceless(target: Path, source: str) -> Path:
    """A module with no source beside it: ``target`` is a .pyc compiled from ``source``, which
    is written elsewhere (so that only the .pyc is found where the repository put it)."""
    with tempfile.TemporaryDirectory() as folder:
        source_file = os.path.join(folder, target.stem + ".py")
        with open(source_file, "w") as handle:
            handle.write(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        py_compile.compile(source_file, cfile=str(target), doraise=True)
    return target


def planted_module(marker: Path, name: str) -> str:
    """The source of a module that leaves the marker when imported, with the names the models use."""
    return marker_code(marker, "imported " + name) + "HKEY_CURRENT_USER = 1\n\n\ndef thing():\n    return 1\n"


def model_importing(module: str) -> str:
    """A model that imports ``module`` and asks jedi about its names (class Planted), after
    lsp_helpers.HELPER_MADE's class that only jedi's inference finds TL101 in (Scaled, line
    JEDI_LINE): the finding shows jedi answered."""
    return "import %s\n" % module + HELPER_MADE + textwrap.dedent("""\


        class Planted(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = {module}.thing()
                self.k = {module}.HKEY_CURRENT_USER

            def forward(self, x):
                return x * self.w + self.k
    """).format(module=module)


# Scaled's `self.w = make_weight(3)` (after the import line): names alone cannot see make_weight returns a tensor
JEDI_LINE = 2 + HELPER_MADE.splitlines().index("        self.w = make_weight(3)")


def hostile_venv(repo: Path, marker: Path, home: Optional[Path] = None) -> Path:
    """A virtual environment made by hand at repo/.venv, named by the repository's pyproject.toml:
    pyvenv.cfg (``home``: the base Python's bin folder, this Python's by default), a bin/python
    that leaves the marker if it is ever run. Returns its site-packages."""
    venv = repo / ".venv"
    site = venv / "lib" / ("python" + VERSION) / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s\ninclude-system-site-packages = false\nversion = %s\n"
                                     % (home or os.path.join(sys.base_prefix, "bin"), sys.version.split()[0]))
    marker_script(venv / "bin" / "python", marker)
    (repo / "pyproject.toml").write_text('[tool.torchlint]\npython = ".venv/bin/python"\n')
    return site


def winreg_repo(tmp_path: Path, files: int = 1) -> Path:
    """The repository of the fixed code execution: a sourceless winreg.pyc in the venv's
    site-packages, models that import winreg."""
    repo = tmp_path / "repo"
    repo.mkdir()
    site = hostile_venv(repo, tmp_path / "MARKER")
    sourceless(site / "winreg.pyc", planted_module(tmp_path / "MARKER", "winreg"))
    for number in range(files):
        (repo / ("model.py" if files == 1 else "model_%02d.py" % number)).write_text(model_importing("winreg"))
    return repo


def assert_no_marker(tmp_path: Path, done=None) -> None:
    marker = tmp_path / "MARKER"
    ran = marker.read_text() if marker.exists() else ""
    assert not ran, "planted code ran: %r%s" % (ran, "\n" + done.stderr[-3000:] if done is not None else "")


# -- 1, 2: a sourceless module in the repository's virtual environment, the command line ----------

def test_check_never_imports_a_planted_winreg_pyc(tmp_path):
    repo = winreg_repo(tmp_path)
    done = torchlint(["check", "--no-cache", "-v", "."], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert "read, not run" in done.stderr
    assert ("model.py", JEDI_LINE, "TL101") in findings(done.stdout), done.stdout + done.stderr


def test_the_worker_pool_never_imports_a_planted_winreg_pyc(tmp_path):
    # 16 files or more go to worker processes (cli.PARALLEL_MIN_FILES; with one CPU, to this one).
    repo = winreg_repo(tmp_path, files=20)
    done = torchlint(["check", "--no-cache", "."], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert [f for f in findings(done.stdout) if f[1:] == (JEDI_LINE, "TL101")] == \
        [("model_%02d.py" % n, JEDI_LINE, "TL101") for n in range(20)], done.stdout + done.stderr


# -- 3: the same, the language server --------------------------------------------------------------

def server(root: Path, tmp_path: Path, **env: str):
    return serving(root, environment(tmp_path, **env), command=[sys.executable, "-m", "torchlint.lsp"])


async def jedi_wave(client, uri: str, text: str):
    """Open the document and wait for the publish of the jedi wave (the one with Scaled's TL101)."""
    open_document(client, uri, text)

    def refined():
        return next((p for p in client.publishes if p.uri == uri and p.version == 1
                     and any(d.code == "TL101" and d.range.start.line == JEDI_LINE - 1 for d in p.diagnostics)),
                    None)
    await wait_for(lambda: refined() is not None, timeout=LSP_TIMEOUT, what="the jedi wave of %s" % uri)
    return refined()


async def assert_the_server_imports_nothing(repo: Path, tmp_path: Path, module: str) -> None:
    """The server checks repo/model.py (which imports ``module``) through its jedi wave: no marker,
    during the session or after it."""
    async with server(repo, tmp_path) as client:
        await jedi_wave(client, (repo / "model.py").as_uri(), model_importing(module))
        assert_no_marker(tmp_path)
    assert_no_marker(tmp_path)


async def test_the_server_never_imports_a_planted_winreg_pyc(tmp_path):
    await assert_the_server_imports_nothing(winreg_repo(tmp_path), tmp_path, "winreg")


# -- 4: a base Python inside the repository ---------------------------------------------------------

def fake_base_repo(tmp_path: Path) -> Path:
    """pyvenv.cfg's home is <repo>/fakebase/bin: the environment's standard library is the
    repository's folder, where smtplib (pure Python in CPython) is only a sourceless .pyc."""
    repo = tmp_path / "repo"
    repo.mkdir()
    base = repo / "fakebase"
    (base / "bin").mkdir(parents=True)
    hostile_venv(repo, tmp_path / "MARKER", home=base / "bin")
    sourceless(base / "lib" / ("python" + VERSION) / "smtplib.pyc", planted_module(tmp_path / "MARKER", "smtplib"))
    (repo / "model.py").write_text(model_importing("smtplib"))
    return repo


def test_a_base_python_in_the_repository_is_read_not_imported(tmp_path):
    repo = fake_base_repo(tmp_path)
    done = torchlint(["check", "--no-cache", "-v", "model.py"], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert ("model.py", JEDI_LINE, "TL101") in findings(done.stdout), done.stdout + done.stderr


async def test_the_server_never_imports_from_a_base_python_in_the_repository(tmp_path):
    await assert_the_server_imports_nothing(fake_base_repo(tmp_path), tmp_path, "smtplib")


# -- 5, 6: site-packages' start-up hooks ------------------------------------------------------------

# Net's base lives only where the environment's files say (a .pth's folder, site-packages): only
# jedi reading them knows Net is a Module, and reports TL101 on line BASE_LINE.
BASE_MODEL = textwrap.dedent("""\
    import torch
    from {module} import Base


    class Net(Base):
        def __init__(self):
            super().__init__()
            self.w = torch.zeros(3)

        def forward(self, x):
            return x * self.w
""")
BASE_LINE = 8
BASE_SOURCE = "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n"


def test_a_pth_file_is_read_never_executed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    site = hostile_venv(repo, marker)
    (repo / "extra").mkdir()
    (repo / "extra" / "extrabase.py").write_text(BASE_SOURCE)
    (site / "pthmod.py").write_text(marker_code(marker, "pthmod imported"))
    (site / "evil.pth").write_text("../../../../extra\nimport os; open(%r, 'a').write('pth line ran\\n')\n"
                                   "import pthmod\nimport\tpthmod\n" % str(marker))
    (repo / "net.py").write_text(BASE_MODEL.format(module="extrabase"))
    done = torchlint(["check", "--no-cache", "net.py"], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert findings(done.stdout) == [("net.py", BASE_LINE, "TL101")], done.stdout + done.stderr  # the .pth was read


def test_sitecustomize_and_usercustomize_are_never_executed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    site = hostile_venv(repo, marker)
    (site / "sitebase.py").write_text(BASE_SOURCE)
    for name in ("sitecustomize", "usercustomize"):
        (site / (name + ".py")).write_text(planted_module(marker, name))
    model = BASE_MODEL.format(module="sitebase").replace(
        "import torch\n", "import torch\nimport sitecustomize\nimport usercustomize\n", 1)
    model += "\n\nclass Custom(Base):\n    def __init__(self):\n        super().__init__()\n" \
             "        self.a = sitecustomize.thing()\n        self.b = usercustomize.HKEY_CURRENT_USER\n"
    (repo / "net.py").write_text(model)
    done = torchlint(["check", "--no-cache", "net.py"], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert ("net.py", BASE_LINE + 2, "TL101") in findings(done.stdout), done.stdout + done.stderr


# -- 7: jedi's own project file -------------------------------------------------------------------

def test_a_jedi_project_file_in_the_repository_is_not_honoured(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    planted = repo / "planted"
    sourceless(planted / "winreg.pyc", planted_module(marker, "winreg"))
    (planted / "jedionly.py").write_text(planted_module(marker, "jedionly"))
    evil = marker_script(repo / "evil-python", marker)
    (repo / ".jedi").mkdir()
    # jedi's format (jedi.api.project.Project.load): [version, the Project's keyword arguments].
    (repo / ".jedi" / "project.json").write_text(json.dumps([1, {
        "path": str(repo), "environment_path": str(evil), "load_unsafe_extensions": True,
        "sys_path": [str(planted)], "added_sys_path": [str(planted)], "smart_sys_path": True, "django": False}]))
    (repo / "model.py").write_text(model_importing("winreg") + "\n\nimport jedionly\nTHING = jedionly.thing()\n")
    done = torchlint(["check", "--no-cache", "model.py"], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert ("model.py", JEDI_LINE, "TL101") in findings(done.stdout), done.stdout + done.stderr


# -- 8: a notebook naming its own Python ----------------------------------------------------------

def test_a_notebooks_kernel_and_interpreter_are_never_run(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    evil = str(marker_script(repo / "kernel-python", tmp_path / "MARKER"))
    model = model_importing("os").replace("os.thing()", "os.getpid()").replace("os.HKEY_CURRENT_USER", "os.sep")
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": model.splitlines(True)}],
        "metadata": {
            "kernelspec": {"name": "evil", "display_name": "Python (evil)", "language": "python",
                           "argv": [evil, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                           "env": {"PYTHONSTARTUP": evil}, "interpreter": evil, "path": evil},
            "language_info": {"name": "python", "version": sys.version.split()[0], "file_extension": ".py",
                              "mimetype": "text/x-python", "interpreter": evil, "executable": evil},
            "interpreter": {"hash": "0" * 40, "path": evil},
            "vscode": {"interpreter": {"hash": "0" * 40, "path": evil}},
            "jupyter": {"python": evil, "kernel": evil},
        },
        "nbformat": 4, "nbformat_minor": 5,
    }
    (repo / "nb.ipynb").write_text(json.dumps(notebook, indent=1))
    done = torchlint(["check", "--no-cache", "nb.ipynb"], repo, tmp_path)
    assert_no_marker(tmp_path, done)
    assert ("nb.ipynb:cell 1", JEDI_LINE, "TL101") in findings(done.stdout), done.stdout + done.stderr


# -- 9: what torchlint and parso keep on disk -------------------------------------------------------

class _Planted:
    """Pickled, it runs ``code`` when loaded."""

    def __init__(self, code: str):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


# HELPER_MADE with its helper in a module of its own: the answer jedi gives depends on that file.
HELPERS = "import torch\n\n\n" + HELPER_MADE[HELPER_MADE.index("def make_weight"):HELPER_MADE.index("class Scaled")]
CACHED_MODEL = "from torch import nn\nfrom helpers import make_weight\n\n\n" + HELPER_MADE[HELPER_MADE.index("class Scaled"):]


def test_the_disk_caches_never_execute_what_they_read(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    (repo / "helpers.py").write_text(HELPERS)
    (repo / "model.py").write_text(CACHED_MODEL)
    cache = tmp_path / "torchlint-cache"
    user_cache = tmp_path / "xdg"  # jedi's user-level folder is $XDG_CACHE_HOME/jedi
    env = {"XDG_CACHE_HOME": str(user_cache)}

    first = torchlint(["check", "."], repo, tmp_path, **env)
    cached_line = 1 + CACHED_MODEL.splitlines().index("        self.w = make_weight(3)")
    assert findings(first.stdout) == [("model.py", cached_line, "TL101")], first.stdout + first.stderr
    entries = sorted(cache.rglob("*.json"))
    assert entries, "the first run stored no answers in %s" % cache
    # parso's pickles: in jedi's user-level folder, named by the file's path; none in the repository.
    helper_pickles = sorted(user_cache.glob("jedi/*/*-%s.pkl" % hashlib.sha256(
        str(repo / "helpers.py").encode("utf-8")).hexdigest()))
    assert helper_pickles, "no pickle of helpers.py in %s: %s" % (user_cache, sorted(user_cache.rglob("*")))
    assert not [p for p in repo.rglob("*") if p.suffix == ".pkl"]

    # Where an answer is, a pickle that runs code; where a repository could keep parso's pickles
    # (a .jedi or __pycache__ folder, jedi's cache layout), the same.
    payload = pickle.dumps(_Planted(marker_code(marker, "pickle loaded")))
    for entry in entries:
        entry.write_bytes(payload)
    tag = helper_pickles[0].parent.name  # CPython-311-33
    for folder in (".jedi", ".jedi/" + tag, "__pycache__", "__pycache__/" + tag, ".cache/jedi/" + tag,
                   ".cache/parso/" + tag):
        (repo / folder).mkdir(parents=True, exist_ok=True)
        for pickled in helper_pickles:
            (repo / folder / pickled.name).write_bytes(payload)

    second = torchlint(["check", "."], repo, tmp_path, **env)
    assert_no_marker(tmp_path, second)
    assert findings(second.stdout) == findings(first.stdout), second.stdout + second.stderr
    # The planted entries were read (and, not being answers, replaced by the second run's).
    for entry in entries:
        assert json.loads(entry.read_bytes())["answers"] is not None

    third = torchlint(["check", "--no-cache", "."], repo, tmp_path, **env)  # jedi reads helpers.py again
    assert_no_marker(tmp_path, third)
    assert findings(third.stdout) == findings(first.stdout), third.stdout + third.stderr


def test_with_no_cache_no_pickle_of_jedis_user_folder_is_read_or_written(tmp_path):
    """Checked with the disk caches on, parso's pickles come from jedi's user-level folder, as
    trusted as your home: a pickle planted there runs when loaded. ``--no-cache`` loaded it too.
    Now it reads nothing from that folder and writes nothing to it: a first run leaves no folder,
    a run over a planted pickle never loads it and changes nothing there."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "helpers.py").write_text(HELPERS)
    (repo / "model.py").write_text(CACHED_MODEL)
    user_cache = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(user_cache)}
    cached_line = 1 + CACHED_MODEL.splitlines().index("        self.w = make_weight(3)")

    uncached = torchlint(["check", "--no-cache", "."], repo, tmp_path, **env)
    assert findings(uncached.stdout) == [("model.py", cached_line, "TL101")], uncached.stdout + uncached.stderr
    assert not (user_cache / "jedi").exists(), sorted(user_cache.rglob("*"))

    torchlint(["check", "."], repo, tmp_path, **env)  # the caches on: parso's pickles kept
    (helper_pickle,) = user_cache.glob("jedi/*/*-%s.pkl" % hashlib.sha256(
        str(repo / "helpers.py").encode("utf-8")).hexdigest())
    helper_pickle.write_bytes(pickle.dumps(_Planted(marker_code(tmp_path / "MARKER", "pickle loaded"))))
    kept = {path: path.stat().st_mtime_ns for path in user_cache.rglob("*")}
    uncached = torchlint(["check", "--no-cache", "."], repo, tmp_path, **env)
    assert_no_marker(tmp_path, uncached)
    assert findings(uncached.stdout) == [("model.py", cached_line, "TL101")], uncached.stdout + uncached.stderr
    assert {path: path.stat().st_mtime_ns for path in user_cache.rglob("*")} == kept
    # The planted pickle is one parso loads: with the caches on (and model.py changed, so that its
    # answers are asked of jedi again), it runs.
    with open(repo / "model.py", "a") as model:
        model.write("# changed\n")
    torchlint(["check", "."], repo, tmp_path, **env)
    assert (tmp_path / "MARKER").read_text() == "pickle loaded\n"


# -- 10: --fix on standard input never writes a file -------------------------------------------------

STDIN_MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.zeros(3)

        def forward(self, x):
            return x * self.w
""")


@pytest.mark.parametrize("where", ["relative", "absolute", "existing"])
def test_fixing_standard_input_never_writes_the_file_it_names(tmp_path, where):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "model.py").write_text(STDIN_MODEL)
    elsewhere = tmp_path / "elsewhere" / "elsewhere.py"
    if where == "relative":
        named, target = "../outside.py", tmp_path / "outside.py"
    else:
        named = target = elsewhere
        if where == "existing":
            elsewhere.parent.mkdir()
            elsewhere.write_text("ORIGINAL\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "torchlint-cache" not in p.parts)
    done = torchlint(["check", "--fix", "--unsafe-fixes", "--stdin-filename", str(named)], repo, tmp_path,
                     stdin=STDIN_MODEL)
    assert done.returncode == 0, done.stderr
    assert "nn.Parameter(torch.zeros(3))" in done.stdout and done.stdout != STDIN_MODEL  # the fixed text
    assert "1 fixed" in done.stderr
    if where == "existing":
        assert target.read_text() == "ORIGINAL\n"
    else:
        assert not target.exists()
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "torchlint-cache" not in p.parts)
    assert after == before
    assert (repo / "model.py").read_text() == STDIN_MODEL


# -- 11: verification is off in an untrusted workspace ---------------------------------------------

def test_the_extension_keeps_verification_off_in_an_untrusted_workspace():
    """VS Code's extension manifest: verification runs the workspace's code, so the command is
    disabled and hidden until the workspace is trusted (the lens is dropped by the client,
    client-vscode/src/settings.ts, and verify.ts refuses to run; both have unit tests in
    client-vscode/src/test)."""
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    untrusted = package["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    assert "torchlint.interpreter" in untrusted["restrictedConfigurations"]
    (verify,) = [c for c in package["contributes"]["commands"] if c["command"] == "torchlint.verifyModule"]
    assert "isWorkspaceTrusted" in verify["enablement"] and "!isWorkspaceTrusted" not in verify["enablement"]
    menus = [entry for entries in package["contributes"]["menus"].values() for entry in entries
             if entry.get("command") == "torchlint.verifyModule"]
    assert menus, "no menu entry for torchlint.verifyModule"
    for entry in menus:
        assert "isWorkspaceTrusted" in entry.get("when", "") and "!isWorkspaceTrusted" not in entry["when"], entry


# -- finders that import, and standard modules with side effects ------------------------------------

@pytest.mark.parametrize("front_end", ["cli", "server"])
async def test_a_setuptools_package_in_the_repository_is_never_imported(tmp_path, front_end):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    (repo / "setuptools" / "_distutils").mkdir(parents=True)
    (repo / "setuptools" / "__init__.py").write_text(marker_code(marker, "setuptools imported"))
    (repo / "setuptools" / "_distutils" / "__init__.py").write_text(marker_code(marker, "_distutils imported"))
    (repo / "model.py").write_text(model_importing("distutils"))
    if front_end == "cli":
        done = torchlint(["check", "--no-cache", "model.py"], repo, tmp_path)
        assert ("model.py", JEDI_LINE, "TL101") in findings(done.stdout), done.stdout + done.stderr
        assert_no_marker(tmp_path, done)
    else:
        await assert_the_server_imports_nothing(repo, tmp_path, "distutils")


def test_a_repository_cannot_make_torchlint_import_a_standard_module_for_its_side_effects(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARKER"
    browser = tmp_path / "browser"
    browser.write_text('#!/bin/sh\necho "browser ran: $*" >> "%s"\n' % marker)
    browser.chmod(0o755)
    for name in ("antigravity", "this"):
        sourceless(repo / (name + ".pyc"), "HKEY_CURRENT_USER = 1\n\n\ndef thing():\n    return 1\n")
    (repo / "model.py").write_text(model_importing("antigravity"))
    (repo / "other.py").write_text(model_importing("this"))
    done = torchlint(["check", "--no-cache", "--format", "json", "model.py", "other.py"], repo, tmp_path,
                     BROWSER=str(browser))
    assert_no_marker(tmp_path, done)
    json.loads(done.stdout)  # nothing but the report on stdout

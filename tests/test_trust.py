"""Interpreter trust and timeouts: a repository never gets its interpreter run, a hanging
interpreter never hangs torchlint.

Hostile interpreters here are shell scripts: one writes a marker file (then runs the real
Python, so that running it "works"), one sleeps. No marker may appear unless the user opted
in outside the repository.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lsprotocol import types

from torchlint import environments as envs
from torchlint.engine import check_source
from torchlint.inference.layer import JediInference
from torchlint.lsp.inference_layers import InferenceLayers
from torchlint.verify.runner import resolve_python

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import (CONFIG, open_document, replace_text, serving, wait_for,  # noqa: E402
                         wait_for_publish)

ROOT = Path(__file__).resolve().parent.parent
VERSION = "%d.%d" % sys.version_info[:2]
CLI_TIMEOUT = 180  # the bound on every torchlint process a test starts

MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.zeros(3)
""")
# Net's base lives only in the repository's virtual environment: only jedi reading that
# environment's site-packages knows Net is a Module.
VENV_MODEL = textwrap.dedent("""\
    import torch
    from mybase import Base


    class Net(Base):
        def __init__(self):
            super().__init__()
            self.w = torch.zeros(3)
""")


def marker_script(path: Path, marker: Path) -> Path:
    """An "interpreter" that leaves a marker, then runs the real Python."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho ran >> "%s"\nexec "%s" "$@"\n' % (marker, os.path.realpath(sys.executable)))
    path.chmod(0o755)
    return path


def sleeping_script(path: Path) -> Path:
    """An "interpreter" that never answers (not exec: the sleep is a child holding the pipes)."""
    path.write_text("#!/bin/sh\nsleep 600\n")
    path.chmod(0o755)
    return path


def hostile_repo(tmp_path: Path) -> Path:
    """A repository whose pyproject.toml names ./evil, a marker-writing script."""
    repo = tmp_path / "repo"
    repo.mkdir()
    marker_script(repo / "evil", tmp_path / "MARKER")
    (repo / "pyproject.toml").write_text('[tool.torchlint]\npython = "./evil"\n')
    (repo / "model.py").write_text(MODEL)
    return repo


def fake_venv(root: Path, marker: Path, system_site: bool = False) -> Path:
    """A virtual environment made by hand: pyvenv.cfg, site-packages with a Module base class,
    and a bin/python that writes ``marker`` when run."""
    site = root / "lib" / ("python" + VERSION) / "site-packages"
    (site / "mybase").mkdir(parents=True)
    (site / "mybase" / "__init__.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    (root / "pyvenv.cfg").write_text(
        "home = %s\ninclude-system-site-packages = %s\nversion = %s\n"
        % (os.path.join(sys.base_prefix, "bin"), "true" if system_site else "false", sys.version.split()[0]))
    return marker_script(root / "bin" / "python", marker)


def torchlint(args, cwd: Path, **env):
    environ = dict(os.environ, PYTHONPATH=str(ROOT / "server"), **env)
    for name in (envs.PYTHON_ENV, envs.TRUST_ENV, "VIRTUAL_ENV"):
        if name not in env:
            environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=str(cwd), env=environ,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT)


def codes(output: str):
    return sorted(line.split()[1] for line in output.splitlines() if ": TL" in line)


# -- the command line --------------------------------------------------------------------------

def test_check_never_runs_the_interpreter_a_repository_names(tmp_path):
    repo = hostile_repo(tmp_path)
    done = torchlint(["check", "."], repo)
    assert not (tmp_path / "MARKER").exists()
    assert done.returncode == 1 and codes(done.stdout) == ["TL101"]
    warning = [line for line in done.stderr.splitlines() if "./evil" in line]
    assert len(warning) == 1 and "--trust-workspace" in warning[0] and "ignored" in warning[0]


@pytest.mark.parametrize("opt_in", [["--trust-workspace"], []])
def test_the_users_opt_in_runs_it(tmp_path, opt_in):
    repo = hostile_repo(tmp_path)
    env = {} if opt_in else {envs.TRUST_ENV: "1"}
    done = torchlint(["check", *opt_in, "."], repo, **env)
    assert (tmp_path / "MARKER").exists()
    assert done.returncode == 1 and codes(done.stdout) == ["TL101"]
    assert "ignored" not in done.stderr


def test_a_repository_virtualenv_is_read_not_run(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    fake_venv(repo / "env", tmp_path / "MARKER")
    (repo / "pyproject.toml").write_text('[tool.torchlint]\npython = "env/bin/python"\n')
    (repo / "net.py").write_text(VENV_MODEL)
    names_only = torchlint(["check", "--no-infer", "net.py"], repo)
    assert codes(names_only.stdout) == []  # names alone cannot see that Base is a Module
    for extra in ([], ["--trust-workspace"]):
        done = torchlint(["check", "-v", *extra, "net.py"], repo)
        assert codes(done.stdout) == ["TL101"], done.stderr
        assert "read, not run" in done.stderr
        assert not (tmp_path / "MARKER").exists()


def test_a_hanging_interpreter_times_out_and_check_goes_on(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "model.py").write_text(MODEL)
    hang = sleeping_script(tmp_path / "hang")
    done = torchlint(["check", "--python", str(hang), "."], repo, **{envs.TIMEOUT_ENV: "2"})
    assert done.returncode == 1 and codes(done.stdout) == ["TL101"]
    assert "did not answer within 2 s" in done.stderr and "torchlint's own Python" in done.stderr


# -- choosing ----------------------------------------------------------------------------------

def test_choice_order_and_trust(tmp_path):
    marker = tmp_path / "MARKER"
    user = marker_script(tmp_path / "user" / "python", marker)
    repo_python = marker_script(tmp_path / "repo" / "evil", marker)
    config = tmp_path / "repo" / "pyproject.toml"
    env = {"VIRTUAL_ENV": str(tmp_path / "nowhere")}

    choice = envs.choose_interpreter(explicit=str(user), configured="evil", config_file=config, environ=env)
    assert (choice.interpreter.path, choice.interpreter.source, choice.warnings) == (str(user), "--python", ())
    choice = envs.choose_interpreter(configured="evil", config_file=config,
                                     environ=dict(env, TORCHLINT_PYTHON=str(user)))
    assert choice.interpreter.source == envs.PYTHON_ENV and choice.interpreter.trusted
    # The repository's: relative to its pyproject.toml, passed over with a warning, unless trusted.
    choice = envs.choose_interpreter(configured="evil", config_file=config, environ=env)
    assert choice.interpreter.is_own and len(choice.warnings) == 1 and "--trust-workspace" in choice.warnings[0]
    for trusted in (envs.choose_interpreter(configured="evil", config_file=config, environ=env,
                                            trust_workspace=True),
                    envs.choose_interpreter(configured="evil", config_file=config,
                                            environ=dict(env, TORCHLINT_TRUST_WORKSPACE="1"))):
        assert trusted.interpreter.path == str(repo_python) and trusted.interpreter.trusted
    assert not marker.exists()  # choosing runs nothing


def test_a_repository_virtualenv_is_read_for_inference_but_never_run_by_verify(tmp_path):
    python = fake_venv(tmp_path / "repo" / "env", tmp_path / "MARKER")
    config = tmp_path / "repo" / "pyproject.toml"
    choice = envs.choose_interpreter(configured="env/bin/python", config_file=config, environ={})
    assert choice.interpreter.path == str(python) and not choice.interpreter.trusted
    assert choice.interpreter.venv is not None and choice.warnings == ()
    warnings = []
    chosen = resolve_python(None, "env/bin/python", config, warn=warnings.append)
    assert chosen == sys.executable and len(warnings) == 1 and "--trust-workspace" in warnings[0]
    assert resolve_python(None, "env/bin/python", config, trust_workspace=True) == str(python)
    assert not (tmp_path / "MARKER").exists()


def test_reading_a_virtualenv(tmp_path):
    python = fake_venv(tmp_path / "env", tmp_path / "MARKER", system_site=True)
    site = tmp_path / "env" / "lib" / ("python" + VERSION) / "site-packages"
    (tmp_path / "src" / "editable_pkg").mkdir(parents=True)
    (tmp_path / "mapped" / "mapped_pkg").mkdir(parents=True)
    (site / "project.pth").write_text("# a comment\n../../../../src\nimport os; open('%s', 'w')\nmissing\n"
                                      % (tmp_path / "PTH_RAN"))
    (site / "__editable___mapped_0_1_finder.py").write_text(
        "MAPPING = {'mapped_pkg': %r}\nraise SystemExit('never imported')\n" % str(tmp_path / "mapped" / "mapped_pkg"))
    venv = envs.read_virtualenv(str(python))
    assert venv.version == VERSION and venv.root == str(tmp_path / "env")
    paths = list(venv.sys_path)
    assert str(site) in paths and str(tmp_path / "src") in paths and str(tmp_path / "mapped") in paths
    assert str(tmp_path / "env" / "missing") not in paths
    stdlib = os.path.join(sys.base_prefix, "lib", "python" + VERSION)
    assert paths.index(stdlib) < paths.index(str(site))
    assert not (tmp_path / "PTH_RAN").exists() and not (tmp_path / "MARKER").exists()
    assert envs.read_virtualenv(str(tmp_path / "no" / "python")) is None


def test_reading_a_virtualenv_never_blocks_on_a_fifo(tmp_path):
    python = fake_venv(tmp_path / "env", tmp_path / "MARKER")
    os.mkfifo(tmp_path / "env" / "lib" / ("python" + VERSION) / "site-packages" / "fifo.pth")
    other = tmp_path / "other" / "bin"
    other.mkdir(parents=True)
    os.mkfifo(tmp_path / "other" / "pyvenv.cfg")
    script = ("import sys; from torchlint.environments import read_virtualenv as r; "
              "print(r(sys.argv[1]) is not None, r(sys.argv[2]) is None)")
    done = subprocess.run([sys.executable, "-c", script, str(python), str(other / "python")], timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "server")), capture_output=True, text=True)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_timeout_setting():
    assert envs.interpreter_timeout({}) == envs.DEFAULT_TIMEOUT
    assert envs.interpreter_timeout({envs.TIMEOUT_ENV: "2.5"}) == 2.5
    assert envs.interpreter_timeout({envs.TIMEOUT_ENV: "soon"}) == envs.DEFAULT_TIMEOUT


# -- the jedi layer: a call that hangs ----------------------------------------------------------

# Decorated: names alone do not read make_weight, jedi does (through torch.no_grad()). Same lines.
HELPER_MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    @torch.no_grad()
    def make_weight(n):
        return torch.randn(n, n)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = make_weight(3)
""")


def stop_interpreter(layer: JediInference) -> None:
    """Freeze the layer's jedi subprocess: its next call hangs."""
    os.kill(layer.environment._subprocess._process.pid, signal.SIGSTOP)


def test_a_layer_whose_interpreter_hangs_is_replaced_once(tmp_path, monkeypatch):
    # Answers on disk would spare jedi the questions this test needs it to hang on.
    monkeypatch.setenv("TORCHLINT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "model.py").write_text(HELPER_MODEL)
    warnings = []
    layers = InferenceLayers(report=lambda message: None, warn=warnings.append)
    interpreter = envs.own_interpreter()
    layer = layers.layer(str(tmp_path), interpreter)
    assert layer.torch_available and layer._warmed.wait(300)
    with layers.lock:  # the background warm-up has let go
        pass
    layer.environment.watchdog.timeout = 1.0
    stop_interpreter(layer)
    with layers.lock:
        result = check_source(HELPER_MODEL, str(tmp_path / "model.py"), inference=layer)
    assert layer.failure is not None and "did not answer within 1 s" in layer.failure
    assert {f.code for f in result.findings} <= {"TL101"}  # what names could tell, nothing more
    fresh = layers.layer(str(tmp_path), interpreter)
    assert fresh is not layer and fresh.failure is None and fresh._warmed.wait(300)
    with layers.lock:
        result = check_source(HELPER_MODEL, str(tmp_path / "model.py"), inference=fresh)
    assert [(f.range.start.line, f.code) for f in result.findings] == [(12, "TL101")]  # jedi saw make_weight
    assert len(warnings) == 1 and "restarted" in warnings[0]
    assert layers.layer(str(tmp_path), interpreter) is fresh

    fresh.environment.watchdog.timeout = 1.0
    stop_interpreter(fresh)
    changed = HELPER_MODEL + "\n# edited: not in the cache the fresh layer just filled\n"
    with layers.lock:
        check_source(changed, str(tmp_path / "model.py"), inference=fresh)
    assert layers.layer(str(tmp_path), interpreter) is None  # second timeout: names only
    assert len(warnings) == 2 and "off" in warnings[1]


# -- the language server -----------------------------------------------------------------------

def server(root: Path, options=None, **env):
    return serving(root, dict(CONFIG.server_env, **env), options)


def warnings_about(client, text: str):
    return [m.message for m in client.messages if text in m.message]


async def test_the_server_never_runs_the_interpreter_a_repository_names(tmp_path):
    repo = hostile_repo(tmp_path)
    uri = (repo / "model.py").as_uri()
    async with server(repo) as client:
        open_document(client, uri, MODEL)
        await wait_for(lambda: warnings_about(client, "./evil"), timeout=60, what="the trust warning")
        await wait_for_publish(client, uri, version=1)
        assert not (tmp_path / "MARKER").exists()
        (message,) = warnings_about(client, "./evil")
        assert "trustWorkspaceInterpreter" in message

        seen = len(client.publishes)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"torchlint": {"select": ["TL1"]}}))
        await wait_for_publish(client, uri, since=seen, timeout=60)
        replace_text(client, uri, MODEL, MODEL + "\n", version=2)
        await wait_for_publish(client, uri, version=2, timeout=60)
        await asyncio.sleep(1)  # the jedi wave of version 2 too
        assert not (tmp_path / "MARKER").exists()
        assert len(warnings_about(client, "./evil")) == 1  # said once


async def test_the_servers_trust_setting_runs_it(tmp_path):
    repo = hostile_repo(tmp_path)
    async with server(repo, {"trustWorkspaceInterpreter": True}) as client:
        open_document(client, (repo / "model.py").as_uri(), MODEL)
        await wait_for(lambda: (tmp_path / "MARKER").exists(), timeout=60, what="the trusted interpreter")
        assert not warnings_about(client, "./evil")


async def test_the_server_goes_on_after_an_interpreter_hangs(tmp_path):
    (tmp_path / "model.py").write_text(HELPER_MODEL)
    hang = sleeping_script(tmp_path / "hang")
    uri = (tmp_path / "model.py").as_uri()
    async with server(tmp_path, {"interpreter": str(hang)}, **{envs.TIMEOUT_ENV: "2"}) as client:
        open_document(client, uri, HELPER_MODEL)
        await wait_for(lambda: warnings_about(client, "cannot use"), timeout=60, what="the timeout warning")
        (warning,) = warnings_about(client, "cannot use")
        assert str(hang) in warning and "did not answer within 2 s" in warning and "torchlint's own Python" in warning
        # The next analysis works (with names at least; jedi too when torch loads within the timeout).
        since = len(client.publishes)
        replace_text(client, uri, HELPER_MODEL, HELPER_MODEL + "\n", version=2)
        published = await wait_for_publish(client, uri, version=2, since=since, timeout=60)
        assert published.version == 2
        assert len(warnings_about(client, "cannot use")) == 1  # said once

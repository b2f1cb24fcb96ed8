"""Shared by the tests that install torchlint as a user would (tests/test_install.py,
tests/test_precommit.py): a copy of the checkout, commands with a time limit, a clean virtual
environment, and a language-server handshake over stdio.

Everything runs on a copy of the checkout in a temporary folder, so a build never writes
`build/` or `*.egg-info` into the working tree others are using. pip installs the dependencies
from the configured package index (pygls, jedi, pathspec: small, pure-Python wheels)."""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import venv
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
VERSION_FILE = ROOT / "server" / "torchlint" / "__init__.py"

# Limits that only stop a hung command; a busy 2-core machine needs a fraction of them.
BUILD_LIMIT = 300
INSTALL_LIMIT = 300
RUN_LIMIT = 180


def bin_dir(environment: Path) -> Path:
    return environment / ("Scripts" if os.name == "nt" else "bin")


def clean_env(**extra: str) -> Dict[str, str]:
    """The environment without this test run's virtualenv and PYTHONPATH: what a user's shell
    has, so nothing of .venv leaks into the clean installs."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    own = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != own)
    env.update(extra)
    return env


def run(command: Sequence, limit: int = RUN_LIMIT, cwd: Optional[Path] = None, env=None,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run a command in its own process group, killed whole when it runs past ``limit``."""
    command = [str(part) for part in command]
    child = subprocess.Popen(command, cwd=cwd, env=env if env is not None else clean_env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=os.name == "posix")
    try:
        out, err = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        out, err = child.communicate()
        raise AssertionError("%s ran past %d s\n%s\n%s" % (" ".join(command), limit, out[-3000:], err[-3000:]))
    finally:
        _kill_group(child)
    result = subprocess.CompletedProcess(command, child.returncode, out, err)
    if check and child.returncode != 0:
        raise AssertionError("%s exited %d\n--- stdout\n%s\n--- stderr\n%s"
                             % (" ".join(command), child.returncode, out[-4000:], err[-4000:]))
    return result


def _kill_group(child: subprocess.Popen) -> None:
    if os.name != "posix":
        if child.poll() is None:
            child.kill()
        return
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def checkout_files() -> List[str]:
    """The files a clone of this checkout has, with the working tree's uncommitted changes and
    new files (git's tracked and untracked-but-not-ignored files)."""
    if shutil.which("git") and (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, timeout=60, check=True).stdout
        return sorted({name for name in listed.decode("utf-8").split("\0") if name and (ROOT / name).is_file()})
    skip = {".git", ".venv", "node_modules", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
    return sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
                  if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
                  and not p.name.endswith((".pyc", ".vsix")) and ".egg-info" not in p.as_posix())


def copy_checkout(target: Path) -> Path:
    """A copy of the checkout in ``target`` (what `git clone` of it would give)."""
    for name in checkout_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination)
    return target


def git(repository: Path, *arguments: str) -> str:
    env = clean_env(GIT_AUTHOR_NAME="torchlint tests", GIT_AUTHOR_EMAIL="tests@example.invalid",
                    GIT_COMMITTER_NAME="torchlint tests", GIT_COMMITTER_EMAIL="tests@example.invalid",
                    GIT_CONFIG_NOSYSTEM="1", HOME=str(repository))
    return run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *arguments],
               60, cwd=repository, env=env).stdout


def make_git_repository(folder: Path) -> str:
    """``git init`` + commit everything in ``folder``; returns the commit."""
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "snapshot")
    return git(folder, "rev-parse", "HEAD").strip()


def new_venv(folder: Path) -> Path:
    """A clean virtual environment (no system site-packages) with pip."""
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    return folder


def pip_install(environment: Path, *requirements: str) -> None:
    run([bin_dir(environment) / "python", "-m", "pip", "install", "-q", *requirements], INSTALL_LIMIT)


# -- the language server over stdio --------------------------------------------------------------
def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_frames(stream, into: "queue.Queue") -> None:
    try:
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                key, _, value = line.decode("ascii").partition(":")
                headers[key.strip().lower()] = value.strip()
            into.put(json.loads(stream.read(int(headers["content-length"])).decode("utf-8")))
    finally:
        into.put(None)


def lsp_handshake(command: Sequence, cwd: Path, limit: int = 60, env=None) -> dict:
    """Start a server, send ``initialize``, then ``shutdown`` and ``exit``: returns the
    initialize result; fails unless the server answers each request and exits with 0."""
    server = subprocess.Popen([str(part) for part in command], cwd=cwd, env=env if env is not None else clean_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=os.name == "posix")
    messages: "queue.Queue" = queue.Queue()
    threading.Thread(target=_read_frames, args=(server.stdout, messages), daemon=True).start()

    def answer(request_id: int) -> dict:
        while True:
            try:
                message = messages.get(timeout=limit)
            except queue.Empty:
                raise AssertionError("no answer to request %d in %d s" % (request_id, limit))
            if message is None:
                raise AssertionError("the server closed stdout before answering request %d: %s"
                                     % (request_id, server.stderr.read().decode("utf-8", "replace")[-3000:]))
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message
                return message

    try:
        server.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": cwd.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": cwd.as_uri(), "name": cwd.name}]}}))
        server.stdin.flush()
        initialized = answer(1)["result"]
        server.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        server.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        server.stdin.flush()
        answer(2)
        server.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.close()
        assert server.wait(timeout=limit) == 0, server.stderr.read().decode("utf-8", "replace")[-3000:]
        return initialized
    finally:
        _kill_group(server)
        server.wait()
        for stream in (server.stdout, server.stderr):
            stream.close()

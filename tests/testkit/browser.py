"""Shared by the end-to-end tests that drive an editor in headless Chromium (tests/e2e_vscode,
tests/e2e_jupyter): where their setup scripts install the tools, and a driver command run in its
own process group, ended whole whatever happens."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# tests/e2e_vscode/setup.sh installs code-server and playwright-core here, tests/e2e_jupyter/
# setup.sh JupyterLab's virtual environment; the drivers read the same variables.
CACHE = Path(os.environ.get("TORCHLINT_E2E_CACHE") or Path.home() / ".cache" / "torchlint-e2e")
CHROMIUM = os.environ.get("TORCHLINT_E2E_CHROMIUM", "/usr/bin/chromium")
PLAYWRIGHT_CORE = CACHE / "driver" / "node_modules" / "playwright-core" / "package.json"
GRACE = 20  # seconds between SIGTERM (the driver then kills its server's own group) and SIGKILL


def run(command, limit, env=None):
    """Run a command in its own session; on timeout end its whole process group."""
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _end_group(child)
        output, _ = child.communicate()
        pytest.fail("%s ran past %d s; its process group was killed\n%s" % (" ".join(command), limit, output[-6000:]))
    finally:
        _end_group(child)
    assert child.returncode == 0, "%s exited %d:\n%s" % (" ".join(command), child.returncode, output[-6000:])
    return output


def _end_group(child):
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        if wait is not None:
            try:
                child.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass


def fail_without(setup: str, *needed: Path) -> None:
    """Fail (never skip: a missing tool must not pass silently) naming the setup to run."""
    missing = [str(path) for path in needed if not path.exists()]
    if missing:
        pytest.fail("the end-to-end test needs %s: run bash %s once" % (", ".join(missing), setup))

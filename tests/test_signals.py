"""Nothing swallows a stop: SIGTERM and SIGINT end a `torchlint check` (exit 143 / 130) and a
`--fix` run writes nothing after them, wherever they land (inside a rule, or inside a ``__del__``
where Python itself swallows the exception a handler raises); the per-file inference budget
applies however the time was spent (a garbage collection, a thread that is not the main one).

Every child process is bounded by a timeout; the children get SIGINT's default action so that
the tests also hold when pytest was started with SIGINT ignored (a background job).
"""
from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testkit.support import default_sigint
from test_hostile_files import MASK  # one finding with a safe fix: --fix would rewrite it
from test_speed_features import ask, project
from torchlint.fixing import fix_text

TIMEOUT = 120  # seconds: a hang fails the test instead of blocking the suite

# The CLI in a child whose first rule sends the signal to its own process while it runs:
# "raise" lets the handler's exception rise through the rule; "del" sends it from a __del__ that
# runs inside the rule, where Python prints "Exception ignored" and carries on.
CHILD = '''
import os, sys
from torchlint import cli
from torchlint.rules import ALL_RULES

where, signum = sys.argv[1], int(sys.argv[2])


class SendsWhenDropped:
    def __del__(self):
        os.kill(os.getpid(), signum)
        for _ in range(100000):  # the handler runs in here, and what it raises is swallowed
            pass


rule = ALL_RULES[0]
real = type(rule).check


def check(self, ctx):
    if where == "del":
        SendsWhenDropped()
    else:
        os.kill(os.getpid(), signum)
    return real(self, ctx)


type(rule).check = check
sys.exit(cli.main(sys.argv[3:]))
'''

STOPS = [(signal.SIGTERM, 128 + signal.SIGTERM, "torchlint: terminated"),
         (signal.SIGINT, 128 + signal.SIGINT, "torchlint: interrupted")]


def run_signalled(tmp_path: Path, where: str, signum: int, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, where, str(int(signum)), "check", "--no-infer", *flags,
                           "model.py"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=default_sigint)


@pytest.mark.parametrize("where", ["raise", "del"])
@pytest.mark.parametrize("signum, status, message", STOPS)
@pytest.mark.parametrize("flags", [(), ("--fix",), ("--fix", "--unsafe-fixes")])
def test_a_signal_during_a_rule_stops_the_run_and_writes_nothing(tmp_path, where, signum, status, message, flags):
    path = tmp_path / "model.py"
    path.write_text(MASK)
    assert fix_text(MASK, str(path)).text != MASK  # there is a fix that --fix would write
    proc = run_signalled(tmp_path, where, signum, *flags)
    assert proc.returncode == status, proc.stderr
    assert message in proc.stderr and "internal error" not in proc.stderr
    assert proc.stdout == ""  # no partial report
    assert path.read_text() == MASK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]  # no temporary copy left


def test_without_a_signal_the_same_child_fixes_the_file(tmp_path):
    # The harness itself: with the rule left alone the run goes on and the fix is written.
    path = tmp_path / "model.py"
    path.write_text(MASK)
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-infer", "--fix", "model.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=default_sigint)
    assert proc.returncode in (0, 1), proc.stderr
    assert path.read_text() == fix_text(MASK, str(path)).text != MASK


# -- the inference budget ------------------------------------------------------------------------

class SlowCollections:
    """A garbage-collector callback that spends ``seconds`` in the first collection it sees."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.spent = False

    def __call__(self, phase, info):
        if phase == "start" and not self.spent:
            self.spent = True
            time.sleep(self.seconds)

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc_info):
        gc.callbacks.remove(self)


def test_a_budget_spent_in_a_garbage_collection_still_applies(tmp_path, layers, monkeypatch):
    root = project(tmp_path)
    layer = layers(root, budget=0.5)
    layer.warm()
    # The question collects garbage first, and that collection outlasts the file's budget: a
    # timer raising into the callback would be swallowed by Python and the question answered.
    from torchlint.inference import layer as inference_module
    script_for = inference_module.FileInference._script_for

    def collecting_first(self, *args, **kwargs):
        gc.collect()
        return script_for(self, *args, **kwargs)

    monkeypatch.setattr(inference_module.FileInference, "_script_for", collecting_first)
    with SlowCollections(1.0) as slow:
        value, inference = ask(layer, root / "model.py")
    assert slow.spent
    assert value is None and inference.note is not None and "budget" in inference.note


def test_the_budget_applies_in_a_thread_that_is_not_the_main_one(tmp_path, layers):
    root = project(tmp_path)
    layer = layers(root, budget=1e-6)
    layer.warm()
    answers = []
    worker = threading.Thread(target=lambda: answers.append(ask(layer, root / "model.py")))
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive()
    ((value, inference),) = answers
    assert value is None and inference.note is not None and "budget" in inference.note
    layer.budget = None  # with time to spare, the same thread kind gets the answer
    worker = threading.Thread(target=lambda: answers.append(ask(layer, root / "model.py")))
    worker.start()
    worker.join(TIMEOUT)
    value, inference = answers[-1]
    assert value is not None and inference.note is None


# A run stopped by a signal while a thread that Python's exit would join is still waiting (the
# process pool's manager thread, stuck on a pipe no worker reads any more, is such a thread).
STOPPED_WITH_A_THREAD_LEFT = '''
import sys, threading
from torchlint import cli
from torchlint.cli import check, signals

threading.Thread(target=threading.Event().wait, name="never-ends").start()


def stopped(args, stop_signals, process):
    raise signals.Terminated()


check.run_check = stopped
sys.argv = ["torchlint", "check", "."]
cli.console_main()
'''


def test_the_command_stopped_by_a_signal_ends_without_waiting_for_threads(tmp_path):
    done = subprocess.run([sys.executable, "-c", STOPPED_WITH_A_THREAD_LEFT], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "torchlint: terminated" in done.stderr

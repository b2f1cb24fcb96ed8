"""Unusual and hostile files: FIFOs, sockets, unreadable folders and files, links, read-only
files, and a `--fix` run that is killed. Nothing hangs, nothing is skipped silently, and no
file changes except by a completed fix.

Every run that could hang goes through a subprocess with a timeout; every process a test
starts is ended before it returns.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.support import default_sigint
from testkit.support import run_cli as run
from torchlint import files, fixing
from torchlint.cli import checking
from torchlint.fixing import fix_text
from torchlint.settings import DEFAULT_SETTINGS

# One TL101 finding with a safe fix (a non-persistent buffer).
MASK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(4, 4))
'''
FIXED_MASK = fix_text(MASK, "model.py").text
TIMEOUT = 120  # seconds: generous for a slow, busy machine; a hang fails instead of blocking the suite
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def write(path: Path, text: str = MASK) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run_subprocess(argv, cwd):
    """The CLI in a child process, bounded: a hang fails the test instead of blocking the suite."""
    return subprocess.run([sys.executable, "-m", "torchlint", *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)


# -- FIFOs, sockets --------------------------------------------------------------------------------

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


@needs_fifo
def test_fifo_in_a_tree_is_skipped_with_a_note(tmp_path):
    write(tmp_path / "model.py")
    os.mkfifo(tmp_path / "pipe.py")
    proc = run_subprocess(["check", "--no-infer", "--select", "TL101", "."], tmp_path)
    assert proc.returncode == 1, proc.stderr  # the finding in model.py; the FIFO is no error
    assert "model.py:8:9: TL101" in proc.stdout
    assert "torchlint: note: skipped pipe.py: a FIFO, not a regular file" in proc.stderr
    assert "pipe.py" not in proc.stdout


@needs_fifo
def test_fifo_named_on_the_command_line_is_an_error(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    proc = run_subprocess(["check", "--no-infer", "pipe.py"], tmp_path)
    assert proc.returncode == 2
    assert "torchlint: error: pipe.py: not a regular file (a FIFO); not read" in proc.stderr


@needs_fifo
def test_fifo_named_beside_a_file_still_checks_the_file(tmp_path):
    write(tmp_path / "model.py")
    os.mkfifo(tmp_path / "pipe.py")
    proc = run_subprocess(["check", "--no-infer", "--select", "TL101", "pipe.py", "model.py"], tmp_path)
    assert proc.returncode == 2
    assert "pipe.py: not a regular file" in proc.stderr and "model.py:8:9: TL101" in proc.stdout


@needs_fifo
def test_reading_a_fifo_put_in_place_of_a_file_does_not_block(tmp_path):
    # Discovery saw a file; by the time it is read it is a FIFO with no writer.
    os.mkfifo(tmp_path / "swapped.py")
    code = "from torchlint.files import read_regular_file\ntry:\n    read_regular_file('swapped.py')\n" \
           "except OSError as err:\n    print(type(err).__name__, err)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.stdout.strip() == "NotRegularFile not a regular file (a FIFO)", proc.stderr


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets on this platform")
def test_socket_in_a_tree_is_skipped(tmp_path, capsys):
    write(tmp_path / "model.py")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp_path / "sock.py"))
        code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    finally:
        server.close()
    assert code == 1
    assert "skipped sock.py: a socket, not a regular file" in err and "sock.py" not in out


@pytest.mark.skipif(sys.platform == "win32", reason="no newline in a Windows file name")
def test_a_file_name_with_control_characters_is_printed_escaped(tmp_path, capsys):
    """A name with a newline would start a line that GitHub Actions reads as a workflow command
    (`::error::`, `::add-mask::`); ESC would start a terminal sequence. Every printed name is
    escaped, on stdout and stderr alike; SARIF's JSON and GitHub's format encode it themselves."""
    name = "model\n::error file=x::planted\x1b[2J.py"
    write(tmp_path / name)
    (tmp_path / ("broken\n::add-mask::x.py")).write_text("def (:\n")
    code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 1
    for printed in (out, err):
        assert not any(line.startswith("::") for line in printed.splitlines()), printed
        assert "\x1b" not in printed
    assert "model\\n::error file=x::planted\\x1b[2J.py:8:9: TL101" in out
    assert "broken\\n::add-mask::x.py:1:5: SyntaxError" in out
    code, out, _ = run(["check", "--no-infer", "--select", "TL101", "--format", "github", "."], capsys, cwd=tmp_path)
    assert all(line.startswith("::") for line in out.splitlines()), out  # one command per line, none injected


def test_code_nested_past_the_recursion_limit_is_said_not_passed(tmp_path, capsys):
    """A 1,000-deep conditional expression compiles, but a rule's walk of it reaches Python's
    recursion limit: that rule's findings in the file are lost. Said as such (exit 2), never
    "All checks passed!", and never a traceback."""
    deep = " ".join(["a if c else"] * 1000) + " x"
    write(tmp_path / "deep.py", MASK + "        self.v = %s\n" % deep)
    write(tmp_path / "plain.py")
    code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 2 and "Traceback" not in err
    (said,) = [line for line in err.splitlines() if "deep.py" in line]
    assert said.startswith("torchlint: error: deep.py: TL101 could not check this file") and "recursion" in said
    assert "plain.py:8:9: TL101" in out  # the other file's finding stands
    assert "All checks passed" not in out and "1 file not checked whole" in out


def test_a_file_over_the_size_limit_is_said_and_not_checked(tmp_path, capsys):
    """The editor's limit (settings.max_file_size) holds in the CLI too: a 53.6 MB file took 289 s
    and 11.4 GB. Just over the default, a file is said as an error (exit 2) and the rest checked."""
    limit = DEFAULT_SETTINGS.max_file_size
    write(tmp_path / "big.py", MASK + "#" * (limit - len(MASK)) + "\n")  # limit + 1 characters
    write(tmp_path / "model.py")
    code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 2 and "Traceback" not in err
    assert ("torchlint: error: big.py: larger than --max-file-size (%d characters): not checked (exclude it, or "
            "give a larger --max-file-size)" % limit) in err.splitlines()
    assert "model.py:8:9: TL101" in out and "big.py" not in out
    write(tmp_path / "big.py", MASK + "#" * (limit - len(MASK) - 1) + "\n")  # at the limit: checked
    code, out, err = run(["check", "--no-infer", "--select", "TL101", "big.py"], capsys, cwd=tmp_path)
    assert code == 1 and "big.py:8:9: TL101" in out and not err


def test_a_file_not_checked_is_never_all_checks_passed(tmp_path, capsys):
    """Too large (or unreadable), a file is an error and exit 2: the summary said "All checks
    passed!" all the same when the files checked had no finding."""
    limit = str(len(MASK))
    write(tmp_path / "big.py", MASK + "#" * 100 + "\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    code, out, err = run(["check", "--no-infer", "--max-file-size", limit, "big.py", "clean.py"], capsys,
                         cwd=tmp_path)
    assert code == 2 and "big.py: larger than --max-file-size" in err
    assert out.splitlines()[-1] == "All checks passed in the files checked; 1 file not checked (see above)."
    write(tmp_path / "model.py")  # with a finding: counted beside it
    code, out, err = run(["check", "--no-infer", "--select", "TL101", "--max-file-size", limit, "big.py",
                          "model.py"], capsys, cwd=tmp_path)
    assert code == 2 and "model.py:8:9: TL101" in out
    assert out.splitlines()[-1].startswith("Found 1 finding (1 file not checked (see above)")


def test_the_size_limit_counts_characters_and_a_notebook_s_code(tmp_path, capsys):
    comment = "# " + "\u00e9" * 30 + "\n"  # 62 bytes, 33 characters
    write(tmp_path / "accents.py", comment + MASK)
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": MASK}]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    limit = len(comment + MASK)
    code, out, err = run(["check", "--no-infer", "--max-file-size", limit, "accents.py", "nb.ipynb"], capsys,
                         cwd=tmp_path)
    assert code == 1 and "accents.py:9:9: TL101" in out and "nb.ipynb:cell 1:8:9: TL101" in out and not err
    code, out, err = run(["check", "--no-infer", "--max-file-size", len(MASK) - 1, "accents.py", "nb.ipynb"], capsys,
                         cwd=tmp_path)
    assert code == 2 and "TL101" not in out
    assert [line.split(": larger than")[0] for line in err.splitlines()] == [
        "torchlint: error: accents.py", "torchlint: error: nb.ipynb"]


def test_dangling_link_is_skipped_with_a_note(tmp_path, capsys):
    write(tmp_path / "model.py")
    os.symlink(tmp_path / "gone.py", tmp_path / "dangling.py")
    code, _, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 1
    assert "skipped dangling.py: a dangling symbolic link" in err


# -- unreadable folders and files ------------------------------------------------------------------
# chmod 000 does not stop root from reading, so as root the refusal is made in-process instead:
# os.scandir / os.open raise PermissionError for that one path, as the kernel would.

def make_unreadable(path: Path, monkeypatch) -> None:
    """Make ``path`` unreadable for this process (the caller restores the mode afterwards)."""
    path = Path(os.path.abspath(path))
    if not IS_ROOT:
        path.chmod(0)
        return
    target = str(path)
    if path.is_dir():
        real_scandir = os.scandir

        def scandir(directory="."):
            if os.path.abspath(directory) == target:
                raise PermissionError(13, "Permission denied", directory)
            return real_scandir(directory)

        monkeypatch.setattr(files.os, "scandir", scandir)
    else:
        real_open = os.open

        def open_(name, flags, *args, **kwargs):
            if os.path.abspath(name) == target:
                raise PermissionError(13, "Permission denied", name)
            return real_open(name, flags, *args, **kwargs)

        monkeypatch.setattr(files.os, "open", open_)


def test_unreadable_folder_is_reported_and_exits_2(tmp_path, capsys, monkeypatch):
    write(tmp_path / "model.py")
    write(tmp_path / "private" / "secret.py")
    make_unreadable(tmp_path / "private", monkeypatch)
    try:
        code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    finally:
        os.chmod(tmp_path / "private", 0o755)
    assert code == 2
    assert "torchlint: error: private: cannot read directory: Permission denied" in err
    assert "model.py:8:9: TL101" in out  # the rest is still checked


def test_unreadable_file_is_reported_and_exits_2(tmp_path, capsys, monkeypatch):
    write(tmp_path / "model.py")
    write(tmp_path / "secret.py")
    make_unreadable(tmp_path / "secret.py", monkeypatch)
    try:
        code, out, err = run(["check", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    finally:
        os.chmod(tmp_path / "secret.py", 0o644)
    assert code == 2
    assert "torchlint: error: secret.py: cannot read: Permission denied" in err
    assert "model.py:8:9: TL101" in out and "secret.py" not in out


# -- --fix keeps links, mode and owner; refuses read-only files ----------------------------------------

def test_fix_writes_through_a_symlink(tmp_path, capsys):
    target = write(tmp_path / "real" / "model.py")
    link = tmp_path / "src" / "link.py"
    link.parent.mkdir()
    os.symlink(os.path.relpath(target, link.parent), link)
    code, _, err = run(["check", "--fix", "--no-infer", "--select", "TL101", "src"], capsys, cwd=tmp_path)
    assert code == 0, err
    assert link.is_symlink() and Path(os.path.realpath(link)) == target
    assert target.read_text() == FIXED_MASK != MASK
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.py"]  # no temporary file left
    assert sorted(p.name for p in link.parent.iterdir()) == ["link.py"]


def test_fix_keeps_hard_links(tmp_path, capsys):
    first = write(tmp_path / "model.py")
    second = tmp_path / "same_file.txt"  # not *.py: only reached through the first name
    os.link(first, second)
    code, _, _ = run(["check", "--fix", "--no-infer", "--select", "TL101", first], capsys)
    assert code == 0
    assert os.path.samefile(first, second) and first.stat().st_nlink == 2
    assert second.read_text() == FIXED_MASK


def test_fix_keeps_mode_owner_and_inode(tmp_path, capsys):
    path = write(tmp_path / "model.py")
    path.chmod(0o751)
    if IS_ROOT:  # root can hand the file to another user, as a shared checkout might have it
        os.chown(path, 65534, 65534)
    before = path.stat()
    code, _, _ = run(["check", "--fix", "--no-infer", "--select", "TL101", path], capsys)
    after = path.stat()
    assert code == 0 and path.read_text() == FIXED_MASK
    assert stat.S_IMODE(after.st_mode) == 0o751
    assert (after.st_uid, after.st_gid, after.st_ino) == (before.st_uid, before.st_gid, before.st_ino)


def test_fix_refuses_a_read_only_file_and_fixes_the_others(tmp_path, capsys):
    locked = write(tmp_path / "locked.py")
    locked.chmod(0o444)
    other = write(tmp_path / "other.py")
    try:
        code, out, err = run(["check", "--fix", "--no-infer", "--select", "TL101", "."], capsys, cwd=tmp_path)
    finally:
        locked.chmod(0o644)
    assert code == 2
    assert "torchlint: error: locked.py: read-only file; not fixed (make it writable, e.g. with `chmod u+w`" in err
    assert locked.read_text() == MASK and other.read_text() == FIXED_MASK
    assert "locked.py:8:9: TL101" in out  # still there, and reported
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked.py", "other.py"]


def test_fix_does_not_overwrite_a_file_changed_meanwhile(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "model.py")
    edited = MASK + "# saved by an editor meanwhile\n"

    def fix_while_someone_edits(*args, **kwargs):
        path.write_text(edited, encoding="utf-8")
        return fix_text(*args, **kwargs)

    monkeypatch.setattr(checking, "fix_text", fix_while_someone_edits)
    code, _, err = run(["check", "--fix", "--no-infer", "--select", "TL101", path], capsys)
    assert code == 2
    assert "model.py: changed on disk while it was being fixed; not fixed (run again)" in err
    assert path.read_text() == edited


def test_failed_temporary_copy_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "model.py")
    real_fsync = os.fsync

    def full_disk(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fixing.os, "fsync", full_disk)
    code, _, err = run(["check", "--fix", "--no-infer", "--select", "TL101", path], capsys)
    monkeypatch.setattr(fixing.os, "fsync", real_fsync)
    assert code == 2 and "model.py: not fixed: No space left on device" in err
    assert path.read_text() == MASK
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]


def test_interrupt_during_a_write_waits_for_it(tmp_path):
    # SIGINT arriving mid-write takes effect after the write: the file is whole, no copy is left.
    path = write(tmp_path / "model.py")
    code = ("import os, signal\nfrom torchlint import fixing\nreal = os.pwrite\n"
            "def interrupted(*args):\n    os.kill(os.getpid(), signal.SIGINT)\n    return real(*args)\n"
            "fixing.os.pwrite = interrupted\n"
            "try:\n    fixing.write_in_place('model.py', %r, %r)\nexcept KeyboardInterrupt:\n    print('after')\n"
            % (FIXED_MASK.encode(), MASK.encode()))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=default_sigint)
    assert proc.stdout.strip() == "after", proc.stderr
    assert path.read_text() == FIXED_MASK
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]


# -- stopping a --fix run --------------------------------------------------------------------------------
# Many files, each with many safe fixes, so that the run is still going when the first file is written.

LEGACY = "import torch\n\n" + "".join("x%d = torch.FloatTensor(%d, 3)\n" % (i, i + 1) for i in range(60))
FIXED_LEGACY = fix_text(LEGACY, "model.py").text
FILE_COUNT = 160


def many_fixable_files(folder: Path):
    folder.mkdir()
    return [write(folder / ("m%03d.py" % i), LEGACY) for i in range(FILE_COUNT)]


def descendants(pid: int):
    """Every live process below ``pid`` (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for an init that does not reap counts as gone)."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def end_survivors(pids) -> None:
    """Whatever the assertions found, leave no process of a test behind."""
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def wait_until(condition, what: str, limit: float = TIMEOUT) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.01)


def contents(folder: Path):
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def start_fix_run(folder: Path):
    """A --fix run over ``folder``, stopped once its first file is written: (process, workers)."""
    proc = subprocess.Popen([sys.executable, "-m", "torchlint", "check", "--fix", "--no-infer", "-q", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        workers = set()

        def first_file_written():
            workers.update(descendants(proc.pid))
            assert proc.poll() is None, "the run ended before any file was written: " + proc.stderr.read()
            return any(p.read_text() != LEGACY for p in folder.glob("m*.py"))

        wait_until(first_file_written, "the first fixed file")
    except BaseException:
        proc.kill()
        proc.wait(TIMEOUT)
        raise
    return proc, workers


def assert_whole_files(folder: Path, leftovers_allowed: bool):
    written = 0
    for name, text in contents(folder).items():
        if name.startswith("m") and name.endswith(".py"):
            assert text in (LEGACY, FIXED_LEGACY), name + " is neither the original nor the fixed file"
            written += text == FIXED_LEGACY
        else:  # SIGKILL can leave the hidden copy of the file being written, nothing else
            assert leftovers_allowed and name.startswith(".m") and name.endswith(".tmp"), name
    assert 0 < written < FILE_COUNT  # stopped mid-run: some files fixed, some not
    return written


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
def test_killed_main_process_takes_its_workers_and_writes_nothing_more(tmp_path):
    folder = tmp_path / "src"
    many_fixable_files(folder)
    proc, workers = start_fix_run(folder)
    try:
        proc.kill()
        proc.wait(TIMEOUT)
        proc.stderr.close()
        after_kill = contents(folder)
        assert workers, "the run had no worker processes"
        wait_until(lambda: not any(alive(pid) for pid in workers), "the pool workers to die", limit=30)
        time.sleep(1.0)  # a surviving writer would have written by now
        assert contents(folder) == after_kill
        assert_whole_files(folder, leftovers_allowed=True)
    finally:
        end_survivors(workers)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
@pytest.mark.parametrize("signum, status, message", [
    (signal.SIGTERM, 128 + signal.SIGTERM, "torchlint: terminated"),
    (signal.SIGINT, 128 + signal.SIGINT, "torchlint: interrupted"),
])
def test_terminated_fix_run_cleans_up(tmp_path, signum, status, message):
    folder = tmp_path / "src"
    many_fixable_files(folder)
    proc, workers = start_fix_run(folder)
    try:
        proc.send_signal(signum)
        try:
            _, err = proc.communicate(timeout=TIMEOUT)
        finally:
            proc.kill()
            proc.wait(TIMEOUT)
        assert proc.returncode == status, err
        assert message in err and "Traceback" not in err
        wait_until(lambda: not any(alive(pid) for pid in workers), "the pool workers to end", limit=30)
        assert_whole_files(folder, leftovers_allowed=False)  # no temporary file left
    finally:
        end_survivors(workers)

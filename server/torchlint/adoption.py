"""What changed against a git ref, for ``torchlint check --diff-against REF``: the files, and
with ``--changed-lines-only`` their changed lines.

"Changed against REF" means what a pull request against REF would show, plus what is not
committed yet: the changes since the merge base of REF and HEAD (``git diff MERGE_BASE``
compares it with the working tree, so commits, staged and unstaged edits all count) and the
untracked files git does not ignore. Deleted files are not changed files; a renamed file is
changed under its new name, with only the lines edited in it as changed lines.

git runs as a subprocess (the ``git`` on PATH), each call with a timeout; every failure is a
:class:`GitError` whose message says what to do.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Union

GIT_TIMEOUT = 60.0  # seconds per git command
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# git's C-style quoting of unusual file names in diff headers ("b/caf\303\251.py")
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class GitError(Exception):
    """git could not say what changed; the message says why and what to do."""


@dataclass
class Changes:
    """Files changed against a ref (real paths), and the changed lines of each (1-based, in the
    file as it is now; every line of an untracked file). ``lines`` is filled only when asked."""

    ref: str
    base: str  # the merge base's commit
    toplevel: str  # the repository's top folder
    files: FrozenSet[str] = frozenset()
    lines: Dict[str, FrozenSet[int]] = field(default_factory=dict)
    untracked: FrozenSet[str] = frozenset()

    def contains(self, path: Union[str, os.PathLike[str]]) -> bool:
        return same_file_key(path) in self.files

    def lines_of(self, path: Union[str, os.PathLike[str]]) -> Optional[FrozenSet[int]]:
        """The changed lines of a changed file; None for an untracked one (all of it is new)."""
        key = same_file_key(path)
        if key in self.untracked:
            return None
        return self.lines.get(key, frozenset())


def same_file_key(path: Union[str, os.PathLike[str]]) -> str:
    """A path's folder resolved (symbolic links, ``..``) and its own name kept: how git and a
    walk, which may reach the repository through different links, agree on a file."""
    path = os.path.abspath(str(path))
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


# What a repository's own .git/config could make git run while torchlint asks it about files: a
# file-system monitor (core.fsmonitor: a hook program), hooks, and the clean/smudge filters that
# .gitattributes names (run on working-tree files `git diff` compares). Off for every call; the
# filters by name, read from the configuration first (reading it runs nothing).
NOTHING_RUNS = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=" + os.devnull)


def run_git(args: Sequence[str], cwd: str, timeout: float = GIT_TIMEOUT) -> str:
    command = ["git", "-c", "core.quotePath=true", *NOTHING_RUNS, *_no_filters(cwd, timeout), *args]
    return _git(command, args, cwd, timeout)


def _no_filters(cwd: str, timeout: float) -> List[str]:
    """``-c filter.<name>.<command>=`` for every filter driver the configuration seen from ``cwd``
    defines (an empty command is no filter)."""
    try:
        listed = _git(["git", *NOTHING_RUNS, "config", "--null", "--get-regexp", r"^filter\."], ["config"], cwd,
                      timeout)
    except GitError:
        return []  # none defined (git config exits 1), or no repository here
    keys = [entry.split("\n", 1)[0] for entry in listed.split("\0")]
    drivers = {key[len("filter."):key.rindex(".")] for key in keys if key.count(".") >= 2}  # (a name may hold dots)
    return [option for name in sorted(drivers) for key in ("clean", "smudge", "process")
            for option in ("-c", "filter.%s.%s=" % (name, key))]


def _git(command: Sequence[str], args: Sequence[str], cwd: str, timeout: float) -> str:
    # Messages in English (they are matched), and no index refresh written behind the user's back.
    env = dict(os.environ, LC_ALL="C", LANGUAGE="", GIT_OPTIONAL_LOCKS="0")
    try:
        done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH); --diff-against needs it") from None
    except subprocess.TimeoutExpired:
        raise GitError("`git %s` took more than %g s; stopped" % (" ".join(args), timeout)) from None
    except OSError as err:
        raise GitError("cannot run git: %s" % (err.strerror or err)) from None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        said = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
        raise _Failed(done.returncode, said or "exit status %d" % done.returncode)
    return done.stdout.decode("utf-8", "surrogateescape")


class _Failed(GitError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def changes_against(ref: str, directory: str, with_lines: bool = False) -> Changes:
    """What changed against ``ref`` in the repository holding ``directory``."""
    if ref.startswith("-"):
        raise GitError("%r is not a git ref (a branch, tag or commit)" % ref)
    try:
        toplevel = run_git(["rev-parse", "--show-toplevel"], directory).strip()
    except _Failed as err:
        if "not a git repository" in str(err):
            raise GitError("%s is not in a git repository; --diff-against needs one" % directory) from None
        raise GitError("git cannot read the repository at %s (%s)" % (directory, err)) from None
    try:
        commit = run_git(["rev-parse", "--verify", "--quiet", ref + "^{commit}"], toplevel).strip()
    except _Failed:
        raise GitError("unknown git ref %r (give a branch, tag or commit, e.g. main or origin/main)" % ref) from None
    try:
        base = run_git(["merge-base", commit, "HEAD"], toplevel).strip()
    except _Failed as err:
        if err.status == 1:  # no common ancestor
            raise GitError("%r and HEAD have no common ancestor: nothing to compare against" % ref) from None
        raise GitError("git merge-base %s HEAD: %s" % (ref, err)) from None
    changed = _nul_list(run_git(["diff", "--name-only", "-z", "--no-ext-diff", "--no-textconv", "-M",
                                 "--diff-filter=d", "--ignore-submodules", base, "--"], toplevel))
    untracked = _nul_list(run_git(["ls-files", "--others", "--exclude-standard", "-z", "--"], toplevel))
    key: Callable[[str], str] = lambda rel: same_file_key(os.path.join(toplevel, rel))
    changes = Changes(ref, base, toplevel, frozenset(key(rel) for rel in changed + untracked),
                      untracked=frozenset(key(rel) for rel in untracked))
    if with_lines and changed:
        patch = run_git(["diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "-M",
                         "--diff-filter=d", "--ignore-submodules", "--src-prefix=a/", "--dst-prefix=b/",
                         base, "--"], toplevel)
        changes.lines = {key(rel): lines for rel, lines in changed_lines(patch).items()}
    return changes


def _nul_list(output: str) -> List[str]:
    return [name for name in output.split("\0") if name]


def changed_lines(patch: str) -> Dict[str, FrozenSet[int]]:
    """file (relative to the repository) -> the lines of its new version that a ``git diff -U0``
    patch adds or changes. A hunk that only deletes changes no line of the new version."""
    result: Dict[str, Set[int]] = {}
    current: Optional[Set[int]] = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            name = _unquote(name) if name.startswith('"') else name.rstrip("\t")
            current = result.setdefault(name[2:], set()) if name.startswith("b/") else None
        elif line.startswith("@@") and current is not None:
            match = _HUNK.match(line)
            if match:
                start, count = int(match.group(1)), int(match.group(2) or 1)
                current.update(range(start, start + count))
    return {name: frozenset(lines) for name, lines in result.items()}


def _unquote(quoted: str) -> str:
    """git's C-style quoted path (octal escapes are UTF-8 bytes)."""
    body = quoted[1:-1] if quoted.endswith('"') else quoted[1:]
    out = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            following = body[index + 1]
            if following in "01234567":
                out.append(int(body[index + 1:index + 4], 8))
                index += 4
                continue
            out.extend(_ESCAPES.get(following, following).encode("utf-8"))
            index += 2
            continue
        out.extend(char.encode("utf-8", "surrogateescape"))
        index += 1
    return out.decode("utf-8", "surrogateescape")

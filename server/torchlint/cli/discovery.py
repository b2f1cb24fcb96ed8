"""The first step of a run: the files to check (standard input, the paths walked, what changed
against --diff-against), and what to say about those left out."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..adoption import Changes, GitError, changes_against
from ..config import Config
from ..exit_codes import EXIT_CLEAN, EXIT_ERROR
from ..files import DEFAULT_EXCLUDES, GitIgnores, GlobPattern, discover, relative_to_root
from ..output import display_path
from .reporting import error
from .run_state import RunState


def discover_files(run: RunState) -> Optional[int]:
    """Fill ``run.files``; the exit status when the run ends here."""
    return _from_stdin(run) if run.stdin else _walk(run)


def _from_stdin(run: RunState) -> Optional[int]:
    args = run.args
    name = args.stdin_filename
    path = Path(os.path.abspath(name)) if name else Path(run.cwd) / "-"
    run.stdin_data = sys.stdin.buffer.read()
    why = exclusion_reason(path, run.config) if args.force_exclude and name else None
    if why is not None:  # nothing to check; --fix and --add-noqa give the text back as it came
        if not args.quiet:
            print("torchlint: note: skipped %s: %s" % (run.shown(path), why), file=sys.stderr)
        if run.mode in ("fix", "noqa"):
            sys.stdout.buffer.write(run.stdin_data)
            sys.stdout.flush()
        return EXIT_CLEAN
    run.files = [path]
    return None


def _walk(run: RunState) -> Optional[int]:
    args, config = run.args, run.config
    found = discover([Path(p) for p in args.paths], config.root, config.exclude_patterns,
                     force_exclude=args.force_exclude)
    run.files = run.walked = found.files
    for path in found.excluded_by_default if args.verbose else ():
        print("torchlint: note: skipped %s: a default exclude, and not a Python package (`exclude = [\"!%s\"]` "
              "checks it)" % (run.shown(path), path.name), file=sys.stderr)
    for path, why in found.skipped:
        if not args.quiet:
            print("torchlint: note: skipped %s: %s" % (run.shown(path), why), file=sys.stderr)
    if found.missing or found.errors:
        for path in found.missing:
            error("%s: no such file or directory" % run.shown(path))
        for path, why in found.errors:
            error("%s: %s" % (run.shown(path), why))
        if found.missing or not run.files:
            return EXIT_ERROR
    run.problems = len(found.errors)  # unreadable folders: reported, the rest is still checked, exit 2
    if args.diff_against is not None:
        try:
            run.changes = changes_against(args.diff_against, git_directory(args.paths), args.changed_lines_only)
        except GitError as err:
            return error("--diff-against: %s" % err)
        run.files = [path for path in run.walked if run.changes.contains(path)]
        if args.verbose:
            print("torchlint: %d of %d files changed against %s (merge base %s)" % (
                len(run.files), len(run.walked), run.changes.ref, run.changes.base[:12]), file=sys.stderr)
    if not run.files and not args.quiet:
        explain_nothing_to_check(args.paths, args.force_exclude, config, run.changes, run.walked, run.cwd)
    elif args.force_exclude and args.verbose:
        for path, why in named_and_excluded(args.paths, run.walked, config):
            print("torchlint: note: skipped %s: %s" % (run.shown(path), why), file=sys.stderr)
    return None


def git_directory(paths: Sequence[str]) -> str:
    """Where to ask git about the paths: their common folder."""
    common = os.path.commonpath([os.path.abspath(p) for p in paths])
    return common if os.path.isdir(common) else os.path.dirname(common)


def exclusion_reason(path: Path, config: Config) -> Optional[str]:
    """Why the excludes (--force-exclude) leave out a path named on the command line, or None:
    the pattern that decides (the last one that matches the path or a folder above it below the
    root, as discovery reads them), else a .gitignore file."""
    defaults = [GlobPattern(p) for p in DEFAULT_EXCLUDES]
    rel = relative_to_root(path, config.root)
    entries: List[Tuple[Optional[str], str, bool]] = []
    if rel is not None and rel != ".":
        parts = rel.split("/")
        entries = [("/".join(parts[: i + 1]), parts[i], True) for i in range(len(parts) - 1)]
    entries.append((rel, path.name, os.path.isdir(path)))
    for entry in entries:
        decided = None
        for pattern in defaults + config.exclude_patterns:
            if pattern.matches(*entry):
                decided = None if pattern.negated else pattern
        if decided is not None:
            where = "a default exclude" if any(decided is d for d in defaults) else "an exclude in %s" % (
                display_path(str(config.path)) if config.path else "the settings")
            return "excluded by `%s` (%s), and --force-exclude applies the excludes to the paths named" % (
                decided.pattern, where)
    if GitIgnores(config.root).ignored_file(path):
        return "ignored by a .gitignore file, and --force-exclude applies it to the paths named"
    return None


def named_and_excluded(paths: Sequence[str], files: Sequence[Path], config: Config) -> List[Tuple[Path, str]]:
    """(path, why) for each path named on the command line that --force-exclude left out."""
    kept = set(files)
    result = []
    for name in paths:
        path = Path(os.path.abspath(name))
        if path in kept or not os.path.exists(path):
            continue
        why = exclusion_reason(path, config)
        if why is not None:
            result.append((path, why))
    return result


def explain_nothing_to_check(paths: Sequence[str], force_exclude: bool, config: Config, changes: Optional[Changes],
                             walked: Sequence[Path], cwd: str) -> None:
    """Why a run has no file to check, on stderr."""
    if changes is not None and walked:
        print("torchlint: note: no Python file under %s changed against %s" % (" ".join(paths), changes.ref),
              file=sys.stderr)
        return
    excluded = named_and_excluded(paths, walked, config) if force_exclude else []
    for path, why in excluded:
        print("torchlint: note: skipped %s: %s" % (display_path(str(path), cwd), why), file=sys.stderr)
    explained = {str(path) for path, _ in excluded}
    rest = [name for name in paths if os.path.abspath(name) not in explained]
    if rest:
        print("torchlint: warning: no Python files found under %s" % " ".join(rest), file=sys.stderr)


"""The ``torchlint`` command: ``check`` files (and fix them), print a ``rule``'s doc.

Exit codes: 0 nothing found at or above ``--fail-on`` (default: warning), 1 such findings
(or files that do not parse), 2 usage, configuration or internal errors.

``check`` runs as steps over one run state (check.py, run_state.py): the files to check
(discovery.py), the jobs, run in worker processes or this one (workers.py; each process's jedi
layers, warnings and collections: process_state.py), one file or notebook each (checking.py),
then the report and the exit status (reporting.py).
"""
from .check import load_settings
from .checking import Job
from .commands import build_parser, console_main, main

__all__ = ("Job", "build_parser", "console_main", "load_settings", "main")

"""One ``torchlint check`` run: what its steps (check.py) read and leave for the next."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, TextIO

from ..adoption import Changes
from ..config import Config
from ..environments import Interpreter
from ..output import FileReport, display_path
from .checking import Checked, Job
from .process_state import ProcessState
from .progress import Progress
from .signals import StopSignals


@dataclass
class RunState:
    args: argparse.Namespace
    config: Config
    signals: StopSignals
    process: ProcessState  # this process's jedi layers, warnings said, collection
    report_stream: TextIO  # where the report goes: stdout, or stderr when stdout has the fixed text
    mode: str  # as Job.mode
    stdin: bool  # `-`: one file read from standard input
    started: float  # time.perf_counter() when the command began
    cwd: str = field(default_factory=os.getcwd)
    problems: int = 0  # errors said (unreadable folders and files, writes that failed): exit 2

    # discover: the files to check
    files: List[Path] = field(default_factory=list)
    walked: List[Path] = field(default_factory=list)  # the files found, before --diff-against
    changes: Optional[Changes] = None  # --diff-against: what changed
    stdin_data: Optional[bytes] = None

    # the jedi layer's settings, then the jobs
    python: Optional[Interpreter] = None
    cache_dir: Optional[str] = None
    budget: Optional[float] = None
    jobs: List[Job] = field(default_factory=list)
    progress: Optional[Progress] = None

    # what the checks gave
    reports: List[FileReport] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # said after the progress line is gone
    noqa_files: int = 0
    noqa_added: int = 0
    noqa_left: List[str] = field(default_factory=list)
    cache_dropped: int = 0
    not_read: int = 0  # files not checked at all (too large, unreadable): errors above, and the summary says so
    stdin_result: Optional[Checked] = None

    def shown(self, path: object) -> str:
        """How messages name a path: relative to the current folder."""
        return display_path(str(path), self.cwd)

"""``torchlint verify PATH[::Class]...``: the command-line side of runtime verification.

cli/commands.py hooks it in as a subcommand::

    verify = commands.add_parser("verify", ...)
    cli_command.add_arguments(verify)
    verify.set_defaults(handler=cli_command.run)

Exit codes: 0 nothing found (every class verified or partly verified), 1 problems found
(TL901-TL908), 2 verification could not run (bad arguments, no such file or class, no class
in the file, no torch, no CUDA, no class could be built).

Several paths, or a folder (its .py files as ``torchlint check`` finds them: the project's
excludes and .gitignore apply), are one run: each file in its own child process, reported in
turn, then a total. 1 when any file has problems; else 2 when a file's run could not complete
(or a named file has no class, or no class was verified anywhere); else 0. A walked file that
defines no nn.Module class (a script, a helper) is counted, not an error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..config import ConfigError, find_config
from ..exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from ..files import discover, display_path
from ..settings import SettingError, add_flags, given_flags
from .report import COMPLETED, ERROR, VerifyReport, render_json, render_text
from .runner import NothingToVerify, VerifyError, split_target, verify_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Run the nn.Module classes of each file given (or found in each folder given) for "
                          "real in a child process (the workspace's Python, which must have torch) and confirm what the static rules suspect: "
                          "unregistered tensors (TL901), state left behind by .to() (TL902), gradients the "
                          "optimizer never sees (TL903), tensors an optimizer step does not change (TL904), "
                          "failures (TL905), parameters created during forward (TL906), what a checkpoint "
                          "of the trained module loses (TL907) and, with --ddp, gradients "
                          "DistributedDataParallel does not reduce (TL908). It executes the "
                          "file's code.")
    parser.add_argument("target", metavar="PATH[::Class]", nargs="+",
                        help="a Python file, optionally ::ClassName (default: every nn.Module subclass it "
                             "defines), or a folder (its .py files, found as check finds them); several may be "
                             "given: each file runs in turn, then a total")
    add_flags(parser, "verify")  # the settings' flags: --device, --timeout, --python (torchlint.settings)
    parser.add_argument("--init-kwargs", metavar="JSON",
                        help="constructor arguments as a JSON object, e.g. '{\"dim\": 16}', or as Python "
                             "keyword arguments of literals, e.g. 'dim=16, depth=2' (default: the class's "
                             "defaults, else its call sites and factories in the project)")
    parser.add_argument("--input-shape", action="append", metavar="SHAPE",
                        help="forward() inputs as shapes: 2,16 or 2,3,32,32; several inputs separated by ';' "
                             "or by repeating the flag; ':long' makes integer indices (2,8:long)")
    parser.add_argument("--input", action="append", metavar="EXPR", dest="input_exprs",
                        help="a forward() input as a Python expression, evaluated in the file's module with torch "
                             "bound, e.g. 'torch.randint(0, 100, (2, 16))'; repeat for several inputs")
    parser.add_argument("--ddp", action="store_true",
                        help="also train each class two steps under DistributedDataParallel, in a 2-process gloo "
                             "group on the CPU, and report gradients it does not reduce and the parameters it "
                             "waits for in vain (TL908)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def run(args: argparse.Namespace) -> int:
    targets = args.target if isinstance(args.target, list) else [args.target]
    shapes = None
    if args.input_shape:
        shapes = [part for value in args.input_shape for part in value.split(";") if part.strip()]
    first, _ = split_target(targets[0])
    try:
        config = find_config(os.path.abspath(first))
        settings = config.over(given_flags(args, "verify")).settings  # the flags, checked as declared
    except (ConfigError, SettingError) as err:
        print("torchlint: error: %s" % err, file=sys.stderr)
        return EXIT_ERROR

    def verify(path: str, class_name: Optional[str]) -> VerifyReport:
        return verify_file(path, class_name=class_name, device=settings.verify_device,
                           timeout=settings.verify_timeout, init_kwargs=args.init_kwargs, input_shapes=shapes,
                           python=settings.interpreter or None,
                           input_exprs=getattr(args, "input_exprs", None), workspace_root=str(config.root),
                           verify_config=config.verify, ddp=bool(getattr(args, "ddp", False)),
                           memory_share=settings.verify_memory_share)

    if len(targets) == 1 and not os.path.isdir(first):
        path, class_name = split_target(targets[0])
        try:
            report = verify(path, class_name)
        except VerifyError as err:
            print("torchlint: error: %s" % err, file=sys.stderr)
            return EXIT_ERROR
        if args.format == "json":
            sys.stdout.write(render_json(report))
        else:
            sys.stdout.write(render_text(report, display_path(path)))
        return exit_code(report)
    return run_project(args, targets, config.root, config.exclude_patterns, verify)


def run_project(args: argparse.Namespace, targets: List[str], root: Path, exclude: Any,
                verify: Any) -> int:
    """Several files, folders among them: each file verified in turn, then a total."""
    started = time.monotonic()
    files: List[Tuple[str, Optional[str], bool]] = []  # (path, class, named on the command line)
    for target in targets:
        path, class_name = split_target(target)
        if os.path.isdir(path):
            if class_name:
                print("torchlint: error: %s is a folder: ::%s names a class of a file (torchlint verify "
                      "FILE::Class)" % (display_path(path), class_name), file=sys.stderr)
                return EXIT_ERROR
            found = discover([Path(path)], root, exclude)
            files += [(str(file), None, False) for file in found.files]
        elif not os.path.exists(path):
            print("torchlint: error: no such file: %s" % display_path(path), file=sys.stderr)
            return EXIT_ERROR
        else:
            files.append((os.path.abspath(path), class_name, True))
    chosen: Dict[Tuple[str, Optional[str]], bool] = {}  # (path, class) -> named; a file walked and named runs once
    for path, name, named in files:
        key = (os.path.abspath(path), name)
        chosen[key] = chosen.get(key, False) or named
    unique = [(path, name, named) for (path, name), named in chosen.items()]
    reports: List[VerifyReport] = []
    failed: List[str] = []  # files whose verification could not run (said on stderr)
    no_module = 0  # walked files that define no nn.Module class
    for path, class_name, named in unique:
        try:
            report = verify(path, class_name)
        except NothingToVerify as err:
            if named:
                print("torchlint: error: %s" % err, file=sys.stderr)
                failed.append(path)
            else:
                no_module += 1
            continue
        except VerifyError as err:
            print("torchlint: error: %s" % err, file=sys.stderr)
            failed.append(path)
            continue
        if not named and report.error_kind == "no_module_class" and not report.issues:
            no_module += 1
            continue
        reports.append(report)
        if args.format != "json":
            sys.stdout.write(render_text(report, display_path(path)) + "\n")
            sys.stdout.flush()
    total = project_total(reports, len(unique), no_module, len(failed), time.monotonic() - started)
    if args.format == "json":
        sys.stdout.write(json.dumps({"files": [report.to_dict() for report in reports], "total": total},
                                    indent=2) + "\n")
    else:
        sys.stdout.write(total_line(total) + "\n")
    if total["issues"]:
        return EXIT_FINDINGS
    incomplete = failed or any(report.outcome != COMPLETED for report in reports)
    return EXIT_ERROR if incomplete or not total["verified"] else EXIT_CLEAN


def project_total(reports: List[VerifyReport], files: int, no_module: int, failed: int,
                  seconds: float) -> Dict[str, Any]:
    classes = [cls for report in reports for cls in report.classes]
    return {"files": files, "files_verified": len(reports), "files_without_module_class": no_module,
            "files_not_run": failed + sum(report.outcome != COMPLETED for report in reports),
            "classes": len(classes), "verified": sum(len(report.verified) for report in reports),
            "partly_verified": sum(len(report.partly_verified) for report in reports),
            "skipped": sum(len(report.skipped) for report in reports),
            "issues": sum(len(report.issues) for report in reports), "seconds": round(seconds, 1)}


def total_line(total: Dict[str, Any]) -> str:
    """``Total: Found 2 problems in 7 classes (1 partly verified, 2 skipped) in 3 files in 14.2s.``,
    worded as one file's summary line (its classes verified, partly verified ones included)."""
    issues, verified = total["issues"], total["verified"]
    text = "Total: %s in %d class%s" % ("No problems found" if not issues else "Found %d problem%s" % (
        issues, "" if issues == 1 else "s"), verified, "" if verified == 1 else "es")
    notes = ["%d partly verified" % total["partly_verified"]] if total["partly_verified"] else []
    notes += ["%d skipped" % total["skipped"]] if total["skipped"] else []
    if notes:
        text += " (%s)" % ", ".join(notes)
    text += " in %d file%s" % (total["files_verified"], "" if total["files_verified"] == 1 else "s")
    aside = []
    if total["files_without_module_class"]:
        aside.append("%d more without an nn.Module class" % total["files_without_module_class"])
    if total["files_not_run"]:
        aside.append("%d not verified to the end: see above" % total["files_not_run"])
    if aside:
        text += " (%s)" % "; ".join(aside)
    return text + " in %.1fs." % total["seconds"]


def exit_code(report: VerifyReport) -> int:
    if report.issues:
        return EXIT_FINDINGS
    if report.outcome == ERROR or report.outcome != COMPLETED or not report.verified:
        return EXIT_ERROR
    return EXIT_CLEAN

"""``torchlint verify FILE[::Class]``: the command-line side of runtime verification.

cli.py hooks it in as a subcommand::

    verify = commands.add_parser("verify", ...)
    cli_command.add_arguments(verify)
    verify.set_defaults(handler=cli_command.run)

Exit codes: 0 nothing found (every class verified or partly verified), 1 problems found
(TL901-TL907), 2 verification could not run (bad arguments, a folder or several files, no
such file or class, no class in the file, no torch, no CUDA, no class could be built).
"""
from __future__ import annotations

import argparse
import os
import sys

from ..config import ConfigError, find_config
from ..exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from ..files import display_path
from ..settings import add_flags, given_flags
from .report import COMPLETED, ERROR, VerifyReport, render_json, render_text
from .runner import VerifyError, split_target, verify_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Run the nn.Module classes of a file for real in a child process (the workspace's "
                          "Python, which must have torch) and confirm what the static rules suspect: "
                          "unregistered tensors (TL901), state left behind by .to() (TL902), gradients the "
                          "optimizer never sees (TL903), tensors an optimizer step does not change (TL904), "
                          "failures (TL905), parameters created during forward (TL906) and what a checkpoint "
                          "of the trained module loses (TL907). It executes the "
                          "file's code.")
    parser.add_argument("target", metavar="FILE[::Class]", nargs="+",
                        help="the file, optionally ::ClassName (default: every nn.Module subclass it defines); "
                             "one file per run")
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
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def run(args: argparse.Namespace) -> int:
    targets = args.target if isinstance(args.target, list) else [args.target]
    if len(targets) > 1:
        print("torchlint: error: verify takes one file per run (given %d: %s): run it once per file, e.g. "
              "torchlint verify %s" % (len(targets), ", ".join(targets), targets[0]), file=sys.stderr)
        return EXIT_ERROR
    path, class_name = split_target(targets[0])
    shapes = None
    if args.input_shape:
        shapes = [part for value in args.input_shape for part in value.split(";") if part.strip()]
    try:
        config = find_config(os.path.abspath(path))
        settings = config.over(given_flags(args, "verify")).settings  # the flags, checked as declared
    except ConfigError as err:
        print("torchlint: error: %s" % err, file=sys.stderr)
        return EXIT_ERROR
    try:
        report = verify_file(path, class_name=class_name, device=settings.verify_device,
                             timeout=settings.verify_timeout, init_kwargs=args.init_kwargs, input_shapes=shapes,
                             python=settings.interpreter or None,
                             input_exprs=getattr(args, "input_exprs", None), workspace_root=str(config.root),
                             verify_config=config.verify)
    except VerifyError as err:
        print("torchlint: error: %s" % err, file=sys.stderr)
        return EXIT_ERROR

    if args.format == "json":
        sys.stdout.write(render_json(report))
    else:
        sys.stdout.write(render_text(report, display_path(path)))
    return exit_code(report)


def exit_code(report: VerifyReport) -> int:
    if report.issues:
        return EXIT_FINDINGS
    if report.outcome == ERROR or report.outcome != COMPLETED or not report.verified:
        return EXIT_ERROR
    return EXIT_CLEAN

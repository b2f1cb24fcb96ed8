"""What a verification run found, as plain data, with text and JSON renderers.

The probe (child process) writes dicts of this shape; ``VerifyReport.from_probe``
turns them into these dataclasses. Nothing here imports torch.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

PARTLY = "partly verified"  # a class some of whose checks could not run (no inputs that fit forward)

# Outcomes of the whole run.
COMPLETED = "completed"  # the probe finished (issues or not)
TIMEOUT = "timeout"  # killed after --timeout seconds
CANCELLED = "cancelled"  # the caller cancelled; the process tree was killed
ENDED = "ended"  # the module's code ended the process (os._exit, os.abort, a signal)
ERROR = "error"  # verification could not run (no torch, no CUDA, no such class, bad interpreter)


def _text(value: object, default: str = "") -> str:
    """A string from the child's JSON, whatever it holds (the result file is never trusted)."""
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def _optional_text(value: object) -> Optional[str]:
    return None if value is None else _text(value)


def _items(value: object) -> List[Dict[str, Any]]:
    """The dict entries of a JSON list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@dataclass
class Issue:
    """One runtime observation: becomes one Finding on the line that assigned the attribute."""

    code: str  # TL901..TL905
    message: str
    severity: str = "error"  # "error" | "warning" | "info"
    class_name: Optional[str] = None  # the verified class
    attribute: Optional[str] = None  # the dotted path from the verified module: "blocks.0.gamma_1"
    paths: List[str] = field(default_factory=list)  # every place in the module tree it concerns
    line: Optional[int] = None  # filled by the parent for every issue (verify.findings.place_issues)
    detail: str = ""  # a traceback tail
    owner_class: Optional[str] = None  # the class of the module that holds the attribute
    owner_attribute: Optional[str] = None  # its `self.<owner_attribute> = ...` stored what the issue is about
    owner_file: Optional[str] = None  # where that class is defined (None: not known)
    owner_line: Optional[int] = None  # the line of owner_file whose statement stored it, as the probe saw it run
    file: Optional[str] = None  # the file ``line`` is in (the verified file unless said otherwise)
    # About an attribute forward makes (TL906; TL908's parameters made after DDP wrapped the
    # module): placed where forward makes it, not on the `self.<attr> = None` of __init__.
    in_forward: bool = False

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Issue":
        line = _line(data.get("line"))
        # The probe is this package's own (verify/probe.py): "class" is the verified class,
        # "owner_class" the class whose `self.<attr> = ...` stored it.
        class_name, owner = data.get("class"), data.get("owner_class")
        return cls(code=_text(data.get("code"), "TL905"), message=_text(data.get("message")),
                   severity=_text(data.get("severity"), "error"), class_name=_optional_text(class_name),
                   attribute=_optional_text(data.get("attribute")),
                   paths=[_text(p) for p in data.get("paths") or [] if p is not None]
                   if isinstance(data.get("paths"), list) else [],
                   line=line,
                   detail=_text(data.get("detail")), owner_class=_optional_text(owner),
                   owner_attribute=_optional_text(data.get("owner_attribute")),
                   owner_file=_optional_text(data.get("owner_file")),
                   owner_line=_line(data.get("owner_line")), in_forward=data.get("in_forward") is True)


def _line(value: object) -> Optional[int]:
    """A line number from the probe's JSON, or None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass
class CheckStatus:
    code: str  # TL901..TL904, TL906
    name: str
    status: str  # "passed" | "failed" | "skipped"
    summary: str  # what was seen, or why it was skipped

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "CheckStatus":
        return cls(_text(data.get("code")), _text(data.get("name")), _text(data.get("status")),
                   _text(data.get("summary")))


@dataclass
class ClassReport:
    name: str
    # "verified" (every check ran) | "partly verified" (the gradient checks could not run: partial_reason)
    # | "skipped" (could not be built with the given arguments) | "failed" (TL905)
    status: str
    skip_reason: Optional[str] = None
    partial_reason: Optional[str] = None  # "gradients skipped: no example inputs"
    inputs: Optional[str] = None  # the example inputs used, and where they came from
    checks: List[CheckStatus] = field(default_factory=list)
    issues: List[Issue] = field(default_factory=list)
    constructed_with: Optional[Dict[str, str]] = None  # {"origin", "text"}: where the constructor arguments came from
    # The class of the file whose instance held it and whose forward fed it ("UNet"): verified on
    # that instance and those inputs (constructed_with's text says where it sits: "UNet().down1").
    built_by: Optional[str] = None
    # For a class that needs arguments: its [tool.torchlint.verify.classes.<Class>] entry to paste.
    table_entry: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ClassReport":
        built = data.get("constructed_with")
        built = {"origin": _text(built.get("origin")), "text": _text(built.get("text"))} \
            if isinstance(built, dict) else None
        issues = [Issue.from_dict(i) for i in _items(data.get("issues"))]
        name = _text(data.get("name"), "?")
        for issue in issues:
            issue.class_name = issue.class_name or name
        return cls(name=name, status=_text(data.get("status"), "failed"),
                   skip_reason=_optional_text(data.get("skip_reason")),
                   partial_reason=_optional_text(data.get("partial_reason")), inputs=_optional_text(data.get("inputs")),
                   checks=[CheckStatus.from_dict(c) for c in _items(data.get("checks"))],
                   issues=issues, constructed_with=built, built_by=_optional_text(data.get("built_by")),
                   table_entry=_optional_text(data.get("table_entry")))


@dataclass
class VerifyReport:
    path: str
    python: str  # the interpreter that ran the module
    outcome: str = COMPLETED
    error: Optional[str] = None  # why verification could not run (outcome ERROR)
    error_kind: Optional[str] = None  # "no_torch", "no_cuda", "no_class", "probe"...: for adapters to act on
    torch_version: Optional[str] = None
    device: Optional[str] = None  # "cuda:0" / "cpu": where it ran
    device_name: Optional[str] = None  # the GPU's name on CUDA
    device_note: str = ""  # what the device means for the checks (the CPU stand-in for TL902)
    classes: List[ClassReport] = field(default_factory=list)
    file_issues: List[Issue] = field(default_factory=list)  # TL905 not tied to one class (import, kill)
    exit_code: Optional[int] = None  # the child's exit status (negative: killed by that signal)
    duration_s: float = 0.0
    stdout_tail: str = ""  # what the module's code printed (the end of it)
    stderr_tail: str = ""

    @property
    def issues(self) -> List[Issue]:
        return list(self.file_issues) + [issue for cls in self.classes for issue in cls.issues]

    @property
    def verified(self) -> List[ClassReport]:
        return [cls for cls in self.classes if cls.status != "skipped"]

    @property
    def partly_verified(self) -> List[ClassReport]:
        return [cls for cls in self.classes if cls.status == PARTLY]

    @property
    def skipped(self) -> List[ClassReport]:
        return [cls for cls in self.classes if cls.status == "skipped"]

    @property
    def device_text(self) -> str:
        if not self.device:
            return "not started"
        return "%s (%s)" % (self.device, self.device_name) if self.device_name else self.device

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["issues_total"] = len(self.issues)
        return data


# -- renderers -------------------------------------------------------------------------------------

def render_json(report: VerifyReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def render_text(report: VerifyReport, display_path: Optional[str] = None, lines: Optional[Dict[int, int]] = None
               ) -> str:
    """A human report. ``lines`` maps id(issue) -> line number (from verify.findings) to
    print issues as ``path:line: code message`` like `torchlint check` does."""
    name = display_path or report.path
    lines = lines or {}
    out = []
    head = "torchlint verify %s: python %s" % (name, report.python)
    if report.torch_version:
        head += ", torch %s" % report.torch_version
    head += ", device %s" % report.device_text
    out.append(head)
    if report.device_note:
        out.append("  note: %s" % report.device_note)
    if report.error:
        out.append("error: %s" % report.error)

    ordered = sorted(report.issues, key=lambda i: (lines.get(id(i), i.line) or 0, i.code))  # stable: by class too
    for issue in ordered:
        line = lines.get(id(issue), issue.line)
        shown = name if issue.file is None or _same(issue.file, report.path) else _relative(issue.file)
        where = "%s:%d" % (shown, line) if line else shown
        label = " [%s]" % issue.class_name if issue.class_name else ""
        out.append("%s: %s %s%s (%s)" % (where, issue.code, issue.message, label, issue.severity))
        if issue.detail:
            rows = [row for row in issue.detail.splitlines() if row.strip(" ^~")]  # not the caret lines
            out.extend("    " + row for row in rows[-6:])

    for cls in report.classes:
        if cls.status == "skipped":
            out.append("%s: skipped: %s" % (cls.name, cls.skip_reason))
            if cls.table_entry:
                out.append("  to build it, add to pyproject.toml (and edit the values):")
                out.extend("    " + row for row in cls.table_entry.splitlines())
            continue
        status = "%s (%s)" % (cls.status, cls.partial_reason) if cls.status == PARTLY and cls.partial_reason \
            else cls.status
        out.append("%s: %s%s" % (cls.name, status, " with inputs %s" % cls.inputs if cls.inputs else ""))
        if cls.built_by:
            out.append("  built by %s, fed from its forward (%s)" % (
                cls.built_by, (cls.constructed_with or {}).get("text") or "an instance it holds"))
        elif cls.constructed_with and cls.constructed_with.get("origin"):
            built = cls.constructed_with
            out.append("  built with %s (from %s)" % (built.get("text") or "its defaults", built["origin"]))
        for check in cls.checks:
            out.append("  %s %-14s %-7s %s" % (check.code, check.name, check.status, check.summary))
    # What the child printed helps with a crash, a hang or a probe failure; a "no such class" needs none.
    noisy = report.outcome in (TIMEOUT, ENDED, CANCELLED) or (report.outcome == ERROR and report.error_kind in (
        None, "probe"))
    if report.stdout_tail.strip() and noisy:
        out.append("stdout (last lines):")
        out.extend("    " + row for row in report.stdout_tail.rstrip().splitlines()[-10:])
    if report.stderr_tail.strip() and noisy:
        out.append("stderr (last lines):")
        out.extend("    " + row for row in report.stderr_tail.rstrip().splitlines()[-10:])
    out.append(summary_line(report, with_error=not report.error))
    return "\n".join(out) + "\n"


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _relative(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def summary_line(report: VerifyReport, with_error: bool = True) -> str:
    """The last line of the report (``with_error``: say the error, when the report does not above)."""
    issues = len(report.issues)
    if report.outcome == ERROR and not report.classes and not issues:
        if not with_error:
            return "Nothing verified (%.1fs)." % report.duration_s
        reason = (report.error or "verification could not run").rstrip(".")
        return "Nothing verified: %s (%.1fs)." % (reason, report.duration_s)
    if report.outcome == COMPLETED and report.classes and not report.verified and not issues:
        names = [cls.name for cls in report.skipped]
        needs = [cls for cls in report.skipped if cls.skip_reason and "needs arguments" in cls.skip_reason]
        why = ("%s constructor arguments: give them with --init-kwargs (and FILE::Class for one class) or "
               "[tool.torchlint.verify.classes.<Class>] in pyproject.toml" % (
                   "needs" if len(names) == 1 else "all need") if len(needs) == len(names) else "see why above")
        return "Nothing verified: %s %s; %s (%.1fs)." % (
            "class" if len(names) == 1 else "classes", ", ".join(names), why, report.duration_s)
    verified, skipped = len(report.verified), len(report.skipped)
    text = "%s in %d class%s" % ("No problems found" if not issues else
                                 "Found %d problem%s" % (issues, "" if issues == 1 else "s"),
                                 verified, "" if verified == 1 else "es")
    partly = len(report.partly_verified)
    notes = (["%d partly verified" % partly] if partly else []) + (["%d skipped" % skipped] if skipped else [])
    if notes:
        text += " (%s)" % ", ".join(notes)
    if report.outcome not in (COMPLETED,):
        text += "; run %s" % report.outcome
    return text + " in %.1fs." % report.duration_s

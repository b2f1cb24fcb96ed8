"""Runtime verification: run a file's nn.Module in a child process and confirm what
the static rules suspect (TL901-TL908; TL908 with --ddp).

The API for adapters (CLI, language server)::

    report = verify_file(path, class_name=None, device="cpu", timeout=60, init_kwargs=None,
                         input_shapes=None, python=None, cancel_event=None, cwd=None)
    findings = report_to_findings(report, text, path)    # by class: findings_by_class(...)

``device`` and ``timeout`` default to the ``verify.device`` and ``verify.timeout`` settings.
Only ``probe.py`` imports torch, and only in the child process.
"""
from .findings import SOURCE, findings_by_class, report_to_findings
from .report import VerifyReport, render_json, render_text
from .runner import VerifyError, verify_file

__all__ = ["SOURCE", "VerifyError", "VerifyReport", "findings_by_class", "render_json", "render_text",
           "report_to_findings", "verify_file"]

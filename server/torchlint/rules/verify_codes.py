"""The codes runtime verification reports (``torchlint verify``, the editor's Verify lens).

They are declared here, beside the rules, so that every code torchlint can print is in one
registry (``rules.ALL_CODES``) with its name, default severity, summary and page
(``torchlint/docs/TL9NN.md``). The checks themselves run in ``verify/`` (the probe, in a child
process), which reads these declarations; the rules layer never imports verify.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from ..analysis.findings import Severity
from .base import page_path, page_url


@dataclass(frozen=True)
class VerifyCode:
    code: str
    name: str
    severity: Severity  # the grade of what the check exists to catch
    summary: str
    # Where the probe grades some observations lower, in a few words for the README's table (the
    # page's Severity section says it in full); empty where every one has ``severity``.
    grading: str = ""

    def doc_path(self) -> Path:
        return page_path(self.code)

    def doc(self) -> str:
        return self.doc_path().read_text(encoding="utf-8")

    def doc_url(self) -> str:
        return page_url(self.code)


VERIFY_CODES: Dict[str, VerifyCode] = {entry.code: entry for entry in (
    VerifyCode("TL901", "unregistered-at-run-time", Severity.ERROR,
               "a tensor or a container of modules/parameters held on the built module but not registered "
               "(exact, from the object)",
               grading="error when it requires grad; warning otherwise"),
    VerifyCode("TL902", "left-behind-by-move", Severity.ERROR,
               "a tensor of the module tree that model.to(device) did not move"),
    VerifyCode("TL903", "gradient-outside-parameters", Severity.ERROR,
               "a tensor that receives a gradient in backward() but is not in parameters(): never trained",
               grading="error; warning when the output depends on no trainable tensor; information for a "
                       "registered submodule forward never calls"),
    VerifyCode("TL904", "never-updated", Severity.ERROR,
               "a trainable tensor that optimizer steps never change, or a parameter with no gradient on every "
               "step",
               grading="error for a trainable tensor that never changed; warning for a parameter with no gradient; "
                       "information for an expert routing sent no tokens"),
    VerifyCode("TL905", "verification-failed", Severity.ERROR,
               "importing, building, moving, forward, backward or a step failed, ended the process or timed out: "
               "the error and its line in your file"),
    VerifyCode("TL906", "parameter-created-in-forward", Severity.ERROR,
               "a parameter created or replaced while forward ran: an optimizer built before the first batch "
               "never updates it"),
    VerifyCode("TL907", "lost-by-checkpoint", Severity.ERROR,
               "the trained module's state_dict(), loaded into a new instance, does not load or does not compute "
               "what the module computed: the tensors and numbers a checkpoint does not carry; under "
               "`--device cuda`, a checkpoint saved on the GPU that does not run or compute the same on the CPU",
               grading="error; warning for a device written into forward; information when nothing the "
                       "module holds explains the difference"),
    VerifyCode("TL908", "gradient-not-reduced-by-ddp", Severity.ERROR,
               "with --ddp, two steps under DistributedDataParallel (2 gloo processes on the CPU): a gradient "
               "DDP does not average across processes, or a parameter without a gradient that DDP waits for",
               grading="error; warning when DDP training fails otherwise, or waits without raising"),
)}

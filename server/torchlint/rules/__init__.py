"""The rules, one per file (``tlNNN_name.py``), found by their file names.

Each file defines one :class:`~torchlint.rules.base.Rule` subclass; its doc page
is ``torchlint/docs/TLNNN.md``. ``ALL_CODES`` adds the codes runtime verification reports
(``verify_codes``): every code torchlint can print, each with its name, default severity,
summary and page.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Dict, List, Union

from .base import Rule
from .verify_codes import VERIFY_CODES, VerifyCode

_RULE_FILE = re.compile(r"^tl\d{3}_\w+$")


def _load() -> List[Rule]:
    rules = []
    for info in pkgutil.iter_modules(__path__):
        if not _RULE_FILE.match(info.name):
            continue
        module = importlib.import_module("%s.%s" % (__name__, info.name))
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule \
                    and value.__module__ == module.__name__:
                rules.append(value())
    return sorted(rules, key=lambda r: r.code)


ALL_RULES: List[Rule] = _load()
RULES_BY_CODE: Dict[str, Rule] = {rule.code: rule for rule in ALL_RULES}
ALL_CODES: Dict[str, Union[Rule, VerifyCode]] = {**RULES_BY_CODE, **VERIFY_CODES}

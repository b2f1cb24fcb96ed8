"""The `# expect: TL101` marks of fixture files: which findings, and how many, they announce.

The notation, on the line where each finding starts:

- `# expect: TL101` - one TL101 finding starts on this line;
- `# expect: TL101, TL301` - one of each;
- `# expect: TL101*2` (or `TL101, TL101`) - two TL101 findings start on this line, at two
  different columns. Each mark counts one finding: a rule that reports the same finding twice
  (same code, line and column) always fails, even with `*2`;
- `# expect: TL102; after fix: TL106` - fixing this line's findings brings a finding of another
  rule to light here (wrapping a list of layers that forward never uses in `nn.ModuleList` makes
  it a registered but unused submodule). Without such a mark, a fix must not add any finding.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Set, Tuple

_CODE = r"TL\d{3}(?:\s*\*\s*\d+)?"
# `x = torch.randn(3)  # expect: TL101` or `# expect: TL101, TL301` or `# expect: TL101*2`
EXPECT = re.compile(r"#\s*expect:\s*(%s(?:\s*,\s*%s)*)" % (_CODE, _CODE))
AFTER_FIX = re.compile(r"#\s*expect:.*;\s*after fix:\s*(%s(?:\s*,\s*%s)*)" % (_CODE, _CODE))


def expected_counts(text: str, pattern: re.Pattern = EXPECT) -> Counter:
    """How many findings of each (line, code) a fixture's `# expect:` comments announce."""
    expected: Counter = Counter()
    # Split like Python's tokenizer (not str.splitlines, which also breaks on form feeds).
    for lineno, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        match = pattern.search(line)
        if match:
            for mark in re.split(r"\s*,\s*", match.group(1)):
                code, _, times = (part.strip() for part in mark.partition("*"))
                expected[(lineno, code)] += int(times) if times else 1
    return expected


def expected_findings(text: str) -> Set[Tuple[int, str]]:
    """The (line, code) pairs a fixture's `# expect:` comments announce (counts left out)."""
    return set(expected_counts(text))


def expected_after_fix(text: str) -> Counter:
    """The findings that fixing a line brings to light: (line of the fixed finding, code) -> count."""
    return expected_counts(text, AFTER_FIX)

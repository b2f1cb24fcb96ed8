"""The `# expect: TL101` marks of fixture files: which (line, code) findings they announce."""
from __future__ import annotations

import re
from typing import Set, Tuple

# `x = torch.randn(3)  # expect: TL101` or `# expect: TL101, TL301`
EXPECT = re.compile(r"#\s*expect:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


def expected_findings(text: str) -> Set[Tuple[int, str]]:
    """The (line, code) pairs a fixture's `# expect:` comments announce."""
    expected = set()
    # Split like Python's tokenizer (not str.splitlines, which also breaks on form feeds).
    for lineno, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group(1)):
                expected.add((lineno, code))
    return expected

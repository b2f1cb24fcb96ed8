"""benchmarks/README.md: its current-results table has one row per benchmark script, and every link
to one of its sections (from the page itself, the top-level README, the docs and the code's
comments) names a heading that exists."""
import re
from pathlib import Path
from typing import List, Set

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
PAGE = BENCHMARKS / "README.md"
TOP_README = ROOT / "README.md"
INPUT_MAKERS = {"make_corpus.py", "make_big_model.py", "plant_bugs.py"}  # they make the inputs and measure nothing


def heading_anchors(text: str) -> Set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, each space a
    hyphen, a repeated one numbered (-1, -2, ...). Lines in fenced code are not headings."""
    anchors: Set[str] = set()
    seen = {}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.+)", line)
        if heading:
            anchor = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            anchors.add(anchor if count == 0 else "%s-%d" % (anchor, count))
    return anchors


def section_lines(text: str, title: str) -> List[str]:
    """The lines under the ``## title`` heading, up to the next heading of its level or above."""
    lines = text.splitlines()
    start = lines.index("## " + title) + 1 if "## " + title in lines else len(lines)
    end = next((n for n in range(start, len(lines)) if re.match(r"#{1,2} ", lines[n])), len(lines))
    return lines[start:end]


def test_the_anchors_are_githubs():
    text = ("# Benchmarks\n## Figures\n## Figures\n## `--fix` of N fixes (`bench_fix.py`, issue 49)\n"
            "## 4,000 lines: memory over 10,000 edits (2026-11-25)\n```sh\n# not a heading\n```\n")
    assert heading_anchors(text) == {"benchmarks", "figures", "figures-1", "--fix-of-n-fixes-bench_fixpy-issue-49",
                                     "4000-lines-memory-over-10000-edits-2026-11-25"}


def test_every_benchmark_script_has_one_row_of_current_results():
    rows = [line for line in section_lines(PAGE.read_text(encoding="utf-8"), "Current results")
            if line.startswith("| `")]
    named = [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]
    scripts = sorted(path.name for path in BENCHMARKS.glob("*.py") if path.name not in INPUT_MAKERS)
    assert len(scripts) > 10
    assert sorted(named) == scripts


def test_every_tuned_constant_row_names_a_file_that_exists():
    table = [line.split("|") for line in section_lines(PAGE.read_text(encoding="utf-8"), "Tuned constants")
             if line.startswith("|")]
    rows = table[2:]  # below the header and its rule
    places = [re.search(r"`(server/[^`]+\.py)`", row[3]) for row in rows]
    assert rows and all(places), [row[1] for row, place in zip(rows, places) if not place]
    missing = [place.group(1) for place in places if not (ROOT / place.group(1)).is_file()]
    assert not missing


def test_links_to_the_benchmarks_page_name_its_headings():
    page = PAGE.read_text(encoding="utf-8")
    anchors = heading_anchors(page)
    links = [("benchmarks/README.md", anchor, anchors) for anchor in re.findall(r"\]\(#([^)\s]+)\)", page)]
    top_anchors = heading_anchors(TOP_README.read_text(encoding="utf-8"))
    links += [("benchmarks/README.md", anchor, top_anchors) for anchor in re.findall(r"\]\(\.\./README\.md#([^)\s]+)\)", page)]
    elsewhere = [TOP_README, *(ROOT / "docs").rglob("*.md"), *(ROOT / "server" / "torchlint").rglob("*.py")]
    for path in elsewhere:
        for anchor in re.findall(r"benchmarks/README\.md#([\w\-]+)", path.read_text(encoding="utf-8")):
            links.append((str(path.relative_to(ROOT)), anchor, anchors))
    assert any(where.startswith("server/") for where, _, _ in links)  # the code's comments point there
    broken = [(where, anchor) for where, anchor, known in links if anchor not in known]
    assert not broken

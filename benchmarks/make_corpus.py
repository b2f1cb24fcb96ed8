"""Build the benchmark corpus: real PyTorch model code, copied from the installed torch.

    python benchmarks/make_corpus.py [DEST] [--min-files 300] [--verbatim]

Copies the .py files of torch's own nn.modules, nn.parallel, optim, ao.nn and
distributed packages (more subpackages only if that gives fewer than --min-files)
into one flat folder, named after their path (``nn/modules/conv.py`` becomes
``nn__modules__conv.py``), in sorted order. torch is located, never imported.

Relative imports (``from .module import Module``) are rewritten to the absolute
form user code writes (``from torch.nn.modules.module import Module``), within the
same line, so line numbers still match torch's sources; --verbatim copies bytes as is.

Re-running rebuilds the folder from scratch (only a folder this script made, or an
empty one, is ever removed).
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import List, Optional, Tuple

DEFAULT_DEST = Path(__file__).resolve().parent / "corpus"
MARKER = ".torchlint-bench-corpus"  # says "this folder is ours to delete"

# torch subpackages to copy, in this order; the extra ones only when needed.
PRIMARY = ["nn/modules", "nn/parallel", "optim", "ao/nn", "distributed"]
EXTRA = ["nn/utils", "ao/quantization", "distributions", "nn/attention", "fx", "_dynamo"]

RELATIVE_FROM = re.compile(r"from\s+([.\w\s]*?)\s*import\b")


def torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed in %s" % sys.executable)
    return Path(list(spec.submodule_search_locations)[0])


def python_files(root: Path, subpackage: str) -> List[Path]:
    folder = root / subpackage
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*.py") if p.is_file() and p.stat().st_size > 0)


def select_files(root: Path, min_files: int) -> List[Path]:
    chosen: List[Path] = []
    seen = set()
    for subpackage in PRIMARY + EXTRA:
        if subpackage in EXTRA and len(chosen) >= min_files:
            break
        for path in python_files(root, subpackage):
            if path not in seen:
                seen.add(path)
                chosen.append(path)
    return chosen


def flat_name(root: Path, path: Path) -> str:
    return "__".join(path.relative_to(root).parts)


def absolute_module(root: Path, path: Path, level: int, module: Optional[str]) -> str:
    """What ``from <level dots><module> import`` means for the file at ``path``."""
    package = ["torch"] + list(path.relative_to(root).parent.parts)
    if level > 1:
        package = package[:len(package) - (level - 1)]
    return ".".join(package + ([module] if module else []))


def absolutize_imports(text: str, root: Path, path: Path) -> str:
    """Rewrite relative imports in place; the text unchanged when any rewrite is unsure."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return text
    lines = text.splitlines(keepends=True)
    expected: List[Tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        target = absolute_module(root, path, node.level, node.module)
        line = lines[node.lineno - 1]
        match = RELATIVE_FROM.match(line, node.col_offset)
        if match is None:
            return text
        lines[node.lineno - 1] = line[:match.start(1)] + target + line[match.end(1):]
        expected.append((node.lineno, target))
    rewritten = "".join(lines)
    # Check the result: every rewritten import now absolute and pointing where intended.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            new_tree = ast.parse(rewritten)
    except (SyntaxError, ValueError):
        return text
    found = sorted((n.lineno, n.module) for n in ast.walk(new_tree)
                   if isinstance(n, ast.ImportFrom) and n.level == 0 and n.lineno in dict(expected))
    if not set(expected) <= set(found) or any(isinstance(n, ast.ImportFrom) and n.level
                                              for n in ast.walk(new_tree)):
        return text
    return rewritten


def prepare_dest(dest: Path) -> None:
    if dest.exists():
        if not dest.is_dir():
            sys.exit("%s exists and is not a folder" % dest)
        if any(dest.iterdir()) and not (dest / MARKER).exists():
            sys.exit("%s is not empty and was not made by this script; refusing to delete it" % dest)
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / MARKER).write_text("built by benchmarks/make_corpus.py; deleted on rebuild\n")


def build(dest: Path, min_files: int, verbatim: bool) -> Tuple[int, int, int, int]:
    root = torch_root()
    files = select_files(root, min_files)
    names = [flat_name(root, p) for p in files]
    if len(set(names)) != len(names):
        sys.exit("flattened names collide; cannot build the corpus")
    prepare_dest(dest)
    total_lines = total_bytes = rewritten = 0
    for path, name in zip(files, names):
        if verbatim:
            shutil.copyfile(path, dest / name)
            data = (dest / name).read_bytes()
        else:
            text = path.read_text(encoding="utf-8")
            new_text = absolutize_imports(text, root, path)
            rewritten += new_text != text
            data = new_text.encode("utf-8")
            (dest / name).write_bytes(data)
        total_bytes += len(data)
        total_lines += data.count(b"\n") + (not data.endswith(b"\n"))
    return len(files), total_lines, total_bytes, rewritten


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=DEFAULT_DEST,
                        help="folder to (re)build (default: benchmarks/corpus)")
    parser.add_argument("--min-files", type=int, default=300,
                        help="add more torch subpackages until at least this many files")
    parser.add_argument("--verbatim", action="store_true",
                        help="copy files byte for byte (keep relative imports)")
    args = parser.parse_args(argv)
    files, lines, size, rewritten = build(args.dest.resolve(), args.min_files, args.verbatim)
    print("corpus: %s" % args.dest)
    print("torch:  %s" % torch_root())
    print("files:  %d (%d with relative imports made absolute)" % (files, rewritten))
    print("lines:  %d" % lines)
    print("bytes:  %d (%.1f MiB)" % (size, size / 2 ** 20))
    if files < args.min_files:
        print("warning: fewer files than --min-files=%d" % args.min_files)
    return 0


if __name__ == "__main__":
    sys.exit(main())

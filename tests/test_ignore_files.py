"""What `torchlint check` walks past: .gitignore files as git reads them (pathspec)."""
from pathlib import Path

from testkit.support import run_cli
from torchlint.files import GitIgnores, discover


def tree(root: Path, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def found(root: Path, **kwargs) -> list:
    return sorted(p.relative_to(root).as_posix() for p in discover([root], root, **kwargs).files)


def test_nested_gitignores_and_negation(tmp_path):
    tree(tmp_path, {
        ".gitignore": "*.gen.py\n!keep.gen.py\n/out/\n",
        "a.py": "", "x.gen.py": "", "keep.gen.py": "", "out/o.py": "", "pkg/out/inner.py": "",
        "pkg/.gitignore": "local_*.py\n!local_ok.py\n!special.gen.py\n",
        "pkg/local_tmp.py": "", "pkg/local_ok.py": "", "pkg/special.gen.py": "", "pkg/other.gen.py": "",
        "pkg/deeper/local_x.py": "", "elsewhere/local_y.py": "",
    })
    assert found(tmp_path) == [
        "a.py", "elsewhere/local_y.py", "keep.gen.py",
        "pkg/local_ok.py", "pkg/out/inner.py",  # /out/ is anchored to the root's folder
        "pkg/special.gen.py",  # the deeper file re-includes what the root's ignores
    ]
    assert found(tmp_path, use_gitignore=False) == sorted([
        "a.py", "x.gen.py", "keep.gen.py", "out/o.py", "pkg/out/inner.py", "pkg/local_tmp.py",
        "pkg/local_ok.py", "pkg/special.gen.py", "pkg/other.gen.py", "pkg/deeper/local_x.py",
        "elsewhere/local_y.py"])


def test_walking_a_subfolder_still_reads_the_gitignores_above_it(tmp_path):
    tree(tmp_path, {".gitignore": "generated/\n", "pkg/generated/g.py": "", "pkg/m.py": ""})
    files = discover([tmp_path / "pkg"], tmp_path).files
    assert [p.name for p in files] == ["m.py"]


def test_an_ignored_folder_named_on_the_command_line_is_checked(tmp_path):
    # As with `exclude` (this repository excludes tests/fixtures and checks them by name).
    tree(tmp_path, {".gitignore": "generated/\n*.tmp.py\n", "generated/g.py": "", "generated/x.tmp.py": "",
                    "generated/sub/s.py": ""})
    files = discover([tmp_path / "generated"], tmp_path).files
    assert sorted(p.relative_to(tmp_path).as_posix() for p in files) == ["generated/g.py", "generated/sub/s.py"]


def test_force_exclude_applies_gitignore_to_named_files(tmp_path):
    tree(tmp_path, {".gitignore": "vendored/\n*.gen.py\n", "vendored/v.py": "", "g.gen.py": "", "m.py": ""})
    named = [tmp_path / "vendored" / "v.py", tmp_path / "g.gen.py", tmp_path / "m.py"]
    assert [p.name for p in discover(named, tmp_path).files] == ["g.gen.py", "m.py", "v.py"]
    assert [p.name for p in discover(named, tmp_path, force_exclude=True).files] == ["m.py"]


def test_outside_the_root_nothing_is_ignored(tmp_path):
    tree(tmp_path, {"project/.gitignore": "*.py\n", "other/o.py": ""})
    ignores = GitIgnores(tmp_path / "project")
    assert not ignores.ignored_file(tmp_path / "other" / "o.py")
    assert ignores.ignored_file(tmp_path / "project" / "p.py")


# -- `exclude` patterns: the same .gitignore syntax (pathspec), in the order given ---------------

def excludes(*patterns):
    from torchlint.files import GlobPattern

    return [GlobPattern(p) for p in patterns]


def test_exclude_nested_patterns_and_negation(tmp_path):
    tree(tmp_path, {
        "a.py": "", "gen/a_pb2.py": "", "gen/keep_pb2.py": "", "src/deep/gen/b.py": "", "src/gen.py": "",
        "docs/x.py": "", "docs/api/y.py": "", "data/z.py": "", "pkg/data": "",
        "out/o.py": "", "out/kept.py": "",
    })
    patterns = excludes(
        "*_pb2.py", "!keep_pb2.py",  # a later negation re-includes one file
        "**/deep/gen/",  # nested folder, matched at any depth, folders only
        "/docs/**/*.py", "!/docs/api/*.py",  # anchored to the root; the negation wins for api/
        "data/",  # a folder, not the file `pkg/data`
        "out", "!out/kept.py",  # the walk never enters an excluded folder: git's rule
    )
    assert found(tmp_path, exclude=patterns) == [
        "a.py", "docs/api/y.py", "gen/keep_pb2.py", "src/gen.py",
    ]


def test_exclude_order_decides(tmp_path):
    tree(tmp_path, {"a_pb2.py": "", "b.py": ""})
    assert found(tmp_path, exclude=excludes("!a_pb2.py", "*_pb2.py")) == ["b.py"]
    assert found(tmp_path, exclude=excludes("*_pb2.py", "!a_pb2.py")) == ["a_pb2.py", "b.py"]


def test_excluded_paths_named_on_the_command_line(tmp_path):
    """As ruff does: a path named on the command line is checked even when excluded (tests name
    `tests/fixtures/...`), unless --force-exclude (pre-commit names every changed file)."""
    tree(tmp_path, {"gen/a.py": "", "gen/sub/b.py": "", "c_pb2.py": "", "keep_pb2.py": ""})
    patterns = excludes("gen", "*_pb2.py", "!keep_pb2.py")
    named = [tmp_path / "gen", tmp_path / "c_pb2.py", tmp_path / "keep_pb2.py"]

    def listed(**kwargs):
        return sorted(p.relative_to(tmp_path).as_posix() for p in discover(named, tmp_path, patterns, **kwargs).files)

    assert listed() == ["c_pb2.py", "gen/a.py", "gen/sub/b.py", "keep_pb2.py"]
    assert listed(force_exclude=True) == ["keep_pb2.py"]


def test_a_package_named_like_a_default_exclude_is_checked(tmp_path):
    # `build` and `venv` are skipped as build output and environments, but a folder holding
    # __init__.py is source code with an unlucky name; a user's pattern still decides for it.
    from torchlint.files import GlobPattern
    tree(tmp_path, {"build/out.py": "", "venv/lib.py": "", "dist/d.py": "",
                    "src/build/__init__.py": "", "src/build/steps.py": "", "venv2/__init__.py": "",
                    "src/venv/__init__.py": "", "src/venv/env.py": ""})
    discovery = discover([tmp_path], tmp_path)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in discovery.files)
    assert names == ["src/build/__init__.py", "src/build/steps.py", "src/venv/__init__.py", "src/venv/env.py",
                     "venv2/__init__.py"]
    assert sorted(p.name for p in discovery.excluded_by_default) == ["build", "dist", "venv"]
    assert "src/build/steps.py" not in found(tmp_path, exclude=[GlobPattern("build")])
    assert "build/out.py" in found(tmp_path, exclude=[GlobPattern("!build")])


def test_verbose_says_which_folders_the_default_excludes_skipped(tmp_path, capsys):
    tree(tmp_path, {"build/out.py": "import torch\n", "model.py": "import torch\n"})
    code, _, err = run_cli(["check", "--no-infer", "-v", "."], capsys, cwd=tmp_path)
    assert code == 0 and "torchlint: note: skipped build: a default exclude" in err, err
    code, _, err = run_cli(["check", "--no-infer", "."], capsys, cwd=tmp_path)
    assert "default exclude" not in err

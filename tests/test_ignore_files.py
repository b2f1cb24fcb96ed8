"""What `torchlint check` walks past: .gitignore files as git reads them (pathspec)."""
from pathlib import Path

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

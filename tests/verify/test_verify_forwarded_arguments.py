"""A class whose __init__ takes *args / **kwargs and passes them on to a base that needs arguments
(issue #44): built with no arguments it raises "missing 1 required positional argument" from the
base, which is a class that needs arguments, never a crash (TL905). Real constructor crashes,
TypeErrors included, still are. One child process for the file.
"""
from __future__ import annotations

import argparse

import pytest

from torchlint.verify import cli_command, verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import class_report, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class ChannelScale(nn.Module):
    def __init__(self, layout, eps=1e-6):  # (a name that says nothing: no argument is made up for it)
        super().__init__()
        self.log_scale = nn.Parameter(torch.zeros(1, layout["channels"], 1))
        self.eps = eps

    def forward(self, x):
        return x * (self.log_scale.exp() + self.eps)


class ActNorm(ChannelScale):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


class StackedActNorm(ActNorm):
    """Two hops of *args / **kwargs before the base that needs them."""

    def __init__(self, *layers_args, **options):
        super().__init__(*layers_args, **options)


class KeywordsOnly(ChannelScale):
    """The call that passes them on spans lines."""

    def __init__(self, **options):
        super().__init__(
            eps=1e-5,
            **options,
        )


def make_table(size):
    return torch.arange(size, dtype=torch.float32)


class CallsSuperWithNothing(ChannelScale):
    """A real crash: the arguments it takes are never passed on."""

    def __init__(self, *args, **kwargs):
        super(CallsSuperWithNothing, self).__init__()


class HelperCrash(nn.Module):
    """A real crash: the missing argument is a helper's, inside the body."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.table = make_table()

    def forward(self, x):
        return x + self.table


class WrongInside(ChannelScale):
    """A real crash: a TypeError of another kind, after the base was built."""

    def __init__(self, *args, **kwargs):
        super().__init__({"channels": 4})
        self.width = len(4)


class Healthy(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("forwarded"), "models.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


@pytest.mark.parametrize("name, signature, base, example", [
    ("ActNorm", "(*args, **kwargs)", "ChannelScale(layout, eps=1e-06)", '{"layout": ...}'),
    ("StackedActNorm", "(*layers_args, **options)", "ChannelScale(layout, eps=1e-06)", '{"layout": ...}'),
    ("KeywordsOnly", "(**options)", "ChannelScale(layout, eps=1e-06)", '{"layout": ...}'),
])
def test_arguments_passed_on_to_a_base_that_needs_them_skip_the_class(report, name, signature, base, example):
    cls = class_report(report, name)
    assert cls.status == "skipped" and cls.issues == []
    assert cls.skip_reason.startswith("needs arguments %s, passed on to %s:" % (signature, base)), cls.skip_reason
    assert "--init-kwargs '%s'" % example in cls.skip_reason
    assert "[tool.torchlint.verify.classes.%s]" % name in cls.skip_reason


@pytest.mark.parametrize("name, needle, error", [
    ("CallsSuperWithNothing", "super(CallsSuperWithNothing, self).__init__()", "missing 1 required positional argument: 'layout'"),
    ("HelperCrash", "self.table = make_table()", "missing 1 required positional argument: 'size'"),
    ("WrongInside", "self.width = len(4)", "TypeError: object of type 'int' has no len()"),
])
def test_a_constructor_that_crashes_is_still_tl905(report, models, name, needle, error):
    cls = class_report(report, name)
    assert cls.status == "failed"
    (tl905,) = issues(report, "TL905", name)
    assert error in tl905.message and tl905.line == line_of(models, needle)


def test_given_the_arguments_the_class_is_verified(models):
    result = verify_file(str(models), class_name="ActNorm", init_kwargs='{"layout": {"channels": 3}}', input_shapes="2,3,5",
                         python=torch_python(), timeout=300)
    cls = class_report(result, "ActNorm")
    assert cls.status == "verified" and cls.issues == [], cls.issues


def test_a_clean_file_with_such_a_class_exits_zero(tmp_path, capsys):
    # The skipped classes and Healthy, without the crashing ones.
    clean = MODELS.split("def make_table", 1)[0] + "\n\nclass Healthy" + MODELS.split("class Healthy", 1)[1]
    path = write_module(tmp_path, "clean.py", clean)
    parser = argparse.ArgumentParser(prog="torchlint verify")
    cli_command.add_arguments(parser)
    status = cli_command.run(parser.parse_args([str(path), "--python", torch_python()]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_CLEAN, out
    assert "TL905" not in out and "ActNorm: skipped: needs arguments" in out

"""Statements that never run (the rest of a block after `raise`, `return`, `continue` or
`break`) make no finding, whichever rule would report them; each case is checked next to the
same code with the statement reachable, which is reported."""
from __future__ import annotations

import textwrap

from testkit.rules import check
from torchlint.incremental import IncrementalChecker


def codes_by_line(text):
    return {(f.range.start.line, f.code) for f in check(textwrap.dedent(text)).findings}


LAYER_AFTER_RAISE = """\
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, kind: str = "linear"):
        super().__init__()
        if kind == "linear":
            self.proj = nn.Linear(4, 4)
        else:
            {terminator}
            self.extra = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)
"""


def test_tl106_quiet_on_a_layer_assigned_after_raise_in_the_same_block():
    assert (11, "TL106") not in codes_by_line(LAYER_AFTER_RAISE.format(terminator='raise NotImplementedError()'))
    assert (11, "TL106") in codes_by_line(LAYER_AFTER_RAISE.format(terminator='print("no such kind")'))


def test_tl106_after_return_too():
    assert (11, "TL106") not in codes_by_line(LAYER_AFTER_RAISE.format(terminator="return"))


TENSOR_AFTER = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n: int = 4):
        super().__init__()
        self.proj = nn.Linear(n, n)
        {terminator}
        self.mask = torch.tril(torch.ones(n, n))

    def forward(self, x):
        return self.proj(x) * self.mask
"""


def test_tl101_quiet_after_return_in_init():
    assert (10, "TL101") not in codes_by_line(TENSOR_AFTER.format(terminator="return"))
    assert (10, "TL101") in codes_by_line(TENSOR_AFTER.format(terminator="pass"))


MOVE_IN_LOOP = """\
import torch


def run(n, dev):
    for i in range(n):
        t = torch.randn(3)
        if i == 0:
            {terminator}
            t.cuda()
        print(t.sum())
"""


def test_tl203_quiet_after_continue_and_break():
    assert (9, "TL203") in codes_by_line(MOVE_IN_LOOP.format(terminator="print(x)"))
    for terminator in ("continue", "break", "raise ValueError(i)"):
        assert (9, "TL203") not in codes_by_line(MOVE_IN_LOOP.format(terminator=terminator)), terminator


def test_a_whole_compound_statement_after_raise_is_unreachable():
    text = """\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, n: int = 4, deep: bool = False):
            super().__init__()
            self.proj = nn.Linear(n, n)
            raise NotImplementedError
            if deep:
                self.mask = torch.ones(n)
                self.extra = nn.Linear(n, n)

        def forward(self, x):
            return self.proj(x) * self.mask
    """
    assert codes_by_line(text) == set()


def test_a_raise_in_one_branch_leaves_what_follows_the_if_reachable():
    text = """\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, n: int = 4):
            super().__init__()
            if n < 0:
                raise ValueError(n)
            self.mask = torch.ones(n)
            self.extra = nn.Linear(n, n)

        def forward(self, x):
            return x * self.mask
    """
    assert codes_by_line(text) == {(10, "TL101"), (11, "TL106")}


def test_a_raise_and_a_statement_on_one_line():
    text = """\
    import torch


    def run(n):
        t = torch.randn(n)
        raise ValueError(n); t.cuda()
    """
    assert codes_by_line(text) == set()


def test_the_incremental_checker_agrees_after_an_edit():
    text = textwrap.dedent(TENSOR_AFTER.format(terminator="return")) + "\n\nVALUE = 1\n"
    checker = IncrementalChecker("model.py")
    assert [f.code for f in checker.check(text).findings] == []
    edited = text.replace("VALUE = 1", "VALUE = 2")
    assert [f.code for f in checker.check(edited).findings] == []

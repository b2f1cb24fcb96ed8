"""analysis.construction: which methods building a Module runs, which of their statements may run
before nn.Module.__init__, and the path questions TL101 asks inside one method."""
from __future__ import annotations

import ast
import textwrap

from torchlint.analysis.construction import always_after, always_before, construction, exclusive
from torchlint.analysis.context import FileContext
from torchlint.analysis.dtypes import FLOAT, INTEGRAL, dtype_family, is_zero_dim


def context(text):
    text = textwrap.dedent(text)
    return FileContext(text, "model.py", ast.parse(text))


def statements(ctx, method="__init__"):
    """The simple statements of a method, by their source text."""
    info = ctx.module_classes[-1]
    scope = info.method_scopes[method]
    found = {}
    for node in ast.walk(scope.node):
        if isinstance(node, (ast.Assign, ast.Expr, ast.Raise, ast.Pass)):
            found[ast.unparse(node)] = node
    return scope, found


PATHS = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.w = torch.zeros(3)
        if a:
            self.w = nn.Parameter(self.w)
        else:
            x = 1
        try:
            y = 2
        except ValueError:
            z = 3
        except KeyError:
            q = 4
        else:
            r = 5
        finally:
            f = 6
        for i in range(b):
            loop = 7
"""


def test_exclusive_branches():
    ctx = context(PATHS)
    _, s = statements(ctx)
    index = ctx.index
    assert exclusive(index, s["self.w = nn.Parameter(self.w)"], s["x = 1"])
    assert exclusive(index, s["z = 3"], s["q = 4"])
    assert exclusive(index, s["z = 3"], s["r = 5"])
    assert not exclusive(index, s["y = 2"], s["z = 3"])  # the body may run part way, then a handler
    assert not exclusive(index, s["z = 3"], s["f = 6"])
    assert not exclusive(index, s["self.w = torch.zeros(3)"], s["x = 1"])


def test_always_after_and_before():
    ctx = context(PATHS)
    scope, s = statements(ctx)
    index = ctx.index
    first = s["self.w = torch.zeros(3)"]

    def marks(*texts):
        ids = {id(s[t]) for t in texts}
        return lambda stmt: id(stmt) in ids

    assert not always_after(index, scope, first, marks("self.w = nn.Parameter(self.w)"))  # one arm only
    assert always_after(index, scope, first, marks("self.w = nn.Parameter(self.w)", "x = 1"))  # both arms
    assert always_after(index, scope, first, marks("f = 6"))  # a finally always runs
    assert not always_after(index, scope, first, marks("y = 2"))  # an exception may skip it...
    assert always_after(index, scope, first, marks("y = 2", "z = 3", "q = 4"))  # ...into a handler that runs one
    assert not always_after(index, scope, first, marks("loop = 7"))  # a loop may run no turn
    assert always_before(index, scope, s["f = 6"], marks("self.w = torch.zeros(3)"))
    assert not always_before(index, scope, s["r = 5"], marks("x = 1"))


def test_a_raise_covers_the_path_it_ends():
    ctx = context("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.w = torch.zeros(3)
            if a:
                self.w = nn.Parameter(self.w)
            else:
                raise ValueError(a)
    """)
    scope, s = statements(ctx)
    mark = s["self.w = nn.Parameter(self.w)"]
    assert always_after(ctx.index, scope, s["self.w = torch.zeros(3)"], lambda stmt: stmt is mark)


HELPERS = """\
import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        self.early()
        super().__init__()
        self.late()
        self.build()

    def early(self):
        self.a = 1

    def late(self):
        self.b = 2

    def build(self):
        pass

    def forward(self, x):
        return x


class Child(Base):
    def __init__(self):
        self.before_base()
        super().__init__()
        self.shared()

    def before_base(self):
        self.c = 3

    def build(self):
        self.d = 4

    def shared(self):
        self.e = 5

    def forward(self, x):
        self.shared()
        return x
"""


def test_construction_methods_and_what_runs_before_module_init():
    ctx = context(HELPERS)
    child = ctx.module_classes[-1]
    built = construction(ctx, child)
    names = {scope.name for scope in built.scopes.values()}
    # Base.__init__ through super(), its helpers, Child.build through Base.__init__; not `shared`,
    # which forward calls too.
    assert names == {"__init__", "early", "late", "build", "before_base"}
    by_name = {(scope.cls.name, scope.name): scope for scope in built.scopes.values()}
    assert built.runs_early(by_name["Child", "before_base"], by_name["Child", "before_base"].node.body[0])
    assert built.runs_early(by_name["Base", "early"], by_name["Base", "early"].node.body[0])
    assert not built.runs_early(by_name["Base", "late"], by_name["Base", "late"].node.body[0])
    assert not built.runs_early(by_name["Child", "build"], by_name["Child", "build"].node.body[0])
    init = by_name["Child", "__init__"]
    assert built.runs_early(init, init.node.body[0]) and not built.runs_early(init, init.node.body[2])
    assert built.module_init_call(init) is init.node.body[1]


def test_a_method_called_through_an_instance_is_not_construction_alone():
    ctx = context("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.set_w(torch.zeros(3))

        def set_w(self, w):
            self.w = w

        @classmethod
        def make(cls):
            net = cls()
            net.set_w(torch.ones(3))
            return net
    """)
    built = construction(ctx, ctx.module_classes[0])
    assert {scope.name for scope in built.scopes.values()} == {"__init__"}


def test_dtype_families_and_0_dim_tensors():
    ctx = context("""\
    import math
    import torch


    def f(n, w: float, k=2):
        t = torch.arange(n)
        return t
    """)
    scope = next(s for s in ctx.index.scopes if s.name == "f")

    def family(text):
        return dtype_family(ctx, ast.parse(text, mode="eval").body, scope)

    def zero_dim(text):
        return is_zero_dim(ctx, ast.parse(text, mode="eval").body, scope)

    for text in ("torch.arange(n)", "t", "t.view(1, -1)", "torch.tensor([1, 2])", "torch.tensor(True)",
                 "torch.zeros(3, dtype=torch.long)", "torch.randn(3) > 0", "torch.randn(3).bool()",
                 "torch.full((2,), 1)", "t.to(torch.int32)", "torch.randperm(n)", "t + 1"):
        assert family(text) == INTEGRAL, text
    for text in ("torch.arange(n) * 0.5", "t / 2", "torch.arange(0, 1, 0.1)", "torch.ones(3)", "t.float()",
                 "torch.tensor([1, 2.5])", "torch.full((2,), 1.0)", "torch.zeros(3, dtype=torch.half)"):
        assert family(text) == FLOAT, text
    for text in ("torch.tensor(data)", "torch.arange(n) * w", "torch.zeros_like(t)"):
        assert family(text) is None, text
    for text in ("torch.tensor(2.0)", "torch.tensor(-1)", "torch.tensor(w)", "torch.tensor(k)",
                 "torch.tensor(math.pi)", "torch.zeros(())", "torch.scalar_tensor(n)", "torch.tensor(2.0).cuda()"):
        assert zero_dim(text), text
    for text in ("torch.tensor(n)", "torch.tensor([2.0])", "torch.zeros(1)", "torch.tensor(2.0).view(1)"):
        assert not zero_dim(text), text

"""The node table (analysis/scopes.py: NodeTable) answers what walking the tree again would.

Rules read slices of it instead of calling ast.walk on each function or class, and the index takes
each statement's calls from it: these tests walk the tree the slow way and compare, order included
(rules keep the first of several candidates, so an order change could change a message).
"""
import ast
import sys
from pathlib import Path

import pytest

from torchlint.analysis.scopes import NodeTable, build_index, nodes_by_type

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from make_big_model import make_model_source  # noqa: E402

EDGES = '''
import torch
@deco(f(1), g(h()))
async def a(x=k(), *args, y=m(n()), z=None, w: ann() = d(), **kw) -> r():
    v = (q := p(1)) + s(t := 2)
    for i in it(j()): j()
    else: e()
    with ctx() as (u, v), other(o()): pass
    try: f()
    except E(): g()
    else: h()
    finally: i()
    match m():
        case [1, *rest] if guard(): z()
        case {"k": v}: y()
    lam = lambda a=b(): c(d())
    x, y = f(), g(h(), i())
    self.q: ann() = val(v())
    assert ok(), msg()
    raise E(f()) from c()
    while w(): x.append(y())
    return {k(): v() for k in ks() if c()}
class C(B(), metaclass=M(), **kw()):
    attr = [x() for x in y()]
    @dec()
    def m(self, a=d()):
        self.register_buffer("x", t())
        def inner(b=self.q()): return self.w.grad
        return self.x.grad, f"{self.y()!r:>{w()}}", a if b() else c()
'''


def _sources():
    yield "edges", EDGES
    yield "model", make_model_source(400)
    for path in sorted((ROOT / "examples").glob("*.py"))[:6]:
        yield path.name, path.read_text(encoding="utf-8")


SOURCES = list(_sources())
_MARKERS = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
_OWN_CODE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _stack_walk_of_body(root):
    """What a function's own code holds, as rules used to walk it: a stack from its last statement,
    skipping the functions, classes and lambdas inside."""
    stack = list(getattr(root, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, _OWN_CODE):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _reference_calls(tree):
    """The calls the index records, in its order, walked the way the index used to walk them."""
    found = []

    def visit(roots):
        stack = list(roots)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call):
                found.append(node)
            elif isinstance(node, ast.Lambda):
                continue
            stack.extend(ast.iter_child_nodes(node))

    def statement(stmt):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = [d for d in stmt.args.defaults + stmt.args.kw_defaults if d is not None]
            visit(stmt.decorator_list + defaults)
        elif isinstance(stmt, ast.ClassDef):
            visit(stmt.bases + [k.value for k in stmt.keywords] + stmt.decorator_list)
        elif not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for name, value in ast.iter_fields(stmt):
                if name in ("body", "orelse", "finalbody", "handlers", "cases"):
                    continue
                if isinstance(value, ast.AST):
                    visit([value])
                elif isinstance(value, list):
                    visit([v for v in value if isinstance(v, ast.AST)])
        blocks = [getattr(stmt, name, None) or [] for name in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ()) or ()]
        blocks += [c.body for c in getattr(stmt, "cases", ()) or ()]
        for block in blocks:
            for child in block:
                statement(child)

    for stmt in tree.body:
        statement(stmt)
    return found


@pytest.mark.parametrize("name,text", SOURCES, ids=[name for name, _ in SOURCES])
def test_slices_and_orders_match_walking_the_tree(name, text):
    tree = ast.parse(text)
    table = NodeTable(tree)
    roots = [tree] + [n for n in ast.walk(tree) if isinstance(n, _OWN_CODE)]
    assert len(roots) > 3
    for root in roots:
        for cls in (ast.Call, ast.Name, ast.Attribute, ast.Constant):
            walked = [n for n in ast.walk(root) if isinstance(n, cls)]
            assert table.in_walk_order(table.positions_under(root, cls)) == walked
            assert {id(n) for n in table.under(root, cls)} == {id(n) for n in walked}
            if not isinstance(root, ast.Lambda):
                assert table.own(root, cls) == [n for n in _stack_walk_of_body(root) if isinstance(n, cls)]
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _MARKERS):
                assert table.parent[id(child)] is node


@pytest.mark.parametrize("name,text", SOURCES, ids=[name for name, _ in SOURCES])
def test_nodes_by_type_are_ast_walks_nodes_in_its_order(name, text):
    tree = ast.parse(text)
    for root in [tree] + [n for n in ast.walk(tree) if isinstance(n, _OWN_CODE)]:
        walked = {}
        for node in ast.walk(root):
            if not isinstance(node, _MARKERS):
                walked.setdefault(type(node), []).append(node)
        found = nodes_by_type(root)
        assert list(found) == list(walked)  # (classes first met in the same order too)
        assert all([id(n) for n in found[cls]] == [id(n) for n in nodes] for cls, nodes in walked.items())


@pytest.mark.parametrize("name,text", SOURCES, ids=[name for name, _ in SOURCES])
def test_index_records_calls_in_the_order_of_a_walk_of_each_statement(name, text):
    tree = ast.parse(text)
    index = build_index(tree)
    expected = _reference_calls(tree)
    assert len(expected) > 5
    assert [id(c) for c in index.calls] == [id(c) for c in expected]


def test_own_loads_are_the_reads_of_a_name_in_a_functions_own_code():
    tree = ast.parse("def f(x):\n    y = x + 1\n    def g(x):\n        return x\n    return [x, lambda: x, y]\n")
    table = NodeTable(tree)
    f = tree.body[0]
    loads = table.own_loads(f, "x")
    assert [n.lineno for n in loads] == [5, 2]  # not g's x, not the lambda's
    assert table.own_loads(f, "y")[0].lineno == 5
    assert table.own_loads(f, "missing") == []

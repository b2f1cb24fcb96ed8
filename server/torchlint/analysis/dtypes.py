"""What names and syntax tell of a new tensor's dtype and shape: whether it holds integers or
booleans (which can never require grad, so ``nn.Parameter`` refuses them), and whether it is a
0-dim scalar (which CUDA operations accept from the CPU).

Both answer ``None`` / ``False`` when the code does not say: the rules use them to offer fewer
fixes or to grade lower, never to report more.
"""
from __future__ import annotations

import ast
from typing import Optional

from .context import FileContext
from .scopes import Scope

FLOAT, INTEGRAL = "float", "integral"

_INTEGRAL_DTYPES = frozenset("torch." + n for n in """
int8 int16 int32 int64 uint8 uint16 uint32 uint64 long int short char byte bool
""".split())
_FLOAT_DTYPES = frozenset("torch." + n for n in """
float16 float32 float64 bfloat16 half float double complex64 complex128 cfloat cdouble chalf
""".split())
_INTEGRAL_METHODS = frozenset("long int short char byte bool nonzero argmax argmin argsort".split())
_FLOAT_METHODS = frozenset("float double half bfloat16 cfloat cdouble".split())
# Methods and torch functions whose result has the dtype of the tensor they are given.
_SAME_DTYPE = frozenset("""
view view_as reshape reshape_as expand expand_as unsqueeze squeeze flatten unflatten permute transpose t
contiguous narrow select detach clone cuda cpu pin_memory repeat repeat_interleave flip roll tril triu
diag diagonal index_select gather masked_fill abs neg clamp clip cumsum cummax max min amax amin
""".split())
_INTEGRAL_FUNCTIONS = frozenset("torch." + n for n in """
randint randint_like randperm nonzero argmax argmin argsort bucketize searchsorted
eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_not logical_xor
LongTensor IntTensor ShortTensor ByteTensor CharTensor BoolTensor
cuda.LongTensor cuda.IntTensor cuda.ShortTensor cuda.ByteTensor cuda.CharTensor cuda.BoolTensor
""".split())
_FLOAT_FUNCTIONS = frozenset("torch." + n for n in """
zeros ones empty rand randn randn_like rand_like eye linspace logspace normal Tensor
FloatTensor DoubleTensor HalfTensor BFloat16Tensor cuda.FloatTensor cuda.DoubleTensor cuda.HalfTensor
""".split())
_ZERO_DIM_FACTORIES = frozenset("torch." + n for n in "zeros ones empty rand randn full".split())
_SCALAR_CONSTANTS = frozenset(["math.pi", "math.e", "math.tau", "math.inf", "numpy.pi", "numpy.e"])


def dtype_family(ctx: FileContext, node: Optional[ast.expr], scope: Optional[Scope], depth: int = 0) -> Optional[str]:
    """FLOAT or INTEGRAL (integers and booleans) when the expression says which, else None.
    ``torch.arange(n)`` with no float argument counts as integral (the way torch infers it)."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Compare):
        return INTEGRAL
    if isinstance(node, ast.IfExp):
        families = {dtype_family(ctx, node.body, scope, depth + 1), dtype_family(ctx, node.orelse, scope, depth + 1)}
        return INTEGRAL if INTEGRAL in families else families.pop() if len(families) == 1 else None
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div):
            return FLOAT
        sides = {_literal_family(side) or dtype_family(ctx, side, scope, depth + 1)
                 for side in (node.left, node.right)}
        if FLOAT in sides:
            return FLOAT
        return INTEGRAL if sides == {INTEGRAL} else None
    if isinstance(node, ast.UnaryOp):
        return dtype_family(ctx, node.operand, scope, depth + 1)
    if isinstance(node, ast.Subscript):
        return dtype_family(ctx, node.value, scope, depth + 1)
    if isinstance(node, ast.Name) and scope is not None:
        bindings = scope.locals.get(node.id, ())
        if len(bindings) == 1 and bindings[0].value is not None:
            return dtype_family(ctx, bindings[0].value, scope, depth + 1)
        return None
    if not isinstance(node, ast.Call):
        return None
    given = _dtype_argument(ctx, node)
    if given is not None:
        return given
    func = node.func
    qualified = ctx.qualify(func)
    if qualified is None and isinstance(func, ast.Attribute):
        method = func.attr
        if method in _INTEGRAL_METHODS:
            return INTEGRAL
        if method in _FLOAT_METHODS:
            return FLOAT
        if method in ("to", "type"):
            for arg in node.args:
                family = _named_dtype(ctx, arg)
                if family is not None:
                    return family
            return dtype_family(ctx, func.value, scope, depth + 1)
        if method in _SAME_DTYPE:
            return dtype_family(ctx, func.value, scope, depth + 1)
        return None
    if qualified is None:
        return None
    if qualified in _INTEGRAL_FUNCTIONS:
        return INTEGRAL
    if qualified in _FLOAT_FUNCTIONS:
        return FLOAT
    if qualified in ("torch.arange", "torch.range"):
        return FLOAT if any(_literal_family(a) == FLOAT for a in node.args + [k.value for k in node.keywords]) \
            else INTEGRAL
    if qualified in ("torch.tensor", "torch.as_tensor"):
        data = node.args[0] if node.args else None
        return _literal_family(data) if data is not None else None
    if qualified == "torch.full":
        fill = node.args[1] if len(node.args) > 1 else _keyword(node, "fill_value")
        return _literal_family(fill) if fill is not None else None
    if qualified in ("torch.cat", "torch.stack") and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
        families = {dtype_family(ctx, e, scope, depth + 1) for e in node.args[0].elts}
        return families.pop() if len(families) == 1 else None
    if qualified.startswith("torch.") and qualified[6:] in _SAME_DTYPE and node.args:
        return dtype_family(ctx, node.args[0], scope, depth + 1)
    return None


def _literal_family(node: Optional[ast.expr]) -> Optional[str]:
    """The dtype family torch infers from a Python literal: ints and bools integral, floats float."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int)):
            return INTEGRAL
        if isinstance(node.value, (float, complex)):
            return FLOAT
        return None
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        families = {_literal_family(e) for e in node.elts}
        if FLOAT in families:
            return FLOAT  # [1, 2.5] is float
        return INTEGRAL if families == {INTEGRAL} else None
    return None


def _dtype_argument(ctx: FileContext, call: ast.Call) -> Optional[str]:
    value = _keyword(call, "dtype")
    return _named_dtype(ctx, value) if value is not None else None


def _named_dtype(ctx: FileContext, node: ast.expr) -> Optional[str]:
    qualified = ctx.qualify(node) or ""
    if qualified in _INTEGRAL_DTYPES:
        return INTEGRAL
    if qualified in _FLOAT_DTYPES:
        return FLOAT
    return None


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_zero_dim(ctx: FileContext, node: Optional[ast.expr], scope: Optional[Scope]) -> bool:
    """A 0-dim tensor made from one number: ``torch.tensor(2.0)``, ``torch.tensor(-1)``,
    ``torch.tensor(w)`` for a parameter ``w: float`` (or with a number as its default),
    ``torch.scalar_tensor(x)``, ``torch.zeros(())``; casts and moves of one keep it so."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and ctx.qualify(node.func) is None \
            and node.func.attr in ("to", "cuda", "cpu", "detach", "clone", "float", "double", "half", "bfloat16",
                                   "long", "int", "bool"):
        node = node.func.value
    if not isinstance(node, ast.Call):
        return False
    qualified = ctx.qualify(node.func)
    if qualified == "torch.scalar_tensor":
        return True
    if qualified in ("torch.tensor", "torch.as_tensor"):
        data = node.args[0] if node.args else _keyword(node, "data")
        return data is not None and _scalar(ctx, data, scope)
    if qualified in _ZERO_DIM_FACTORIES:
        size = node.args[0] if node.args else _keyword(node, "size")
        return isinstance(size, (ast.Tuple, ast.List)) and not size.elts
    return False


def _scalar(ctx: FileContext, node: ast.expr, scope: Optional[Scope], depth: int = 0) -> bool:
    """A Python number, as far as the code says."""
    if depth > 4:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (bool, int, float))
    if isinstance(node, ast.UnaryOp):
        return _scalar(ctx, node.operand, scope, depth + 1)
    if isinstance(node, ast.BinOp):
        return _scalar(ctx, node.left, scope, depth + 1) and _scalar(ctx, node.right, scope, depth + 1)
    if isinstance(node, ast.Attribute):
        return ctx.qualify(node) in _SCALAR_CONSTANTS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("float", "int"):
        return True
    if isinstance(node, ast.Name) and scope is not None:
        bindings = scope.locals.get(node.id, ())
        if len(bindings) != 1:
            return False
        binding = bindings[0]
        if binding.value is not None:
            return _scalar(ctx, binding.value, scope, depth + 1)
        if isinstance(binding.stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _number_parameter(binding.stmt.args, node.id)
    return False


def _number_parameter(args: ast.arguments, name: str) -> bool:
    """A parameter annotated ``int``/``float``/``bool`` (also as one of a union's: a tensor made from
    it is 0-dim on the path a number takes, and the rule says less), or with a number as its default."""
    positional = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    for arg in positional + args.kwonlyargs:
        if arg.arg != name:
            continue
        if arg.annotation is not None and any(isinstance(n, ast.Name) and n.id in ("int", "float", "bool")
                                              for n in ast.walk(arg.annotation)):
            return True
        default = defaults.get(name)
        return isinstance(default, ast.Constant) and isinstance(default.value, (bool, int, float))
    return False

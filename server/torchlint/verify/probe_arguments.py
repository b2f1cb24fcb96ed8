"""Constructor arguments made up from a class's signature, for a class that nothing else builds
(no defaults, no call in the project, no parent that holds one): the probe's last resort.

Runs in the verification child (loaded by path, like probe_support): standard library only at
import time; the class and its module are live objects, so the signature, its annotations and
its defaults are read as Python sees them. Each parameter without a default gets a value from
its annotation (``int``, ``float``, ``bool``, a list or tuple of those, ``Optional[...]``, a
plain class of the user's whose own signature can be filled in the same way) and its name
(``in_channels``, ``dim``, ``num_heads``, ``num_layers``, ``dropout``, ``kernel_size``...).
A parameter that neither says anything about (a backbone module, a callable, a string) leaves
the class unbuilt: ``synthesize`` returns no candidate, and the class "needs arguments".
``*args, **kwargs`` passed on to a base are filled from the first base ``__init__`` with named
parameters. Nothing here runs user code except the construction of a user class used as an
argument (a config object), which the caller runs under its own guard.
"""
from __future__ import annotations

import inspect
import re
import typing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

# Sizes per candidate: (width, heads, list length). The width divides by the heads, so that an
# attention layer's dim % num_heads check passes; later candidates change the list length (2-D
# then 3-D windows and patches) and the width.
CANDIDATES = ((32, 4, 2), (64, 8, 3), (48, 3, 1))
MAX_DEPTH = 2  # a config object's own arguments, and theirs
# A list per stage (widths, rates, kernels) has this many: one length for all, so that a config's
# lists zipped together agree (hifi-gan's upsample rates and kernel sizes, each per upsampling).
STAGES = 2

_NOTHING = object()  # no value could be made for the parameter

# Name patterns (whole words of the parameter's snake_case name) -> how to fill it.
_HEADS = re.compile(r"(^|_)(n_?heads?|num_?heads?|heads|nhead|n_head|num_attention_heads)$")
_LAYERS = re.compile(r"(^|_)(num_?layers|n_?layers?|layers|depths?|num_?blocks|n_?blocks|blocks|repeats?)$")
_CLASSES = re.compile(r"(^|_)(num_?classes|n_?class(es)?|classes|num_?labels|n_?labels|vocab(_size)?|"
                      r"num_?tokens|n_?tokens|num_?embeddings)$")
_WIDTH = re.compile(r"(channels?|planes|features|dims?|width|hidden|size|units|filters|ch|nc|nf|ngf|ndf|"
                    r"d_model|embed|emb|c_in|c_out|in_c|out_c|inp|oup|hidden_size|latent)$|^(d|c|n_?embd|"
                    r"n_?feat|nin|nout|n_?hidden|n_?hid)$")
_KERNEL = re.compile(r"(^|_)(kernel(_size)?|k|ksize)$")
_ONE = re.compile(r"(^|_)(stride|dilation|groups|expansion|expand|scale_factor|upscale|factor|multiplier)$")
_PADDING = re.compile(r"(^|_)(padding|pad)$")
_WINDOW = re.compile(r"(^|_)(window(_size)?)$")
_PATCH = re.compile(r"(^|_)(patch(_size)?)$")
_SHIFT = re.compile(r"(^|_)(shift(_size)?|offset)$")
_LENGTH = re.compile(r"(^|_)(seq_?len(gth)?|max_?len(gth)?|length|num_?patches|n_?positions|max_?positions|"
                     r"context(_size)?|block_size|max_seq_len|num_?frames|frames)$")
_RATES = re.compile(r"(rates|dilations)$")
_ZERO_FLOAT = re.compile(r"(drop|dropout|p|prob|rate|noise|_p)$|^p_")
_EPS = re.compile(r"(^|_)(eps|epsilon)$")
_REDUCTION = re.compile(r"(^|_)(reduction|squeeze|ratio_reduction|r)$")
# Without an annotation: a plural of sizes is a list of them (one per layer), a count of fields a
# small number, an index the first, a coefficient or a bound a float.
_SIZES = re.compile(r"_(dims|sizes|widths|units)$|(^|_)dropouts$")
_FEW = re.compile(r"(^|_)(num_?fields|n_?fields|order)$")
_INDEX = re.compile(r"(^|_)(idx|index)$")
_COEFFICIENT = re.compile(r"(^|_)(alpha|beta|tau|temperature|sigma|margin|momentum|lr|learning_rate)$|"
                          r"^(max|min)_(action|value|scale|norm)$")


_CONFIG = re.compile(r"^(config|cfg|conf|args|hparams|hp|h|opt|opts|hyperparameters)$")
_FLAG = re.compile(r"^(use|is|has|enable|with|do)_")


class MadeUpConfig:
    """For a parameter named ``config`` / ``cfg`` / ``args`` / ``h`` that nothing says more about:
    an object whose attributes are made up by their names when the constructor reads them
    (``config.n_embd`` a width, ``config.n_head`` heads, ``config.attn_pdrop`` 0.0,
    ``config.use_bias`` False, ``h.upsample_rates`` a list); a name that says nothing is None.
    What the constructor sets on it stays set. The lists named in ``nested`` are made of lists
    (see ``nested_candidates``)."""

    def __init__(self, size: Tuple[int, int, int], nested: FrozenSet[str] = frozenset()) -> None:
        object.__setattr__(self, "_size", size)
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_nested", nested)
        object.__setattr__(self, "_lists_read", [])  # the lists made up, in the order read

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _CONFIG_SLOTS:
            raise AttributeError(name)
        values = self._values
        if name not in values:
            value = _config_value(_snake(name), self._size)
            if isinstance(value, list):
                self._lists_read.append(name)
                if name in self._nested:
                    value = [[item] * NESTED_LENGTH for item in value]
            values[name] = value
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self, name)
        return default if value is None else value

    def __repr__(self) -> str:
        if self._nested:
            return "a made-up config with nested %s" % ", ".join(sorted(self._nested))
        return "a config made up by its attribute names"


_CONFIG_SLOTS = ("_size", "_values", "_nested", "_lists_read")
NESTED_LENGTH = 3  # a nested list's own length: three dilations per residual block
MAX_NESTED_TRIES = 6  # constructions retried with one more list nested, per class
# What a constructor says when it indexed, iterated or measured a number it took for a sequence.
_NUMBER_AS_SEQUENCE = re.compile(r"'int' object is not (subscriptable|iterable)|object of type 'int' has no len\(\)")


def nested_candidates(kwargs: Dict[str, Any], failure: str) -> List[Dict[str, Any]]:
    """After a construction with a made-up config failed using one of its numbers as a sequence
    (hifi-gan's ``h.resblock_dilation_sizes`` is a list of per-block dilation lists; its name
    says only "sizes"): the same arguments again, each with one more of the lists that config made
    up turned into a list of lists, the list read last first (the likeliest to have failed)."""
    if not _NUMBER_AS_SEQUENCE.search(failure):
        return []
    found = []
    for key, value in kwargs.items():
        if not isinstance(value, MadeUpConfig):
            continue
        for name in reversed(value._lists_read):
            if name not in value._nested:
                found.append({**kwargs, key: MadeUpConfig(value._size, value._nested | {name})})
    return found


def _config_value(name: str, size: Tuple[int, int, int]) -> Any:
    if _FLAG.search(name):
        return False
    if _SIZES.search(name) or _RATES.search(name) or name.endswith("_kernel_sizes"):
        return _list_for(name, float if "drop" in name else None, size)
    number = _int_for(name, size)
    if number is not None:
        return number
    if _ZERO_FLOAT.search(name) or "drop" in name or _EPS.search(name) or _COEFFICIENT.search(name):
        return _float_for(name)
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# The counts a name says, in the order they are tried (heads before layers, ... widths last).
_COUNTS: Tuple[Tuple["re.Pattern[str]", int], ...] = (
    (_LAYERS, 2), (_CLASSES, 10), (_KERNEL, 3), (_ONE, 1), (_PADDING, 1), (_WINDOW, 4), (_PATCH, 4),
    (_SHIFT, 0), (_LENGTH, 16), (_REDUCTION, 4))


def _int_for(name: str, size: Tuple[int, int, int]) -> Optional[int]:
    """An integer for a parameter of that name, or None when the name says nothing."""
    width, heads, _ = size
    if _HEADS.search(name):
        return heads
    for pattern, value in _COUNTS:
        if pattern.search(name):
            return value
    if _WIDTH.search(name) or "channel" in name or "dim" in name or "feature" in name or "plane" in name:
        return width
    return None


def _float_for(name: str) -> float:
    if _ZERO_FLOAT.search(name) or "drop" in name:
        return 0.0  # deterministic runs: no dropout, no stochastic depth
    if _EPS.search(name):
        return 1e-5
    if "ratio" in name or "mult" in name or "scale" in name or "factor" in name:
        return 1.0
    return 1.0


def _list_for(name: str, element: Any, size: Tuple[int, int, int]) -> Any:
    width, _, length = size
    if _RATES.search(name):
        return [1, 2][:STAGES]
    if element is float:
        return [_float_for(name)] * length
    value = _int_for(name, size)
    if value is None:
        value = width if "channel" in name or "dim" in name else 2
    if _WINDOW.search(name) or _PATCH.search(name) or _SHIFT.search(name) or _KERNEL.search(name) \
            or _ONE.search(name) or _PADDING.search(name):
        return [value] * length
    return [value] * STAGES


def _annotation_kind(annotation: Any) -> Tuple[str, Any]:
    """("int"|"float"|"bool"|"list"|"tuple"|"class"|"unknown"|"none", element or class)."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return "none", None
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        text = re.sub(r"^Optional\[(.*)\]$", r"\1", text)
        text = re.sub(r"^(.*)\|None$", r"\1", text)
        for plain in ("int", "float", "bool"):
            if text == plain:
                return plain, None
        match = re.match(r"^(?:typing\.)?(list|List|tuple|Tuple|Sequence|typing\.Sequence)\[(\w+)", text)
        if match:
            element = {"int": int, "float": float}.get(match.group(2))
            return ("tuple" if match.group(1).lower() == "tuple" else "list"), element
        return "unknown", None
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        kept = [a for a in arguments if a is not type(None)]
        if len(kept) == 1:
            return _annotation_kind(kept[0])
        kinds = [_annotation_kind(a) for a in kept]
        for wanted in ("int", "float", "list", "tuple"):
            found = next((k for k in kinds if k[0] == wanted), None)
            if found is not None:
                return found
        return "unknown", None
    if annotation in (int, float, bool):
        return annotation.__name__, None
    if origin in (list, tuple) or (origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")):
        element = arguments[0] if arguments else int
        return ("tuple" if origin is tuple else "list"), element if element in (int, float) else int
    if inspect.isclass(annotation) and origin is None:
        return "class", annotation
    return "unknown", None


def parameters_of(cls: Callable[..., Any]) -> Optional[List[inspect.Parameter]]:
    """The named parameters construction takes (following ``*args, **kwargs`` to the first base
    ``__init__`` that names its own); None when there is no signature to read."""
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    passes_on = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
    if passes_on and isinstance(cls, type) and not any(p.default is p.empty for p in named):
        for base in inspect.getmro(cls)[1:]:
            init = vars(base).get("__init__")
            if init is None or not inspect.isfunction(init):
                continue
            try:
                below = list(inspect.signature(init).parameters.values())[1:]
            except (TypeError, ValueError):
                return named
            below = [p for p in below if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if below:
                have = {p.name for p in named}
                return named + [p for p in below if p.name not in have]
    return named


def _resolved_hints(cls: Callable[..., Any]) -> Dict[str, Any]:
    init = getattr(cls, "__init__", None)
    try:
        return typing.get_type_hints(init) if init is not None else {}
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate: read as text
        return {}


def _value(parameter: inspect.Parameter, hints: Dict[str, Any], size: Tuple[int, int, int], depth: int,
           build: Callable[[type, Dict[str, Any]], Any], is_module: Callable[[type], bool]) -> Any:
    name = _snake(parameter.name)
    kind, detail = _annotation_kind(hints.get(parameter.name, parameter.annotation))
    if kind == "bool":
        return False
    if kind == "float":
        return _float_for(name)
    if kind in ("list", "tuple"):
        value = _list_for(name, detail, size)
        return tuple(value) if kind == "tuple" else value
    if kind == "class":
        if is_module(detail) or depth >= MAX_DEPTH or detail.__module__ in ("builtins", "typing"):
            return _NOTHING  # a backbone, a layer: nothing sensible to make up
        kwargs = synthesize_kwargs(detail, size, depth + 1, build, is_module)
        if kwargs is None:
            return _NOTHING
        return build(detail, kwargs)
    if kind == "unknown":
        return _NOTHING
    if kind in ("none", "unknown") and _CONFIG.search(name):
        return MadeUpConfig(size)
    if kind == "none" and _SIZES.search(name):  # a width per layer (or a dropout per layer)
        return [_float_for(name)] * size[2] if "drop" in name else [size[0]] * STAGES
    if kind == "none" and _FEW.search(name):
        return 2
    if kind == "none" and _INDEX.search(name):
        return 0
    number = _int_for(name, size)
    if kind == "int":
        return number if number is not None else 2
    if number is not None:  # no annotation: the name alone
        return number
    if _COEFFICIENT.search(name):
        return _float_for(name)
    if _ZERO_FLOAT.search(name) or "drop" in name:
        return 0.0
    return _NOTHING


def synthesize_kwargs(cls: Callable[..., Any], size: Tuple[int, int, int], depth: int,
                      build: Callable[[type, Dict[str, Any]], Any],
                      is_module: Callable[[type], bool]) -> Optional[Dict[str, Any]]:
    """Keyword arguments for every parameter without a default, or None when one cannot be made."""
    parameters = parameters_of(cls)
    if parameters is None:
        return None
    hints = _resolved_hints(cls)
    kwargs: Dict[str, Any] = {}
    for parameter in parameters:
        if parameter.default is not parameter.empty:
            continue
        if parameter.kind is parameter.POSITIONAL_ONLY:
            return None
        value = _value(parameter, hints, size, depth, build, is_module)
        if value is _NOTHING:
            return None
        kwargs[parameter.name] = value
    return kwargs


def synthesize(cls: Callable[..., Any], build: Callable[[type, Dict[str, Any]], Any],
               is_module: Callable[[type], bool]) -> List[Dict[str, Any]]:
    """Up to len(CANDIDATES) distinct keyword-argument sets, in the order to try them; [] when a
    required parameter cannot be filled (or none is required: the defaults were tried already).
    ``cls``: a class, or a factory function of one (its parameters are read the same way).
    ``build(cls, kwargs)`` makes a config object of the user's (the caller guards it)."""
    found: List[Dict[str, Any]] = []
    texts: List[str] = []
    for size in CANDIDATES:
        try:
            kwargs = synthesize_kwargs(cls, size, 0, build, is_module)
        except Exception:  # noqa: BLE001 - a config object that cannot be built: no candidate of this size
            continue
        if not kwargs:
            continue
        _expanded(cls, kwargs)
        text = repr(sorted(kwargs.items(), key=lambda item: item[0]))
        if text not in texts:
            texts.append(text)
            found.append(kwargs)
    return found


_IN_PLANES = ("inplanes", "in_planes", "inp_planes")


def _expanded(cls: Callable[..., Any], kwargs: Dict[str, Any]) -> None:
    """A residual block that states an ``expansion`` (ResNet's Bottleneck: 4) adds its input to an
    output of ``planes * expansion`` channels when nothing downsamples: made-up in-planes match."""
    expansion = getattr(cls, "expansion", None)
    planes = kwargs.get("planes")
    if not (isinstance(expansion, int) and not isinstance(expansion, bool) and expansion > 1
            and isinstance(planes, int)):
        return
    for name in _IN_PLANES:
        if isinstance(kwargs.get(name), int):
            kwargs[name] = planes * expansion


def unfillable(cls: type, is_module: Callable[[type], bool]) -> List[str]:
    """The required parameters that neither their annotation nor their name says how to fill."""
    parameters = parameters_of(cls) or []
    hints = _resolved_hints(cls)
    missing = []
    for parameter in parameters:
        if parameter.default is not parameter.empty:
            continue
        value = _value(parameter, hints, CANDIDATES[0], MAX_DEPTH, lambda c, k: None, is_module)
        if value is _NOTHING:
            missing.append(parameter.name)
    return missing


def _toml(value: Any) -> Optional[str]:
    """A TOML inline value for a made-up argument, or None when TOML cannot hold it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    if isinstance(value, (list, tuple)):
        items = [_toml(item) for item in value]
        return None if any(item is None for item in items) else "[%s]" % ", ".join(items)  # type: ignore[arg-type]
    return None


def table_entry(cls: type, is_module: Callable[[type], bool]) -> Optional[str]:
    """The ``[tool.torchlint.verify.classes.<Class>]`` entry to paste into pyproject.toml, with the
    class's own required parameters (through ``*args, **kwargs`` to the base that names them), each
    given the value made up for it when there is one, else a string to replace. None: nothing to fill."""
    parameters = [p for p in parameters_of(cls) or [] if p.default is p.empty]
    if not parameters:
        return None
    hints = _resolved_hints(cls)
    modules = [p.name for p in parameters if _annotation_kind(hints.get(p.name, p.annotation))[0] == "class"
               and is_module(_annotation_kind(hints.get(p.name, p.annotation))[1])]
    if modules:  # a layer or a backbone: TOML cannot hold one, a function of the project's can build it
        return ("[tool.torchlint.verify.classes.%s]\nfactory = \"your_package.your_module:function\"  "
                "# returns %s(...) built with its %s" % (cls.__name__, cls.__name__, ", ".join(modules)))
    values = []
    for parameter in parameters:
        value = _value(parameter, hints, CANDIDATES[0], MAX_DEPTH, lambda c, k: None, is_module)
        text = _toml(value) if value is not _NOTHING else None
        values.append("%s = %s" % (parameter.name, text if text is not None else '"FILL IN"'))
    return "[tool.torchlint.verify.classes.%s]\nkwargs = { %s }" % (cls.__name__, ", ".join(values))

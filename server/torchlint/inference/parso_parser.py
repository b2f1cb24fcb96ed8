"""parso's parser loop, the same steps at less cost. jedi parses every module it reads with
parso, in pure Python: much of the default mode's cold time on a large project (figures:
benchmarks/README.md#tuned-constants). parso's loop (``BaseParser._add_token``) looks each token up in
the current grammar state by raising and catching a KeyError at each of the five or so states it
leaves per token, hashes token types (Enum members) with Enum's Python ``__hash__``, and makes
each leaf and stack entry through two Python calls. jedi then asks each module for its names
(``Module.get_used_names``), which walks the whole tree again.

:func:`install` gives ``parso.python.parser.Parser`` a loop that takes the same steps in the same
order: the same transitions (looked up by identity in per-state tables built on first use), the
same nodes (``convert_node``; the Python parser's leaf classes, their fields set as their
``__init__`` sets them), the same error recovery (called at the same token, with the same
stack). The trees are equal, error nodes and positions included (tests/test_parso_parser.py
compares them with parso's own on many sources). The loop also files each name leaf it makes by
its value, in the order a walk of the tree meets them, and the module it returns holds that as
its used names (what ``get_used_names`` would build). Installed only for the parso versions it
was written against, and only when parso's pieces are as it expects; otherwise parso stays as
it is.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

log = logging.getLogger("torchlint")

SUPPORTED_VERSIONS = ("0.8.",)  # parso versions whose parser loop this one reproduces

_installed: Dict[str, Any] = {}  # "loop": parso's own Parser.parse, while ours is in place
# A parse calls its checkpoint once per this many tokens: a module of 100k lines is stopped within
# a few milliseconds of its deadline, at no measurable cost to the loop.
TOKENS_PER_CHECKPOINT = 4096
# What a parse calls between tokens (see install): None, or what says which function to call.
Checkpoint = Callable[[], Optional[Callable[[], None]]]


def _checked(tokens: Iterable[Any], check: Callable[[], None]) -> Iterator[Any]:
    for count, token in enumerate(tokens, 1):
        if not count % TOKENS_PER_CHECKPOINT:
            check()  # raises to stop the parse
        yield token


def install(checkpoint: Optional[Checkpoint] = None) -> bool:
    """Put the faster loop in place (once per process); False when parso is not a version or
    shape it knows, and parso's own loop stays. ``checkpoint()``, asked at the start of each parse,
    gives the function the parse calls every TOKENS_PER_CHECKPOINT tokens (None: none), which may
    raise to abandon the parse (the jedi layer's deadline)."""
    if "loop" in _installed:
        return True
    try:
        import parso
        from parso.parser import InternalParseError, StackNode
        from parso.python import parser as python_parser
        from parso.python import tree
        from parso.python.token import PythonTokenTypes
    except ImportError:
        return False
    if not str(getattr(parso, "__version__", "")).startswith(SUPPORTED_VERSIONS):
        return False
    parser_class = python_parser.Parser
    name, operator = PythonTokenTypes.NAME, PythonTokenTypes.OP
    module_class, used_names_class = tree.Module, getattr(tree, "UsedNamesMapping", None)
    own_parse = vars(parser_class).get("parse")
    # Only NAME and OP tokens may be keywords or operators the grammar names (parso's
    # _token_to_transition asks each token type whether it "contains syntax").
    if {t for t in PythonTokenTypes if t.value.contains_syntax} != {name, operator} \
            or "_add_token" in vars(parser_class) or not isinstance(getattr(parser_class, "_leaf_map", None), dict) \
            or own_parse is None or used_names_class is None or "_used_names" not in module_class.__slots__:
        log.debug("parso's parser is not as torchlint expects: its own loop is kept")
        return False
    leaf_classes = {id(token_type): leaf for token_type, leaf in parser_class._leaf_map.items()}
    keyword_leaf, name_leaf, operator_leaf = tree.Keyword, tree.Name, tree.Operator
    if not _built_alike([keyword_leaf, name_leaf, operator_leaf, *leaf_classes.values()], StackNode):
        log.debug("parso's tree nodes are not as torchlint expects: its own loop is kept")
        return False
    new = object.__new__

    def transitions_by_id(dfa: Any) -> Dict[int, Any]:
        """A grammar state's transitions by the identity of their key (token types and
        keywords are one object each per grammar): no Enum.__hash__ per lookup. Made once per
        state, kept on it."""
        table = dfa._torchlint_transitions = {id(key): plan for key, plan in dfa.transitions.items()}
        return table

    def add_token(self: Any, token: Tuple[Any, str, Tuple[int, int], str]) -> None:
        type_, value, start_pos, prefix = token
        reserved = self._pgen_grammar.reserved_syntax_strings
        transition = reserved.get(value, type_) if type_ is name or type_ is operator else type_
        key = id(transition)
        stack = self.stack
        if not stack:
            raise InternalParseError("too much input", type_, value, start_pos)  # type: ignore[no-untyped-call]
        top = stack[-1]
        while True:
            dfa = top.dfa
            try:
                table = dfa._torchlint_transitions
            except AttributeError:
                table = transitions_by_id(dfa)
            plan = table.get(key)
            if plan is not None:
                break
            if not dfa.is_final:  # no way on from this state, which may not end here
                self.error_recovery(token)
                return
            stack.pop()  # the state's node is finished (parso's _pop: a node of one child is that child)
            nodes = top.nodes
            node = nodes[0] if len(nodes) == 1 else self.convert_node(dfa.from_rule, nodes)
            top = stack[-1]
            top.nodes.append(node)
        top.dfa = plan.next_dfa
        for pushed in plan.dfa_pushes:
            top = new(StackNode)
            top.dfa, top.nodes = pushed, []
            stack.append(top)
        leaf: Any
        if type_ is name:  # the Python parser's convert_leaf
            if value in reserved:
                leaf = new(keyword_leaf)
            else:
                leaf = new(name_leaf)
                named = self._torchlint_names.get(value)
                if named is None:
                    self._torchlint_names[value] = [leaf]
                else:
                    named.append(leaf)
        else:
            leaf = new(leaf_classes.get(id(type_), operator_leaf))
        leaf.value, (leaf.line, leaf.column), leaf.prefix, leaf.parent = value, start_pos, prefix, None
        top.nodes.append(leaf)

    def parse(self: Any, tokens: Any) -> Any:
        self._torchlint_names = {}  # a name's value -> its Name leaves, in the order of the text
        check = checkpoint() if checkpoint is not None else None
        root = own_parse(self, tokens if check is None else _checked(tokens, check))
        if type(root) is module_class:
            root._used_names = used_names_class(self._torchlint_names)
        return root

    setattr(parser_class, "_add_token", add_token)  # (parso's own is the base class's: see the check above)
    setattr(parser_class, "parse", parse)
    _installed["loop"] = own_parse
    return True


def _built_alike(leaf_classes: List[type], stack_node: type) -> bool:
    """Whether the loop's way of making leaves and stack entries (setting their fields on a bare
    object, not calling ``__init__``) gives what parso's constructors give: each leaf class
    takes the one Leaf ``__init__``, which sets exactly these fields."""
    inits = {vars(klass).get("__init__") for cls in leaf_classes for klass in cls.__mro__[:-1]} - {None}
    if len(inits) != 1:
        return False
    for cls in leaf_classes:
        made = cls("x", (3, 4), " ")
        fields = {slot for klass in cls.__mro__ for slot in vars(klass).get("__slots__", ())}
        if hasattr(made, "__dict__") or fields != {"value", "line", "column", "prefix", "parent"} \
                or (made.value, made.line, made.column, made.prefix, made.parent) != ("x", 3, 4, " ", None):
            return False
    entry = stack_node("dfa")
    return bool(vars(entry) == {"dfa": "dfa", "nodes": []})


def uninstall() -> None:
    """parso's own loop again (for tests that compare the two)."""
    own_parse = _installed.pop("loop", None)
    if own_parse is not None:
        from parso.python import parser as python_parser
        del python_parser.Parser._add_token
        setattr(python_parser.Parser, "parse", own_parse)

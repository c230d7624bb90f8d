"""What a `.pt2` program (models/<model>.json) makes torch evaluate or call, read as JSON and
never run.

Three kinds of strings in it become code (torch/_export/serde/serialize.py, export/_unlift.py):
- each symbolic size's `expr_str` is parsed by sympy.sympify at torch.export.load, which
  evaluates it as Python; torch writes it with sympy's srepr (`Symbol('s0', positive=True,
  integer=True)`, `FloorDiv(Add(...), Integer(2))`);
- `guards_code` becomes Python that `ep.module()` compiles and runs (`L['x'].size()[0] <= 64`);
- a node's `target` is looked up attribute by attribute from torch, operator or math and
  called when the model runs (`torch.ops.aten.mul.Tensor`, `_operator.getitem`; a
  `torch.os.system` would be os.system).
Each is checked against the shapes torch writes: an expression of sympy's classes and
numbers, a guard of input sizes and arithmetic, a target that is a pure operator
(torchscript_ops.py) or one of operator's and math's arithmetic. Anything else is unsafe.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from ckpt_browser.readers.torchscript_ops import PURE_NAMESPACES, operator_words

MAX_STRING = 4096  # characters of one expression or guard checked (real ones are short)
SYMPY = frozenset({
    "Symbol", "Dummy", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Max", "Min", "Abs",
    "floor", "ceiling", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "StrictLessThan", "LessThan",
    "StrictGreaterThan", "GreaterThan", "Equality", "Unequality", "And", "Or", "Not", "Tuple",
    "Piecewise", "ExprCondPair", "true", "false", "oo", "zoo", "nan", "BooleanTrue",
    "BooleanFalse", "Half", "One", "Zero", "NegativeOne", "Infinity", "NegativeInfinity",
    # torch.utils._sympy.functions, as the deserializer names them
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
    "RoundToInt", "RoundDecimal", "ToFloat", "Identity", "TrueDiv",
})
SIZES = frozenset({"size", "stride", "dim", "numel", "storage_offset"})  # what a guard asks
OPERATOR = frozenset({"getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                      "neg", "pos", "abs", "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_",
                      "xor", "not_", "invert", "lshift", "rshift", "truth", "index"})
TORCH = frozenset({"sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite",
                   "sym_sqrt", "sym_sum", "_check", "_check_is_size", "_assert",
                   "_assert_async", "_assert_scalar"})
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub,
          ast.UAdd, ast.Not, ast.Invert, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE,
          ast.Gt, ast.GtE, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift,
          ast.Load, ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
          ast.Constant, ast.Call, ast.keyword, ast.Tuple)


@dataclass
class Program:
    """The strings of one program that become code, and the unsafe ones in words."""

    exprs: set[str] = field(default_factory=set)
    guards: list[str] = field(default_factory=list)
    targets: set[str] = field(default_factory=set)
    unsafe: dict[str, str] = field(default_factory=dict)  # unsafe entry -> what it does


def read_program(text: str, where: str) -> Program:
    """Check the program JSON `text` of member `where`; raises ValueError when not JSON."""
    p = Program()

    def keep(pairs):  # each object, innermost first; nothing of it is kept but these strings
        d = dict(pairs)  # a key written twice: json.loads keeps the last, as torch does
        e, t, g = d.get("expr_str"), d.get("target"), d.get("guards_code")
        if type(e) is str:
            p.exprs.add(e)
        if type(t) is str and "inputs" in d and "outputs" in d:
            p.targets.add(t)
        if type(g) is list and "graph_module" in d:
            p.guards += [x for x in g if type(x) is str]
        return None

    json.loads(text, object_pairs_hook=keep)
    for e in sorted(p.exprs):
        if not _fits(e, _srepr):
            p.unsafe[f"sympy.sympify of {_short(e)} in {where}"] = (
                "evaluated as Python by sympy at torch.export.load")
    for g in p.guards:
        if not _fits(g, _guard):
            p.unsafe[f"the guard {_short(g)} in {where}"] = "run as Python by ep.module()"
    for t in sorted(p.targets):
        words = target_words(t)
        if words:
            p.unsafe[f"{t}, a node of {where}"] = f"{words}, when the model is called"
    return p


def target_words(target: str) -> str | None:
    """None for a target torch writes and that stays pure, else what calling it does."""
    parts = target.split(".")
    if parts[0] == "_operator":
        return None if len(parts) == 2 and parts[1] in OPERATOR else "calls a function " \
            "of Python's operator module that is not arithmetic"
    if parts[0] == "math":
        return None if len(parts) == 2 and not parts[1].startswith("_") else "reaches " \
            "past the math module"
    if parts[0] == "torch":
        if len(parts) == 2 and parts[1] in TORCH:
            return None
        if len(parts) in (4, 5) and parts[1] == "ops":
            ns, op = parts[2], parts[3]
            if ns == "higher_order" or (ns in PURE_NAMESPACES and not op.startswith("__")):
                return operator_words(ns, op) if ns != "higher_order" else None
            return operator_words(ns, op) or "an operator nothing here knows"
        return "a torch function or attribute, reached by name, that is not an operator"
    if target.startswith("#"):
        return "an extension operator, resolved by whatever handler the loader registered"
    return None  # torch keeps any other string as it is: a name, never called


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _fits(text: str, rule) -> bool:
    if len(text) > MAX_STRING:
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    try:
        return all(rule(node) for node in ast.walk(tree))
    except RecursionError:
        return False


def _srepr(node: ast.AST) -> bool:
    """sympy's srepr: calls of sympy's classes on numbers and strings, keywords of constants."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in SYMPY
    if isinstance(node, ast.Name):
        return node.id in SYMPY
    if isinstance(node, ast.keyword):
        return node.arg is not None and isinstance(node.value, (ast.Constant, ast.UnaryOp))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand,
                                                                          ast.Constant)
    return isinstance(node, (ast.Expression, ast.Constant, ast.Load, ast.USub, ast.UAdd,
                             ast.Tuple))


def _guard(node: ast.AST) -> bool:
    """A guard: arithmetic and comparisons of the inputs' sizes (L['x'].size()[0]). Its text
    is also pasted into a string literal of the generated code, so a string in it may hold no
    quote or backslash."""
    if isinstance(node, ast.Constant):
        return type(node.value) is not str or re.fullmatch(r"[A-Za-z0-9_]*", node.value) is not None
    if isinstance(node, ast.Name):
        return node.id == "L" or node.id in SYMPY
    if isinstance(node, ast.Attribute):
        return node.attr in SIZES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and type(node.slice.value) in (int, str)
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Attribute) and f.attr in SIZES) or (
            isinstance(f, ast.Name) and f.id in SYMPY)
    return isinstance(node, _ARITH)

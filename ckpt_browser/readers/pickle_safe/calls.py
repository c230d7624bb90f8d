"""What each allowed callable is given (policy.py has the tiers).

A call is only safe if every callable it can reach is known to be inert. An allowed function
is trusted with data; given something that can run code (a global off the allowlist, a method,
an object rebuilt from a class off it, the result of an unsafe call) it may call it, import
through it or dispatch on it: numpy's RNG helpers call their second argument, torch's rebuilders
read attributes of the storage they are given, int() calls __index__, str() a codec by name.

`hazard` finds such a thing in a call's arguments; `check_data_call` holds the argument rules
of the allowed callables that have no recorder (the recorders check their own): the shapes the
real writers produce. A mismatch of plain values is BadCall (a warning: torch.load would fail
or build something else); anything that reaches code is Reaches (unsafe).
"""

from __future__ import annotations

from ckpt_browser.readers.pickle_safe.checks import BadCall, Reaches, arity
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.readers.pickle_safe.policy import ENUMS
from ckpt_browser.standins import Opaque, UnsafeCall

_WALK_NODES = 100_000  # values looked at for a hazard in one call's arguments
_ATOMS = (str, int, float, bool, type(None), bytes)
# the codecs the real writers name (protocol 2 bytes, str of bytes); any other codec name is
# looked up in the `encodings` package, i.e. imported by name
SAFE_CODECS = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1", "ascii",
                         "utf-8", "utf8", "utf_8"})
BIT_GENERATORS = {"MT19937": "numpy.random._mt19937.MT19937", "PCG64": "numpy.random._pcg64.PCG64",
                  "PCG64DXSM": "numpy.random._pcg64.PCG64DXSM",
                  "Philox": "numpy.random._philox.Philox", "SFC64": "numpy.random._sfc64.SFC64"}
BIT_GENERATOR_CTOR = "numpy.random._pickle.__bit_generator_ctor"
# torch's tensor classes whose __setstate__ is Tensor's own (read off torch 2.13); the
# tracing-only ones (FakeTensor, FunctionalTensor) are left out: their methods enter modes
TENSOR_TYPES = frozenset({
    "torch.Tensor", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer",
    "torch.nn.parameter.UninitializedParameter", "torch.nn.parameter.UninitializedBuffer",
    "torch.distributed.tensor.DTensor", "torch.distributed.tensor._api.DTensor",
    "torch.distributed.fsdp._flat_param.FlatParameter",
    "torch.distributed.tensor._shards_wrapper.LocalShardsWrapper",
    "torch.nested._internal.nested_tensor.NestedTensor",
    "torch.masked.maskedtensor.core.MaskedTensor",
    "torch.sparse.semi_structured.SparseSemiStructuredTensorCUTLASS",
    "torch.sparse.semi_structured.SparseSemiStructuredTensorCUSPARSELT",
})


def tensor_class(u, cls, what: str) -> None:
    """The class a torch rebuilder makes a tensor of: torch's own with Tensor's __setstate__;
    a class of another module is imported and its code runs (the imports warning, as for any
    object rebuilt from it); any other class of known code is unsafe."""
    if type(cls) is Opaque and u.is_global(cls):
        q = cls.qualname
        if q in TENSOR_TYPES or u.user_allowed(q):
            return
        if not u.known_code(q):
            u.rebuilt(cls)
            return
    raise Reaches(f"makes a tensor of the class {_name(cls)}, whose {what} runs")


def hazard(u, value) -> str | None:
    """The first thing in `value` that a function given it could end up running, in words;
    None when it holds only data. Containers are searched; a stand-in is judged by itself,
    not by its contents (its own call or state was judged when it was built)."""
    stack, budget = [value], _WALK_NODES
    while stack:
        budget -= 1
        if not budget:  # never in real arguments; a file that hides something past it is cut
            return f"more than {_WALK_NODES:,} values (not all checked)"
        obj = stack.pop()
        kind = type(obj)
        if kind in _ATOMS:
            continue
        if kind is UnsafeCall:
            return obj.qualname
        if kind is Opaque:
            found = _stand_in(u, obj)
            if found:
                return found
        elif kind is dict:
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif kind in (tuple, list, set, frozenset):
            stack.extend(obj)
    return None


def _stand_in(u, obj: Opaque) -> str | None:
    q = obj.qualname
    if id(obj) in u.references:
        return f"the method {q}"
    if u.is_global(obj):
        return None if u.known(q) else q
    if u.imports.get(q) == "object" and not u.inert_class(q):
        return f"a {q} object"
    return None


def plain(value, depth: int = 3) -> bool:
    """Atoms, and tuples, lists and dicts of them."""
    kind = type(value)
    if kind in _ATOMS:
        return True
    if not depth or kind not in (tuple, list, dict) or len(value) > 256:
        return False
    items = [x for kv in value.items() for x in kv] if kind is dict else value
    return all(plain(x, depth - 1) for x in items)


def _atoms(args, low: int, high: int, kinds=(str, int, float, bool)) -> None:
    for a in arity(args, low, high):
        if type(a) not in kinds:
            raise BadCall(short(a))


def _codec(name) -> None:
    if type(name) is not str:
        raise BadCall(f"codec {short(name)}")
    if name.lower() not in SAFE_CODECS:
        raise Reaches(f"decodes with the codec {name[:40]!r}, which Python imports by name")


def _str(u, args) -> None:
    if len(args) <= 1:
        return _atoms(args, 0, 1, _ATOMS)
    if type(args[0]) not in (bytes, bytearray):
        raise BadCall(short(args))
    _codec(args[1])
    _atoms(args[2:], 0, 1, (str,))


def _int(u, args) -> None:
    _atoms(args[:1], 0, 1, (str, int, float, bool, bytes))
    _atoms(args[1:], 0, 1, (int,))


def _number(u, args) -> None:
    _atoms(args, 0, 1)


def _ints(low: int, high: int):
    def check(u, args) -> None:
        _atoms(args, low, high, (int, bool, type(None)))
    return check


def _none(u, args) -> None:
    arity(args, 0, 0)


def _items(u, args) -> None:  # tuple(items), list(items), dict(items): stored, never called
    items = arity(args, 0, 1)
    if items and type(items[0]) not in (list, tuple, dict, str, bytes, set, frozenset):
        raise BadCall(short(items[0]))


def _strings(u, args) -> None:
    _atoms(args, 0, 64, (str,))


def _namespace(u, args) -> None:  # SimpleNamespace((), state) writes (); 3.13 takes a mapping
    items = arity(args, 0, 1)
    if items and not (type(items[0]) is dict and all(type(k) is str for k in items[0])):
        raise BadCall(short(items[0]))


def _datetime(u, args) -> None:  # (bytes[, tzinfo]) as pickle writes them, or the numbers
    if args and type(args[0]) is bytes:
        arity(args, 1, 2)
        rest = args[1:]
    else:
        _atoms([a for a in args if not _is(a, "datetime.timezone")], 0, 8, (int,))
        rest = ()
    for tz in rest:
        if tz is not None and not _is(tz, "datetime.timezone"):
            raise BadCall(f"tzinfo {short(tz)}")


def _timezone(u, args) -> None:
    offset = arity(args, 1, 2)[0]
    if not _is(offset, "datetime.timedelta") or not all(type(a) is str for a in args[1:]):
        raise BadCall(short(args))


def _decimal(u, args) -> None:
    if not (len(args) == 1 and (type(args[0]) in (str, int) or plain(args[0]))):
        raise BadCall(short(args))


def _fraction(u, args) -> None:  # Fraction(numerator, denominator) or Fraction("1/3")
    _atoms(args[:1], 1, 1, (str, int))
    _atoms(args[1:], 0, 1, (int,))


def _dtype(u, args) -> None:  # numpy.dtype('f8', False, True), or a structured spec
    spec = arity(args, 1, 3)[0]
    if not plain(spec):  # numpy reads .dtype off any object it is given
        raise BadCall(f"dtype spec {short(spec)}")
    _atoms(args[1:], 0, 2, (bool, int))


def _ndarray(u, args) -> None:  # ndarray(shape[, dtype]): real writers use _reconstruct
    if not args or not plain(args[0]) or any(not _is(a, "numpy.dtype") for a in args[1:2]):
        raise BadCall(short(args))
    arity(args, 1, 2)


def _frombuffer(u, args) -> None:  # _frombuffer(buf, dtype, shape, order)
    buf, dtype, shape, order = arity(args, 4, 4)
    if type(buf) not in (bytes, bytearray) or not _is(dtype, "numpy.dtype") \
            or not plain(shape) or order not in ("C", "F"):
        raise BadCall(short(args))


def _rng_ctor(u, args) -> None:
    """__randomstate_ctor / __generator_ctor(name or bit generator[, ctor]): numpy calls the
    second argument with the first, so it must be numpy's own __bit_generator_ctor."""
    first = arity(args, 0, 2)[:1]
    if len(args) == 2 and not (_is(args[1], BIT_GENERATOR_CTOR) and u.is_global(args[1])):
        raise Reaches(f"calls its second argument, {_name(args[1])}")
    for a in first:
        if not (_bit_generator_name(a) or _is(a, BIT_GENERATOR_CTOR)):
            raise BadCall(f"bit generator {short(a)}")


def _bit_generator_ctor(u, args) -> None:
    """__bit_generator_ctor(name or class): numpy instantiates a class it is given."""
    for a in arity(args, 0, 1):
        if _bit_generator_name(a):
            continue
        if type(a) is Opaque and u.is_global(a) and a.qualname in BIT_GENERATORS.values():
            continue
        if type(a) is Opaque or type(a) is UnsafeCall:
            raise Reaches(f"instantiates its argument, {_name(a)}")
        raise BadCall(f"bit generator {short(a)}")


def _bit_generator(u, args) -> None:  # MT19937(seed), RandomState(seed), Generator(bitgen)
    for a in arity(args, 0, 1):
        if not (type(a) in (int, type(None)) or _is(a, BIT_GENERATOR_CTOR)):
            raise BadCall(short(a))


def _enum(u, args) -> None:  # an Enum pickles as Cls(value)
    _atoms(args, 1, 1, (str, int, float, bool, type(None)))


def _wrapper_subclass(u, args) -> None:  # (cls, dtype, size, stride, offset, layout, device, rg)
    tensor_class(u, arity(args, 8, 8)[0], "__torch_dispatch__")
    found = hazard(u, args[1:])
    if found:
        raise Reaches(f"given {found}")


def _name(value) -> str:
    return value.qualname if type(value) in (Opaque, UnsafeCall) else short(value)


def _bit_generator_name(value) -> bool:
    return type(value) is str and value in BIT_GENERATORS


def _is(value, qualname: str) -> bool:
    return type(value) is Opaque and value.qualname == qualname


_NUMPY = ("numpy.core", "numpy._core")
SPECS = {
    "builtins.str": _str, "builtins.int": _int, "builtins.float": _number,
    "builtins.bool": _number, "builtins.range": _ints(1, 3), "builtins.object": _none,
    "builtins.NoneType": _none, "builtins.tuple": _items, "builtins.list": _items,
    "builtins.dict": _items, "argparse.Namespace": _none, "types.SimpleNamespace": _namespace,
    **{f"pathlib.{c}": _strings for c in ("Path", "PosixPath", "WindowsPath", "PurePath",
                                           "PurePosixPath", "PureWindowsPath")},
    "datetime.datetime": _datetime, "datetime.date": _datetime, "datetime.time": _datetime,
    "datetime.timedelta": _ints(0, 3), "datetime.timezone": _timezone,
    "decimal.Decimal": _decimal, "fractions.Fraction": _fraction, "uuid.UUID": _strings,
    "random.Random": _ints(0, 1), "torch.torch_version.TorchVersion": _strings,
    "numpy.dtype": _dtype, "numpy.ndarray": _ndarray,
    **{f"{m}.numeric._frombuffer": _frombuffer for m in _NUMPY},
    "numpy.random._pickle.__randomstate_ctor": _rng_ctor,
    "numpy.random._pickle.__generator_ctor": _rng_ctor,
    BIT_GENERATOR_CTOR: _bit_generator_ctor,
    **{q: _bit_generator for q in (*BIT_GENERATORS.values(), "numpy.random.mtrand.RandomState",
                                   "numpy.random._generator.Generator")},
    "torch._utils._rebuild_wrapper_subclass": _wrapper_subclass,
}
SPECS.update({q: _enum for q in ENUMS})


def check_data_call(u, qual: str, args: tuple) -> None:
    """Raise BadCall or Reaches unless `args` are what the real writers give `qual`, an
    allowed callable without a recorder. Torch's own data functions take tensors, numbers and
    tuples; a framework's record class is only ever rebuilt bare (NEWOBJ, then its state)."""
    spec = SPECS.get(qual)
    if spec is not None:
        spec(u, args)
    elif qual.startswith(("torch.", "numpy.")) or u.user_allowed(qual):
        pass  # below: no argument may reach code
    elif args:
        raise Reaches("runs its constructor with the file's arguments (its records are only "
                      "ever rebuilt bare)")
    found = hazard(u, args)
    if found:
        raise Reaches(f"given {found}")


def planted_slot(state) -> str | None:
    """What a BUILD state plants that a later step calls: `__setstate__` in the attributes
    (pickle's next BUILD on the object looks it up there first), or any dunder set through the
    slot state, which pickle applies with setattr (`__class__` swaps the object's class)."""
    attrs, slots = (state if type(state) is tuple and len(state) == 2 else (state, None))
    if type(attrs) is dict and "__setstate__" in attrs:
        return "__setstate__"
    if type(slots) is dict:
        for key in slots:
            if type(key) is not str or key.startswith("__"):
                return short(key)
    return None


def callable_slots(state) -> list:
    """The values of a torch module's or optimizer's state that it calls later: its hooks
    (`_forward_hooks`, `_optimizer_step_pre_hooks` ...) and a scheduler's lambdas."""
    attrs = state if type(state) is dict else {}
    if type(state) is tuple and len(state) == 2:
        attrs = {**(state[0] if type(state[0]) is dict else {}),
                 **(state[1] if type(state[1]) is dict else {})}
    return [v for k, v in attrs.items() if type(k) is str and ("hook" in k or "lambda" in k)]

"""Pickle programs from a grammar of opcodes: stack-correct programs that build values, call
globals (allowlisted, unsafe and unknown), reference storages by persistent id and share objects
through the memo; then raw opcodes of every kind spliced in, with declared lengths that lie.
"""

from __future__ import annotations

import pickle
import struct

from hypothesis import strategies as st

from ckpt_browser.readers.dcp import DCP_GLOBALS
from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS

UNSAFE = ("os.system", "posix.system", "subprocess.Popen", "subprocess.check_output",
          "builtins.eval", "builtins.exec", "builtins.getattr", "builtins.__import__",
          "builtins.open", "shutil.rmtree", "torch.load", "numpy.load", "pickle.loads",
          "operator.attrgetter", "types.FunctionType")
OTHER = ("collections.OrderedDict", "argparse.Namespace", "numpy.random._pickle.__randomstate_ctor",
         "numpy.random._pickle.__bit_generator_ctor", "numpy.dtype", "numpy.ndarray",
         "copyreg._reconstructor", "builtins.object", "builtins.list", "builtins.dict",
         "transformers.training_args.TrainingArguments", "__builtin__.set", "no.such.Thing",
         "torch.nn.parameter.Parameter", "torch._utils._rebuild_qtensor",
         "torch._utils._rebuild_sparse_tensor", "torch.distributed.checkpoint.metadata.Nope")
GLOBALS = tuple(sorted(TORCH_GLOBALS)) + tuple(sorted(DCP_GLOBALS)) + UNSAFE + OTHER
STORAGES = tuple(sorted(g for g in TORCH_GLOBALS if g.endswith("Storage")))
DTYPES = tuple(sorted(g for g, tag in TORCH_GLOBALS.items()  # torch.float16 ... -> a tag
                      if isinstance(tag, str) and not g.endswith("Storage")))

P = pickle


def _u(fmt: str, n: int) -> bytes:
    return struct.pack(fmt, n)


def text_op(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return (P.SHORT_BINUNICODE + bytes([len(raw)]) + raw if len(raw) < 256
            else P.BINUNICODE + _u("<I", len(raw)) + raw)


def int_op(n: int) -> bytes:
    if 0 <= n < 256:
        return P.BININT1 + bytes([n])
    if -2**31 <= n < 2**31:
        return P.BININT + _u("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        return P.LONG1 + bytes([len(raw)]) + raw
    return P.LONG4 + _u("<i", len(raw)) + raw


def global_op(qual: str, stack: bool) -> bytes:
    module, _, name = qual.rpartition(".")
    if stack or "\n" in qual:
        return text_op(module) + text_op(name) + P.STACK_GLOBAL
    return P.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def tuple_op(items: list[bytes]) -> bytes:
    if not items:
        return P.EMPTY_TUPLE
    if len(items) <= 3:
        return b"".join(items) + (P.TUPLE1, P.TUPLE2, P.TUPLE3)[len(items) - 1]
    return P.MARK + b"".join(items) + P.TUPLE


INTS = st.one_of(st.integers(-3, 300), st.sampled_from([0, 1, -1, 2**31 - 1, 2**32, 2**63 - 1,
                                                        2**63, 2**64, -2**63, 10**30]))
LEAF_OPS = st.one_of(
    INTS.map(int_op),
    st.sampled_from([P.NONE, P.NEWTRUE, P.NEWFALSE, P.EMPTY_DICT, P.EMPTY_LIST, P.EMPTY_TUPLE]),
    st.text(max_size=12).map(text_op),
    st.binary(max_size=16).map(lambda b: P.SHORT_BINBYTES + bytes([len(b)]) + b),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda x: P.BINFLOAT + struct.pack(">d", x)),
    st.sampled_from(["F32", "torch.float32", "cpu", "storage", "0", "1", "state", "param_groups",
                     "lr", "step", "exp_avg", "last_epoch", "_last_lr"]).map(text_op),
)


SMALL = st.integers(0, 6) | INTS


@st.composite
def storage_pid(draw) -> bytes:
    """('storage', <Storage class>, key, location, numel) + BINPERSID, as torch.save writes; the
    legacy format adds a sixth item, None or a view (view key, byte offset, view bytes)."""
    key = draw(st.sampled_from(["0", "1", "2", "x", "../0", ""]))
    cls = global_op(draw(st.sampled_from(STORAGES)), draw(st.booleans()))
    items = [text_op("storage"), cls, text_op(key), text_op("cpu"), int_op(draw(SMALL))]
    view = draw(st.sampled_from(["", "", "none", "view"]))
    if view == "none":
        items.append(P.NONE)
    elif view == "view":
        items.append(tuple_op([text_op(key + "v"), int_op(draw(SMALL)), int_op(draw(SMALL))]))
    return tuple_op(items) + P.BINPERSID


@st.composite
def rebuild_tensor(draw, value) -> bytes:
    """torch's tensor rebuilders with their own arities: _rebuild_tensor(storage, offset, size,
    stride), _v2 (+ requires_grad, hooks), _v3 (+ dtype), _rebuild_parameter(tensor, ...)."""
    ndim = draw(st.integers(0, 3))
    dims = [int_op(draw(SMALL)) for _ in range(ndim)]
    strides = [int_op(draw(SMALL)) for _ in range(draw(st.sampled_from([ndim, ndim, 0, 4])))]
    hooks = global_op("collections.OrderedDict", False) + P.EMPTY_TUPLE + P.REDUCE
    base = [draw(storage_pid()), int_op(draw(SMALL)), tuple_op(dims), tuple_op(strides)]
    fn = draw(st.sampled_from(["_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v2",
                               "_rebuild_tensor_v3", "_rebuild_parameter"]))
    if fn == "_rebuild_tensor_v2":
        args = base + [P.NEWFALSE, hooks]
    elif fn == "_rebuild_tensor_v3":
        dtype = draw(st.sampled_from(DTYPES))
        args = base + [P.NEWFALSE, hooks, global_op(dtype, False)]
    elif fn == "_rebuild_parameter":
        inner = global_op("torch._utils._rebuild_tensor_v2", False) \
            + tuple_op(base + [P.NEWFALSE, hooks]) + P.REDUCE
        args = [inner, P.NEWTRUE, hooks]
    else:
        args = base
    if draw(st.integers(0, 3)) == 0:  # the wrong arity or a wrong value somewhere
        at = draw(st.integers(0, len(args)))
        args = args[:at] + [draw(value)] * draw(st.integers(0, 1)) + args[at + 1:]
    return global_op(f"torch._utils.{fn}", draw(st.booleans())) + tuple_op(args) + P.REDUCE


def _containers(value):
    items = st.lists(value, max_size=5)
    return st.one_of(
        items.map(lambda xs: P.EMPTY_LIST + (P.MARK + b"".join(xs) + P.APPENDS if xs else b"")),
        items.map(tuple_op),
        st.lists(st.tuples(st.one_of(LEAF_OPS, value), value), max_size=4).map(
            lambda kv: P.EMPTY_DICT + P.MARK + b"".join(k + v for k, v in kv) + P.SETITEMS),
        items.map(lambda xs: P.EMPTY_SET + P.MARK + b"".join(xs) + P.ADDITEMS),
        items.map(lambda xs: P.MARK + b"".join(xs) + P.FROZENSET),
    )


@st.composite
def _call(draw, value) -> bytes:
    g = global_op(draw(st.sampled_from(GLOBALS)), draw(st.booleans()))
    args = tuple_op(draw(st.lists(value, max_size=4)))
    how = draw(st.sampled_from(["reduce", "newobj", "newobj_ex", "build", "inst", "obj"]))
    if how == "reduce":
        return g + args + P.REDUCE
    if how == "newobj":
        return g + args + P.NEWOBJ
    if how == "newobj_ex":
        return g + args + P.EMPTY_DICT + P.NEWOBJ_EX
    if how == "build":
        return g + args + P.REDUCE + draw(value) + P.BUILD
    if how == "inst":
        module, _, name = draw(st.sampled_from(GLOBALS)).rpartition(".")
        return P.MARK + b"".join(draw(st.lists(value, max_size=3))) + P.INST + \
            module.encode() + b"\n" + name.encode() + b"\n"
    return P.MARK + g + b"".join(draw(st.lists(value, max_size=3))) + P.OBJ


@st.composite
def _memo(draw, value) -> bytes:
    """A value memoized, then fetched again one or more times (shared references)."""
    v = draw(value)
    put = draw(st.sampled_from([P.MEMOIZE, P.BINPUT + b"\x00", P.PUT + b"0\n",
                                P.LONG_BINPUT + b"\x00\x00\x00\x00"]))
    idx = 0
    get = draw(st.sampled_from([P.BINGET + bytes([idx]), P.GET + b"0\n",
                                P.LONG_BINGET + _u("<I", idx), P.BINGET + b"\x07"]))
    n = draw(st.integers(1, 4))
    return P.EMPTY_LIST + P.MARK + v + put + get * n + P.APPENDS


VALUE_OPS = st.recursive(
    LEAF_OPS,
    lambda value: st.one_of(_containers(value), _call(value), _memo(value), rebuild_tensor(value),
                            storage_pid(), value.map(lambda v: v + P.BINPERSID)),
    max_leaves=20,
)

RAW_OPS = st.one_of(
    st.sampled_from([P.MARK, P.STOP, P.POP, P.POP_MARK, P.DUP, P.NONE, P.APPEND, P.APPENDS,
                     P.BUILD, P.DICT, P.EMPTY_DICT, P.LIST, P.EMPTY_LIST, P.REDUCE, P.SETITEM,
                     P.SETITEMS, P.TUPLE, P.EMPTY_TUPLE, P.TUPLE1, P.TUPLE2, P.TUPLE3, P.NEWOBJ,
                     P.NEWOBJ_EX, P.STACK_GLOBAL, P.MEMOIZE, P.EMPTY_SET, P.ADDITEMS,
                     P.FROZENSET, P.BINPERSID, P.OBJ, P.NEXT_BUFFER, P.READONLY_BUFFER,
                     b"\xff", b"\x99", b"Z"]),
    st.binary(max_size=4).map(lambda b: P.INT + b + b"\n"),
    st.sampled_from([P.INT + b"01\n", P.INT + b"00\n", P.LONG + b"12L\n", P.FLOAT + b"nan\n",
                     P.STRING + b"'abc'\n", P.STRING + b"abc\n", P.UNICODE + b"\\u00e9\n",
                     P.PERSID + b"0\n", P.GLOBAL + b"os\nsystem\n", P.INST + b"builtins\neval\n",
                     P.GET + b"999\n", P.GET + b"x\n", P.PUT + b"-1\n", P.PROTO + b"\x09",
                     P.FRAME + _u("<Q", 2**63), P.EXT1 + b"\x01", P.EXT2 + b"\x01\x00",
                     P.EXT4 + b"\x01\x00\x00\x00", P.BINGET + b"\xff",
                     P.LONG_BINGET + _u("<I", 2**32 - 1), P.LONG_BINPUT + _u("<I", 2**31)]),
    # declared lengths far past the data
    st.sampled_from([P.LONG4, P.BINBYTES, P.BINSTRING, P.BINUNICODE]).flatmap(
        lambda op: st.sampled_from([2**31 - 1, 2**30, 100]).map(
            lambda n: op + _u("<I", n) + b"ab")),
    st.sampled_from([P.BINBYTES8, P.BINUNICODE8, P.BYTEARRAY8]).flatmap(
        lambda op: st.sampled_from([2**63 - 1, 2**40, 64 * 2**20 + 1]).map(
            lambda n: op + _u("<Q", n) + b"ab")),
    st.integers(0, 255).map(lambda n: P.LONG1 + bytes([n]) + b"\x01"),
    st.integers(0, 255).map(lambda n: P.SHORT_BINBYTES + bytes([n]) + b"xy"),
)


@st.composite
def pickle_program(draw, root=None) -> bytes:
    """A protocol header, one value program (or `root`), STOP; sometimes raw opcodes spliced in."""
    body = draw(root if root is not None else VALUE_OPS)
    proto = draw(st.sampled_from([b"", P.PROTO + b"\x02", P.PROTO + b"\x04", P.PROTO + b"\x05"]))
    data = proto + body + P.STOP
    if draw(st.integers(0, 3)) == 0:
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(RAW_OPS) + data[at:]
    return data


RAW_PROGRAM = st.lists(RAW_OPS | LEAF_OPS, max_size=30).map(b"".join)

"""Pickle programs over the full opcode set (every opcode in `pickletools.opcodes`, protocols
0-5), stack-correct so that both readers get far enough to decide: atoms in every spelling,
containers built every way, globals by GLOBAL / STACK_GLOBAL / INST / OBJ and called by
REDUCE, NEWOBJ, NEWOBJ_EX and BUILD, memo PUT/GET in all widths (self-references included),
POP / DUP / POP_MARK, persistent ids, extension codes, out-of-band buffers and framing.

Global names come from torch's weights_only allowlist, ours, and a pool of others (code-running
callables, stdlib and numpy classes, typos). Integers handed to calls stay small or overflow
an index (>= 2**63), so torch's allowlisted constructors never size a large buffer.
"""

from __future__ import annotations

import pickle as P
import struct

from hypothesis import strategies as st

from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS

from .pickle_grammar import UNSAFE

try:
    from torch._weights_only_unpickler import _get_allowed_globals
    TORCH_ALLOWED = tuple(sorted(_get_allowed_globals()))
except ImportError:  # the test using these skips without torch
    TORCH_ALLOWED = ()

OTHERS = ("os.system", "imaplib.IMAP4_stream", "collections.OrderedDict", "argparse.Namespace",
          "numpy.core.multiarray._reconstruct", "numpy._core.multiarray.scalar", "numpy.ndarray",
          "numpy.dtype", "numpy.random._pickle.__randomstate_ctor", "builtins.print",
          "builtins.list", "builtins.dict", "builtins.object", "builtins.frozenset",
          "builtins.slice", "__builtin__.set", "__builtin__.getattr", "copy_reg._reconstructor",
          "copyreg._reconstructor", "collections.defaultdict", "collections.deque",
          "torch.nn.modules.linear.Linear", "torch.optim.adamw.AdamW", "no.such.Thing",
          "torch.device.__init__", "torch.Tensor.add_", "builtins.getattr")
NAMES = tuple(dict.fromkeys(TORCH_ALLOWED + tuple(sorted(TORCH_GLOBALS)) + UNSAFE + OTHERS))
CALLED = tuple(n for n in NAMES if not n.startswith(("torch.cuda.", "torch.sparse.")))
STORAGES = {"FloatStorage": 4, "DoubleStorage": 8, "HalfStorage": 2, "BFloat16Storage": 2,
            "LongStorage": 8, "IntStorage": 4, "ByteStorage": 1, "BoolStorage": 1,
            "UntypedStorage": 1}  # class -> bytes per element
STORAGE_KEYS = ("0", "1", "2")


def _u(fmt: str, n: int) -> bytes:
    return struct.pack(fmt, n)


SMALL = st.integers(-3, 6)
INTS = st.one_of(st.integers(-3, 300), st.sampled_from(
    [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**63, 2**64, -2**63 - 1, 10**30]))
TEXT = st.one_of(st.sampled_from(["", "a", "w", "step", "lr", "cpu", "storage", "F32", "é",
                                  "torch.strided", "latin1", "cuda:0"]), st.text(max_size=6))
ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6)
RAW = st.binary(max_size=8)


class Program:
    """One pickle being written: the bytes, and the memo slots in use (for GETs)."""

    def __init__(self, draw, proto: int, zip_mode: bool, torch_only: bool):
        self.draw, self.proto, self.zip = draw, proto, zip_mode
        self.torch = torch_only  # only the opcodes torch's weights_only unpickler reads
        self.out = bytearray()
        self.memo: dict[int, None] = {}
        # storage key -> record bytes, from its first persistent id (torch keeps that one)
        self.records: dict[str, int] = {}

    def w(self, b: bytes) -> None:
        self.out += b

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    # -- atoms ----------------------------------------------------------------------------
    def integer(self) -> None:
        n = self.draw(INTS)
        how = self.pick(["BININT", "BININT1", "BININT2", "LONG1"] if self.torch else
                        ["INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"])
        if how == "INT":
            spelt = self.pick([b"%d" % n, hex(n).encode()] + ([b"01", b"00"] if n in (0, 1)
                                                               else []))
            self.w(P.INT + spelt + b"\n")
        elif how == "BININT1" and 0 <= n < 256:
            self.w(P.BININT1 + bytes([n]))
        elif how == "BININT2" and 0 <= n < 65536:
            self.w(P.BININT2 + _u("<H", n))
        elif how == "BININT" and -2**31 <= n < 2**31:
            self.w(P.BININT + _u("<i", n))
        elif how == "LONG":
            self.w(P.LONG + b"%dL\n" % n)
        else:
            raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True) if n else b""
            self.w(P.LONG4 + _u("<i", len(raw)) + raw if how == "LONG4" else
                   P.LONG1 + bytes([len(raw)]) + raw)

    def atom(self) -> None:
        kind = self.pick(["none", "bool", "int", "int", "float", "str", "str", "py2str",
                          "empty"] + ([] if self.torch else ["bytes", "bytearray"]))
        if kind == "none":
            self.w(P.NONE)
        elif kind == "bool":
            self.w(self.pick([P.NEWTRUE, P.NEWFALSE]))
        elif kind == "int":
            self.integer()
        elif kind == "float":
            x = self.draw(st.floats(allow_nan=True, allow_infinity=True))
            self.w(self.pick([P.BINFLOAT + struct.pack(">d", x)] + ([] if self.torch else
                             [P.FLOAT + repr(x).encode() + b"\n"])))
        elif kind == "str":
            self.text(self.draw(TEXT))
        elif kind == "bytes":
            b = self.draw(RAW)
            op = self.pick(["SHORT_BINBYTES", "BINBYTES", "BINBYTES8"])
            self.w(P.SHORT_BINBYTES + bytes([len(b)]) + b if op == "SHORT_BINBYTES" else
                   P.BINBYTES + _u("<I", len(b)) + b if op == "BINBYTES" else
                   P.BINBYTES8 + _u("<Q", len(b)) + b)
            if self.draw(st.integers(0, 9)) == 0:
                self.w(P.READONLY_BUFFER)
        elif kind == "bytearray":
            b = self.draw(RAW)
            self.w(P.BYTEARRAY8 + _u("<Q", len(b)) + b)
            if self.draw(st.integers(0, 5)) == 0:
                self.w(P.READONLY_BUFFER)
        elif kind == "py2str":  # STRING, BINSTRING, SHORT_BINSTRING: decoded by the encoding
            if not self.torch and self.draw(st.booleans()):
                self.w(P.STRING + repr(self.draw(ASCII)).encode() + b"\n")
            else:
                b = self.draw(st.one_of(ASCII.map(str.encode), RAW))
                self.w(P.SHORT_BINSTRING + bytes([len(b)]) + b if self.torch or
                       self.draw(st.booleans()) else P.BINSTRING + _u("<i", len(b)) + b)
        else:
            self.w(self.pick([P.EMPTY_LIST, P.EMPTY_DICT, P.EMPTY_TUPLE, P.EMPTY_SET]))

    def text(self, s: str) -> None:
        raw = s.encode("utf-8", "surrogatepass")
        op = "BINUNICODE" if self.torch else \
            self.pick(["SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"])
        if op == "UNICODE":
            self.w(P.UNICODE + s.encode("raw-unicode-escape", "surrogatepass").replace(
                b"\n", b"\\u000a").replace(b"\r", b"\\u000d") + b"\n")
        elif op == "SHORT_BINUNICODE" and len(raw) < 256:
            self.w(P.SHORT_BINUNICODE + bytes([len(raw)]) + raw)
        elif op == "BINUNICODE8":
            self.w(P.BINUNICODE8 + _u("<Q", len(raw)) + raw)
        else:
            self.w(P.BINUNICODE + _u("<I", len(raw)) + raw)

    # -- values ---------------------------------------------------------------------------
    def value(self, depth: int) -> None:
        """Emit opcodes that push exactly one value."""
        if depth <= 0:
            return self.atom()
        kind = self.pick(["atom", "atom", "list", "dict", "tuple", "global", "call", "call",
                          "memo", "persid"] + (["tensor"] * 4 if self.zip else ["call"])
                         + ([] if self.torch else ["set", "stack", "ext"]))
        getattr(self, f"_{kind}")(depth - 1)

    def _atom(self, depth):
        self.atom()

    def _items(self, depth, most=3) -> int:
        n = self.draw(st.integers(0, most))
        for _ in range(n):
            self.value(depth)
        return n

    def _key(self, depth):
        """A dict key or set member: hashable in both readers."""
        if self.draw(st.integers(0, 4)):
            self.atom_hashable()
        else:
            self.value(depth)

    def atom_hashable(self):
        kind = self.pick(["int", "str", "none", "bool", "bytes"])
        if kind == "int":
            self.integer()
        elif kind == "str":
            self.text(self.draw(TEXT))
        elif kind == "none":
            self.w(P.NONE)
        elif kind == "bool":
            self.w(self.pick([P.NEWTRUE, P.NEWFALSE]))
        elif self.torch:
            self.w(P.NONE)
        else:
            b = self.draw(RAW)
            self.w(P.SHORT_BINBYTES + bytes([len(b)]) + b)

    def _memoize_here(self):
        if self.draw(st.integers(0, 2)) == 0:
            self.put()

    def _list(self, depth):
        how = self.pick(["append", "appends"] + ([] if self.torch else ["list"]))
        if how == "list":
            self.w(P.MARK)
            self._items(depth)
            return self.w(P.LIST)
        self.w(P.EMPTY_LIST)
        self._memoize_here()  # as pickle does: a later GET may refer to the list itself
        if how == "append":
            for _ in range(self.draw(st.integers(0, 3))):
                self.value(depth)
                self.w(P.APPEND)
        else:
            self.w(P.MARK)
            self._items(depth)
            self.w(P.APPENDS)

    def _dict(self, depth):
        how = self.pick(["setitem", "setitems"] + ([] if self.torch else ["dict"]))
        n = self.draw(st.integers(0, 3))
        if how == "dict":
            self.w(P.MARK)
            for _ in range(n):
                self._key(depth)
                self.value(depth)
            return self.w(P.DICT)
        self.w(P.EMPTY_DICT)
        self._memoize_here()
        if how == "setitems":
            self.w(P.MARK)
        for _ in range(n):
            self._key(depth)
            self.value(depth)
            if how == "setitem":
                self.w(P.SETITEM)
        if how == "setitems":
            self.w(P.SETITEMS)

    def _tuple(self, depth):
        n = self.draw(st.integers(0, 4))
        if 1 <= n <= 3 and self.draw(st.booleans()):
            for _ in range(n):
                self.value(depth)
            return self.w((P.TUPLE1, P.TUPLE2, P.TUPLE3)[n - 1])
        if n == 0 and self.draw(st.booleans()):
            return self.w(P.EMPTY_TUPLE)
        self.w(P.MARK)
        for _ in range(n):
            self.value(depth)
        self.w(P.TUPLE)

    def _set(self, depth):
        frozen = self.draw(st.booleans())
        self.w(P.MARK if frozen else P.EMPTY_SET + P.MARK)
        for _ in range(self.draw(st.integers(0, 3))):
            self._key(depth)
        self.w(P.FROZENSET if frozen else P.ADDITEMS)

    def glob(self, names=NAMES) -> None:
        if self.torch and names is not NAMES and self.draw(st.integers(0, 2)):
            names = [n for n in names if n in TORCH_ALLOWED] or names
        qual = self.pick(names)
        module, _, name = qual.rpartition(".")
        if "." in module and self.draw(st.integers(0, 3)) == 0:  # a dotted name: mod.Class.attr
            module, _, first = module.rpartition(".")
            name = f"{first}.{name}"
        if self.torch or self.draw(st.booleans()):
            self.w(P.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n")
        else:
            self.text(module)
            self.text(name)
            self.w(P.STACK_GLOBAL)

    def _global(self, depth):
        self.glob()

    def _args(self, depth):
        self._tuple(depth)

    def _call(self, depth):
        how = self.pick(["reduce", "reduce", "newobj", "build"] + ([] if self.torch else
                                                                     ["newobj_ex", "inst", "obj"]))
        if how == "inst":
            qual = self.pick(CALLED)
            module, _, name = qual.rpartition(".")
            self.w(P.MARK)
            self._items(depth)
            return self.w(P.INST + module.encode() + b"\n" + name.encode() + b"\n")
        if how == "obj":
            self.w(P.MARK)
            self.glob(CALLED)
            self._items(depth)
            return self.w(P.OBJ)
        if how == "build":
            self.value(depth)
            self.value(depth)
            return self.w(P.BUILD)
        self.glob(CALLED)
        self._args(depth)
        if how == "newobj_ex":
            self._dict(depth)
        self.w({"reduce": P.REDUCE, "newobj": P.NEWOBJ, "newobj_ex": P.NEWOBJ_EX}[how])
        if self.draw(st.integers(0, 3)) == 0:  # state for the result
            self.value(depth)
            self.w(P.BUILD)

    def put(self) -> None:
        how = self.pick(["BINPUT", "LONG_BINPUT"] if self.torch else
                        ["PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"])
        if how == "MEMOIZE":
            self.memo[len(self.memo)] = None
            return self.w(P.MEMOIZE)
        slot = self.draw(st.sampled_from([0, 1, 2, 7, 255, 256, 2**20]))
        if how == "BINPUT" and slot > 255:
            how = "LONG_BINPUT"
        self.memo[slot] = None
        self.w(P.PUT + b"%d\n" % slot if how == "PUT" else P.BINPUT + bytes([slot])
               if how == "BINPUT" else P.LONG_BINPUT + _u("<I", slot))

    def get(self, slot: int) -> None:
        how = self.pick(["BINGET", "LONG_BINGET"] if self.torch else
                        ["GET", "BINGET", "LONG_BINGET"])
        if how == "BINGET" and slot > 255:
            how = "LONG_BINGET"
        self.w(P.GET + b"%d\n" % slot if how == "GET" else P.BINGET + bytes([slot])
               if how == "BINGET" else P.LONG_BINGET + _u("<I", slot))

    def _memo(self, depth):
        if self.memo and self.draw(st.booleans()):
            return self.get(self.pick(sorted(self.memo)))
        self.value(depth)
        self.put()

    def _stack(self, depth):
        how = self.pick(["pop", "dup", "pop_mark"])
        if how == "pop":  # a value pushed and dropped (its calls still happen)
            self.value(depth)
            self.w(P.POP)
            self.value(depth)
        elif how == "dup":
            self.value(depth)
            self.w(P.DUP + P.TUPLE2)
        else:
            self.w(P.MARK)
            self._items(depth)
            self.w(P.POP_MARK)
            self.value(depth)

    def _persid(self, depth):
        if not self.torch and self.draw(st.booleans()):
            self.w(P.PERSID + self.draw(ASCII).encode() + b"\n")
        else:
            self.value(depth)
            self.w(P.BINPERSID)

    def _ext(self, depth):
        self.w(self.pick([P.EXT1 + b"\x01", P.EXT2 + b"\x01\x00", P.EXT4 + b"\x01\x00\x00\x00",
                          P.NEXT_BUFFER]))

    def storage(self) -> int:
        """('storage', torch.<X>Storage, key, 'cpu', numel) BINPERSID; returns numel."""
        numel = self.draw(st.integers(0, 6))
        cls, key = self.pick(sorted(STORAGES)), self.pick(STORAGE_KEYS)
        self.records.setdefault(key, numel * STORAGES[cls])
        self.w(P.MARK)
        self.text("storage")
        self.glob([f"torch.{cls}"])
        self.text(key)
        self.text("cpu")
        self.w(P.BININT1 + bytes([numel]) + P.TUPLE + P.BINPERSID)
        return numel

    def _tensor(self, depth):
        """torch's tensor rebuilders, mostly well formed, sometimes with a wrong argument."""
        fn = self.pick(["_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v2",
                        "_rebuild_tensor_v3", "_rebuild_parameter"])
        if fn == "_rebuild_parameter":
            self.glob(["torch._utils._rebuild_parameter"])
            self.w(P.MARK)
            self._tensor_v2(depth)
            self.w(self.pick([P.NEWTRUE, P.NEWFALSE]))
            self._hooks()
            return self.w(P.TUPLE + P.REDUCE)
        if fn == "_rebuild_tensor_v2":
            return self._tensor_v2(depth)
        self.glob([f"torch._utils.{fn}"])
        self.w(P.MARK)
        self._tensor_args(depth)
        if fn == "_rebuild_tensor_v3":
            self.w(P.NEWFALSE)
            self._hooks()
            self.glob([g for g in TORCH_GLOBALS if g.startswith("torch.") and
                       type(TORCH_GLOBALS[g]) is str and not g.endswith("Storage")][:12])
        self.w(P.TUPLE + P.REDUCE)

    def _tensor_v2(self, depth):
        self.glob(["torch._utils._rebuild_tensor_v2"])
        self.w(P.MARK)
        self._tensor_args(depth)
        self.w(self.pick([P.NEWFALSE, P.NEWTRUE]))
        self._hooks()
        self.w(P.TUPLE + P.REDUCE)

    def _tensor_args(self, depth):
        numel = self.storage()
        ndim = self.draw(st.integers(0, 2))
        shape = [self.draw(st.integers(0, 3)) for _ in range(ndim)]
        stride, acc = [], 1
        for d in reversed(shape):
            stride.insert(0, acc)
            acc *= max(d, 1)
        if self.draw(st.integers(0, 4)) == 0:
            stride = [self.draw(SMALL) for _ in range(self.draw(st.integers(0, 2)))]
        offset = self.draw(st.integers(0, 2)) if numel else 0
        if self.draw(st.integers(0, 6)) == 0:
            self.value(depth)  # a wrong argument in the offset's place
        else:
            self.w(P.BININT1 + bytes([offset]))
        for dims in (shape, stride):
            self.w(P.MARK)
            for d in dims:
                self.w(P.BININT + _u("<i", d))
            self.w(P.TUPLE)

    def _hooks(self):
        self.glob(["collections.OrderedDict"])
        self.w(P.EMPTY_TUPLE + P.REDUCE)


@st.composite
def opcode_program(draw, zip_mode: bool = False):
    """PROTO (or none, for protocols 0 and 1), maybe one FRAME, one value, STOP. Half of them
    use only the opcodes torch's weights_only unpickler reads (protocol 2, as torch.save
    writes), so that its answer is more often a result to compare than a refusal."""
    torch_only = draw(st.booleans())
    proto = 2 if torch_only else draw(st.integers(0, 5))
    prog = Program(draw, proto, zip_mode, torch_only)
    prog.value(draw(st.integers(1, 4)))
    body = bytes(prog.out) + P.STOP
    if proto >= 4 and draw(st.booleans()):
        body = P.FRAME + _u("<Q", len(body)) + body
    header = P.PROTO + bytes([proto]) if proto >= 2 or draw(st.booleans()) else b""
    if zip_mode:  # and the size of each storage record (a wrong size is another test)
        return header + body, prog.records
    return header + body

"""Recorders for the standard library's containers and values (collections, builtins, codecs,
copyreg): each builds a plain value from checked arguments, never by calling the real class."""

from __future__ import annotations

from ckpt_browser.readers.pickle_safe.calls import SAFE_CODECS, hazard
from ckpt_browser.readers.pickle_safe.checks import BadCall, Reaches, arity
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.standins import Opaque


def _from_items(args, low=0) -> list:
    arity(args, low, 1 if low == 0 else low + 1)
    items = args[-1] if len(args) > low else ()
    if type(items) in (list, tuple, set, frozenset):
        return list(items)
    raise BadCall(f"items are {short(items)}")  # never iterate a range or a stand-in


def ordered_dict(u, args):  # OrderedDict([(k, v), ...]) or OrderedDict()
    if not args:
        return {}  # every tensor's backward_hooks: the hot case
    if type(args[0]) is dict:
        return dict(args[0])
    out: dict = {}
    pairs = _from_items(args)
    if not all(type(p) in (tuple, list) and len(p) == 2 for p in pairs):
        raise BadCall("items are not (key, value) pairs")
    u.setitems(out, [x for p in pairs for x in p])
    return out


def default_dict(u, args):  # defaultdict(factory[, items]): the factory is dropped
    """The factory is kept in the dict and called on the first missing key: it must be data
    (list, int, dict ...), never a function of the file's choosing."""
    if args and args[0] is not None:
        found = hazard(u, args[0])
        if found or not (type(args[0]) is Opaque and u.is_global(args[0])):
            raise Reaches(f"keeps {found or short(args[0])} as its factory, which a missing "
                          "key calls")
    if len(args) == 2 and type(args[1]) is dict:
        return dict(args[1])
    arity(args, 0, 1)
    return {}


def counter(u, args):  # Counter(dict)
    return dict(args[0]) if len(args) == 1 and type(args[0]) is dict else ordered_dict(u, args)


def deque(u, args):  # deque(items[, maxlen])
    if len(args) == 2 and type(args[1]) not in (int, type(None)):
        raise BadCall(f"maxlen {short(args[1])}")
    return _from_items(args[:1]) if args else []


def make_set(u, args):
    return set(u.hashables(_from_items(args)))


def make_frozenset(u, args):
    return frozenset(u.hashables(_from_items(args)))


def make_complex(u, args):
    if all(type(a) in (int, float, bool) for a in arity(args, 0, 2)):
        return complex(*args)
    raise BadCall(short(args))


def make_slice(u, args):
    if all(type(a) in (int, type(None)) for a in arity(args, 1, 3)):
        return slice(*args)
    raise BadCall(short(args))


def _latin1(args) -> bytes:
    if not args:
        return b""
    if type(args[0]) is bytes and len(args) == 1:
        return args[0]
    if len(args) == 2 and type(args[0]) is str and type(args[1]) is str:
        codec = args[1].lower()
        if codec not in SAFE_CODECS:  # looked up in `encodings`: imported by name
            raise Reaches(f"encodes with the codec {args[1][:40]!r}, which Python imports by "
                          "name")
        try:
            return args[0].encode(codec)
        except UnicodeEncodeError:
            raise BadCall(f"text outside {codec}") from None
    raise BadCall(short(args))  # bytes(10**12) would allocate


def make_bytes(u, args):
    return _latin1(args)


def make_bytearray(u, args):
    return bytearray(_latin1(args))


def codecs_encode(u, args):  # how protocol 2 spells bytes: _codecs.encode(str, "latin1")
    if len(args) == 2:
        return _latin1(args)
    raise BadCall(short(args))


PLAIN_BASES = frozenset({"builtins.object", "builtins.dict", "builtins.list", "builtins.tuple",
                         "builtins.set", "builtins.int", "builtins.float", "builtins.str",
                         "builtins.bytes"})


def reconstructor(u, args):  # copyreg._reconstructor(cls, base, state): protocol 0/1 objects
    cls, base, state = arity(args, 3, 3)
    if type(cls) is not Opaque or not u.is_global(cls):
        raise BadCall(short(cls))
    qual = base.qualname if type(base) is Opaque and u.is_global(base) else None
    if qual not in PLAIN_BASES:  # base.__new__(cls, state) and base.__init__(obj, state) run
        return u.unsafe_call(qual or f"a {short(base)} as a base", args)
    if qual != "builtins.object" and state is not None and not _plain(state):
        return u.unsafe_call(qual, args)  # a builtin's __init__ consuming a rebuilt object
    return u.rebuilt(cls)


def newobj(u, args):  # copyreg.__newobj__(cls, *args), what NEWOBJ does, spelt as a REDUCE
    if not args:
        raise BadCall("no class")
    return u.call(args[0], args[1:], new=True)


def newobj_ex(u, args):  # copyreg.__newobj_ex__(cls, args, kwargs)
    cls, inner, kwargs = arity(args, 3, 3)
    if type(inner) not in (tuple, list) or (kwargs and type(kwargs) is not dict):
        raise BadCall(short(args))
    return u.call(cls, (*inner, kwargs) if kwargs else tuple(inner), new=True)


def _plain(value) -> bool:
    return type(value) in (str, int, float, bool, bytes, type(None)) or (
        type(value) in (tuple, list) and all(_plain(v) for v in value[:64]) and len(value) <= 64)

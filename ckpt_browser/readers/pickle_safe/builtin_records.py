"""Recorders for the standard library's containers and values (collections, builtins, codecs,
copyreg): each builds a plain value from checked arguments, never by calling the real class."""

from __future__ import annotations

from ckpt_browser.readers.pickle_safe.checks import BadCall, arity
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.readers.standins import Opaque


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
    if len(args) == 2 and type(args[1]) is dict:
        return dict(args[1])
    arity(args, 0, 1)
    return {}


def counter(u, args):  # Counter(dict)
    return dict(args[0]) if len(args) == 1 and type(args[0]) is dict else ordered_dict(u, args)


def deque(u, args):  # deque(items[, maxlen])
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
    if (len(args) == 2 and type(args[0]) is str
            and str(args[1]).lower() in ("latin1", "latin-1", "iso-8859-1", "iso8859-1")):
        try:
            return args[0].encode("latin-1")
        except UnicodeEncodeError:
            raise BadCall("text outside latin-1") from None
    raise BadCall(short(args))  # bytes(10**12) would allocate


def make_bytes(u, args):
    return _latin1(args)


def make_bytearray(u, args):
    return bytearray(_latin1(args))


def codecs_encode(u, args):  # how protocol 2 spells bytes: _codecs.encode(str, "latin1")
    if len(args) == 2:
        return _latin1(args)
    raise BadCall(short(args))


def reconstructor(u, args):  # copyreg._reconstructor(cls, base, state): protocol 0/1 objects
    cls = arity(args, 3, 3)[0]
    if type(cls) is not Opaque:
        raise BadCall(short(cls))
    return Opaque(cls.qualname)

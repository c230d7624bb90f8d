"""A safetensors header's JSON, read the way the Rust loader's parser (serde_json) reads it.

Python's `json` and serde_json disagree on a few inputs, and a header must mean to us what it
means to `safe_open` (FORMATS.md "Safetensors"). serde_json refuses, where Python accepts:
a lone surrogate escape (`"\\ud800"`), a number beyond a 64-bit float (`1e400`, a 309-digit
integer), `NaN` and `Infinity`, and containers nested 128 deep. It reads `-0` as a float,
not an integer. Both refuse everything else that is not JSON.

`loads` is the fast path: Python's parser at C speed, for headers `plain` says hold none of
those. `loads_exact` parses again keeping what the loader sees and `json.loads` hides: every
object as its `Obj` pairs in order (duplicate keys kept), `-0` as -0.0, and any token serde_json
would refuse stops the parse with the reason.
"""

from __future__ import annotations

import json
import re

from ckpt_browser.errors import ShardError

DEPTH = 128  # serde_json's recursion limit: a container this deep is refused (the header is 1)
U64_MAX = 2**64 - 1
_I32_MAX = 2**31 - 1
_POW10 = tuple(float(f"1e{i}") for i in range(309))  # serde_json's POW10 table
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # might be a lone surrogate: parse exactly
_MINUS_ZERO = re.compile(r"[\[,:][ \t\n\r]*-0(?![0-9.eE])")  # a bare -0 token
_LONG = re.compile(r"[0-9]{20}")  # an integer that may not fit serde_json's u64 or i64
_NUMBER = re.compile(r"-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")


class Obj(tuple):
    """A JSON object as its (key, value) pairs, in order, duplicates kept."""

    __slots__ = ()


def plain(text: str) -> bool:
    """No surrogate escape and no bare -0: Python's parser reads the text as serde_json does,
    but for duplicate keys, numbers, depth and NaN, which the callers check."""
    return not ("\\u" in text and _ESCAPE.search(text)) and not (
        "-0" in text and _MINUS_ZERO.search(text))


def loads(text: str):
    """Python's parser (objects are dicts, the last duplicate kept)."""
    try:
        return json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise ShardError(_invalid(f"it nests deeper than {DEPTH - 1} levels")) from None
    except ValueError as e:
        if "digits" not in str(e):
            raise ShardError(f"header is not valid JSON: {e}") from None
    # An integer of over 4,300 digits: past any float, so serde_json refuses it too, and the
    # exact parse says which one
    loads_exact(text)
    raise ShardError(_invalid("a number is out of range"))


def loads_exact(text: str):
    """The parse serde_json makes: objects as `Obj`, and its refusals as ShardError, but for
    depth, which matters only where the loader ignores a value (`nesting` checks it there:
    anywhere else a deep value is refused for its type anyway)."""
    # the hooks cost a Python call per number: only when a number may need one
    ints = _int if _MINUS_ZERO.search(text) or _LONG.search(text) else None
    try:
        tree = json.loads(text, object_pairs_hook=Obj, parse_int=ints, parse_float=_float,
                          parse_constant=_constant)
    except _OutOfRange as e:
        raise ShardError(_invalid(f"the number {_clip(str(e))} is out of range for a 64-bit "
                                  "float")) from None
    except RecursionError:
        raise ShardError(_invalid(f"it nests deeper than {DEPTH - 1} levels")) from None
    except ValueError as e:
        raise ShardError(f"header is not valid JSON: {e}") from None
    if "\\u" in text:  # a surrogate comes only from an escape: raw UTF-8 cannot hold one
        _check_strings(tree)
    return tree


def nesting(value, depth: int) -> None:
    """Refuse `value`, a container at `depth` (the header is 1), if it nests as deep as
    serde_json's recursion limit."""
    stack = [(value, depth)]
    while stack:
        value, depth = stack.pop()
        if depth >= DEPTH:
            raise ShardError(_invalid(f"it nests {DEPTH} levels deep; serde_json stops at "
                                      f"{DEPTH - 1}"))
        items = value if type(value) is list else (v for _, v in value)
        stack.extend((v, depth + 1) for v in items if type(v) is Obj or type(v) is list)


def _invalid(why: str) -> str:
    return f"header is not valid JSON for the safetensors loader: {why}"


def _clip(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text):,} characters)"


def _constant(token: str):
    raise ValueError(f"{token} is not valid JSON")


class _OutOfRange(Exception):
    pass


def _int(token: str):
    if token == "-0":
        return -0.0  # serde_json: "Convert into a float ... on `-0`"
    if len(token) > 19 and not serde_f64_finite(token):
        raise _OutOfRange(token)
    return int(token)


def _float(token: str) -> float:
    if not serde_f64_finite(token):
        raise _OutOfRange(token)
    return float(token)


def serde_f64_finite(token: str) -> bool:
    """Whether serde_json (without float_roundtrip, as the safetensors wheel is built) reads a
    JSON number token without "number out of range". Its float is not correctly rounded:
    1.7976931348623158e308 is Python's largest float but out of range for serde_json."""
    m = _NUMBER.fullmatch(token)
    if m is None:
        raise ValueError(f"not a JSON number: {token!r}")
    whole, fraction, sign, exponent = m.groups()
    sig, exp = 0, 0
    for i, c in enumerate(whole):  # parse_integer; past u64, parse_long_integer only counts
        d = ord(c) - 48
        if sig * 10 + d > U64_MAX:
            exp = len(whole) - i
            break
        sig = sig * 10 + d
    long = exp > 0
    if fraction is not None:  # parse_decimal: digits past u64 are dropped
        if sig == 0:
            digits = fraction.lstrip("0")
            exp -= len(fraction) - len(digits)
        else:
            digits = fraction
        for c in digits[:21]:  # a u64 holds 20 digits: the 21st always overflows
            d = ord(c) - 48
            if sig * 10 + d > U64_MAX:
                break
            sig, exp = sig * 10 + d, exp - 1
    if exponent is not None:  # parse_exponent
        e = int(exponent.lstrip("0") or "0") if len(exponent.lstrip("0")) <= 10 else _I32_MAX + 1
        if e > _I32_MAX:  # parse_exponent_overflow
            return sig == 0 or sign == "-"
        exp = exp - e if sign == "-" else exp + e
        exp = max(-_I32_MAX - 1, min(_I32_MAX, exp))  # saturating i32
    elif fraction is None and not long:
        return True  # a u64 or i64 (or -0): always in range
    return _from_parts(sig, exp)


def _from_parts(sig: int, exp: int) -> bool:
    """serde_json's f64_from_parts, in the same float operations."""
    f = float(sig)
    while True:
        if abs(exp) <= 308:
            if exp >= 0:
                return f * _POW10[exp] != float("inf")
            return True  # division never overflows
        if f == 0.0:
            return True
        if exp >= 0:
            return False
        f /= 1e308
        exp += 308


def _check_strings(tree) -> None:
    """serde_json refuses a lone surrogate in any string, keys and ignored values too."""
    stack = [tree]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            _text(value)
        elif kind is Obj or kind is list:
            items = value if kind is list else (x for pair in value for x in pair)
            stack.extend(x for x in items if type(x) in _WALKED)


_WALKED = frozenset((str, Obj, list))


def _text(s: str) -> None:
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(s[e.start])
        raise ShardError(_invalid(f"a string holds the lone surrogate \\u{code:04x}, which "
                                  "serde_json refuses")) from None

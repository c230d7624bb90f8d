"""Hash flooding: a pickle whose dict or set keys all share one hash value (ints k*(2**61-1),
tuples or frozensets of them, floats 2.0**(61*j) ...) makes every insert compare against all
the keys before it, so a 1 MB pickle takes minutes. Each container admits at most
`LIMITS.hash_keys` keys per hash value; the rest are kept under placeholder keys, with one
warning per pickle.

str and bytes keys (SipHash with a random seed: collisions cannot be built), bool, None and
ints below 2**61 - 1 (each its own hash) skip the count: they are almost every key there is.
"""

from __future__ import annotations

import sys

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe.host import UnpicklerHost

SMALL = sys.hash_info.modulus  # 2**61 - 1: an int in (-SMALL, SMALL) hashes to itself
FAST_KEYS = (str, bytes, bool, type(None))


def fast_key(key) -> bool:
    kind = type(key)
    return kind in FAST_KEYS or (kind is int and -SMALL < key < SMALL)


class Hashing(UnpicklerHost):
    """Mixed into a pickle._Unpickler that has `note(message)`, `notes` and `_pins`."""

    def __init__(self, file):
        super().__init__(file)
        self._shared: dict[int, dict[int, int]] = {}  # id(container) -> hash -> keys seen
        self._per_hash = limits.LIMITS.hash_keys
        self._crowded = 0  # keys in hash groups over _per_hash
        self._placeholders = 0
        self._flood_note = -2  # index of the warning in notes; -2 none yet, -1 not kept

    def admitted(self, container, key, counts: dict | None = None):
        """`key`, or a placeholder once _per_hash keys of `container` share its hash. Raises
        TypeError when the key cannot be hashed."""
        h = hash(key)
        if counts is None:
            counts = self._shared.get(id(container))
            if counts is None:
                counts = self._shared[id(container)] = {}
                self._pins.append(container)  # its id stays its own while we read
        n = counts.get(h, 0) + 1
        counts[h] = n
        most = self._per_hash
        if n <= most:
            return key
        self._crowded += most + 1 if n == most + 1 else 1
        self._placeholders += 1
        return f"<key #{self._placeholders} sharing a hash value>"

    def flood_noted(self) -> None:
        """The one warning, updated in place as more keys crowd in."""
        text = (f"{self._crowded:,} keys of one dict or set share a hash value (a hash-flooding "
                f"attack?); {self._placeholders:,} are shown under placeholder keys")
        if self._flood_note == -2:
            before = len(self.notes)
            self.note(text)
            self._flood_note = before if len(self.notes) > before else -1
        elif self._flood_note >= 0:
            self.notes[self._flood_note] = text

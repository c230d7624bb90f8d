"""Name filter for the `/` key: case-insensitive substring, or a glob (with * ? [) that may
match any tail of the name, so `layers.*.q_proj*` finds `model.layers.0.self_attn.q_proj.weight`."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable


def name_matcher(pattern: str) -> Callable[[str], bool]:
    pattern = pattern.strip()
    if not pattern:
        return lambda name: True
    if any(c in pattern for c in "*?["):
        regex = re.compile(fnmatch.translate(pattern), re.IGNORECASE)
        return lambda name: regex.search(name) is not None
    needle = pattern.lower()
    return lambda name: needle in name.lower()

"""Caps on what one file may make us read or build, each raisable by an environment variable.

A legitimate checkpoint can outgrow a cap (a 300,000-tensor optimizer, a DCP metadata file of
tens of thousands of ranks); then `CKPT_BROWSER_<NAME>=<number>` raises it for that run. The
README lists every name, default and what hitting it looks like.
"""

from __future__ import annotations

import os


def env_limit(name: str, default: int) -> int:
    """`CKPT_BROWSER_<name>` as a positive whole number (`_` allowed), else `default`."""
    text = os.environ.get(f"CKPT_BROWSER_{name}", "").replace("_", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return default

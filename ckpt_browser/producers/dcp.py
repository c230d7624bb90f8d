"""torch DCP folders (`.metadata` + `__R_N.distcp`), alone or nested by other frameworks."""

from __future__ import annotations

import os
import re

from ckpt_browser.model import ERROR, Problem
from ckpt_browser.producers.base import Detection, Producer, Seen, listdir, rx, with_other

DCP_FILE = rx(r"\.metadata", r"\.metadata\.tmp", r"__\d+\.metadata", r"__\d+_\d+\.distcp")
DCP_DATA = re.compile(r"^__(\d+)_(\d+)\.distcp$")


def dcp_files(folder: str, rel: str, names: list[str] | None = None) -> tuple[str, ...]:
    names = listdir(os.path.join(folder, rel)) if names is None else names
    prefix = f"{rel}/" if rel else ""
    return tuple(prefix + n for n in names if DCP_FILE.match(n))


def is_dcp(folder: str) -> bool:
    return any(DCP_FILE.match(n) for n in listdir(folder))


def has_dcp(seen: Seen) -> bool:
    return not seen.is_file and any(DCP_FILE.match(n) for n in seen.names)


def dcp_only(seen: Seen, framework: str = "dcp") -> Detection:
    """A plain DCP folder (torchtitan's step-N or anyone's): every state part is in it."""
    path, names = seen.path, seen.names
    files = dcp_files(path, "", names)
    roles = {k: files for k in ("weights", "optimizer", "scheduler", "data", "progress")}
    problems = []
    if ".metadata" not in names and not any(re.match(r"^__\d+\.metadata$", n) for n in names):
        what = ".metadata.tmp is there but was never renamed" if ".metadata.tmp" in names \
            else "no .metadata"
        problems.append(Problem(ERROR, None, f"DCP save did not finish: {what}"))
    return Detection(path, path, framework, seen.step, seen.source,
                     roles=with_other(roles, names), dcp=("",), problems=tuple(problems))


DCP = Producer("dcp", has_dcp, dcp_only, rank_names=DCP_DATA)

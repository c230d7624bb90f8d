"""Zips whose members are checkpoint files themselves: Stable-Baselines3's `model.zip`
(`policy.pth`, `policy.optimizer.pth`, `pytorch_variables.pth` written by torch.save into the
archive, a JSON `data`, text version files), and any zip built the same way.

Each torch member is read like a file of its own (through a window into the archive when it is
stored, in memory within the pickle cap when it is compressed), never loaded; each becomes one
key of the archive's object, named by the member without its extension, so `policy.pth`'s
`mlp.0.weight` is `policy.mlp.0.weight`. Other members (SB3's JSON `data`, version files) are
named, not read: what they mean is their producer's to say.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, Problem
from ckpt_browser.readers.export import Window
from ckpt_browser.readers.zipentries import read_member
from ckpt_browser.standins import PickleFile

TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt", ".tar")


def is_archive(zf: zipfile.ZipFile) -> bool:
    """Members named like torch files, and no torch.save layout of its own."""
    return any(i.filename.endswith(TORCH_SUFFIXES) and "/" not in i.filename.rstrip("/")
               for i in zf.infolist()[:4096])


def read_archive(f, zf: zipfile.ZipFile, name: str, size: int, locate, read_file) -> PickleFile:
    """Every member: torch files read by `read_file` (torchfile.read_pickle_file_object,
    passed in: torchfile reads archives, and archives hold torch files), `locate(info)`
    giving a stored member's (data start, length) in the archive."""
    lim = limits.LIMITS
    obj: dict = {}
    storages: dict = {}
    problems: list[Problem] = []
    unsafe: dict = {}
    members = [i for i in zf.infolist() if not i.is_dir()]
    read = 0
    tensors: list = []
    for info in members:
        key = _key(info.filename)
        if info.filename.endswith(TORCH_SUFFIXES):
            if read == lim.zip_pickles:
                problems.append(Problem(ERROR, name, f"more than {lim.zip_pickles:,} torch "
                                        f"files inside (e.g. {info.filename}): the rest are not "
                                        "checked; they could run code when loaded"))
            read += 1
            if read > lim.zip_pickles:
                continue
            got, start = _read(f, zf, info, name, locate, read_file)
            for p in got.problems:
                problems.append(replace(p, file=name, message=f"{info.filename}: {p.message}"))
            unsafe.update(dict.fromkeys(got.unsafe))
            obj[key] = got.obj
            tensors += list(_tensors(got, key, info.filename, start, storages))
    torch_files = sum(1 for i in members if i.filename.endswith(TORCH_SUFFIXES))
    others = [i.filename for i in members if not i.filename.endswith(TORCH_SUFFIXES)]
    shown = f": {', '.join(others[:6])}{' ...' if len(others) > 6 else ''}" if others else ""
    problems.append(Problem(INFO, name, f"an archive of {torch_files} torch file(s), each read "
                            f"on its own and none loaded, and {len(others)} other member(s), "
                            f"not read{shown}"))
    return PickleFile(name=name, kind="torch-zip", obj=obj, tensors=tuple(tensors), size=size,
                      storages=storages, unsafe=tuple(unsafe), problems=tuple(problems))


def _key(member: str) -> str:
    for suffix in TORCH_SUFFIXES:
        if member.endswith(suffix):
            return member[:-len(suffix)]
    return member


def _read(f, zf, info: zipfile.ZipInfo, name: str, locate, read_file):
    lim = limits.LIMITS
    where = locate(info) if info.compress_type == zipfile.ZIP_STORED else None
    if where is None:  # compressed: in memory, within the pickle cap
        if info.file_size > lim.pickle_bytes:
            return PickleFile(name, "pickle", problems=(Problem(
                ERROR, name, f"{info.file_size:,} bytes compressed in the archive, over the "
                f"{lim.pickle_bytes:,}-byte limit; not read ({limits.env('pickle_bytes')} raises "
                "it); it could run code when loaded"),)), None
        data = read_member(zf, info, lim.pickle_bytes)
        return read_file(io.BytesIO(data), name, len(data), nested="torch"), None
    window = io.BufferedReader(Window(f, where[0], where[1]), 1024)
    return read_file(window, name, where[1], nested="torch"), where[0]


def _tensors(got: PickleFile, key: str, member: str, start: int | None, storages: dict):
    """The member's tensors under its key, their storages renamed into the archive's (and
    located in it when the member is stored, so their values can be read)."""
    for skey, record in got.storages.items():
        if start is not None:
            storages[f"{member}/{skey}"] = (start + record[0], record[1])
    for path, t in got.tensors:
        yield (f"{key}.{path}" if path else key), replace(
            t, storage_key=f"{member}/{t.storage_key}")

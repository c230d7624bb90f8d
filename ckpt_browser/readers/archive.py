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

import zipfile
from dataclasses import replace

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, Problem
from ckpt_browser.readers.export import read_member_file
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
    torch_files = [i for i in members if i.filename.endswith(TORCH_SUFFIXES)]
    others = [i.filename for i in members if not i.filename.endswith(TORCH_SUFFIXES)]
    tensors: list = []
    for n, info in enumerate(torch_files):
        if n == lim.zip_pickles:
            problems.append(Problem(ERROR, name, f"more than {lim.zip_pickles:,} torch files "
                                    f"inside (e.g. {info.filename}): the rest are not checked; "
                                    "they could run code when loaded"))
            break
        key = _key(info.filename)
        got, start = _read(f, zf, info, name, locate, read_file)
        for p in got.problems:
            problems.append(replace(p, file=name, message=f"{info.filename}: {p.message}"))
        unsafe.update(dict.fromkeys(got.unsafe))
        obj[key] = got.obj
        tensors += _tensors(got, key, info.filename, start, storages)
    shown = f": {', '.join(others[:6])}{' ...' if len(others) > 6 else ''}" if others else ""
    problems.append(Problem(INFO, name, f"an archive of {len(torch_files)} torch file(s), each "
                            f"read on its own and none loaded, and {len(others)} other "
                            f"member(s), not read{shown}"))
    return PickleFile(name=name, kind="torch-zip", obj=obj, tensors=tuple(tensors), size=size,
                      storages=storages, unsafe=tuple(unsafe), problems=tuple(problems))


def _key(member: str) -> str:
    for suffix in TORCH_SUFFIXES:
        if member.endswith(suffix):
            return member[:-len(suffix)]
    return member


def _read(f, zf, info: zipfile.ZipInfo, name: str, locate, read_file):
    """The member's PickleFile, and where its data starts in the archive when stored."""
    where = locate(info) if info.compress_type == zipfile.ZIP_STORED else None
    return read_member_file(f, zf, info, name, where, read_file), where[0] if where else None


def _tensors(got: PickleFile, key: str, member: str, start: int | None, storages: dict):
    """The member's tensors under its key, their storages renamed into the archive's (and
    located in it when the member is stored, so their values can be read)."""
    for skey, record in got.storages.items():
        if start is not None:
            storages[f"{member}/{skey}"] = (start + record[0], record[1])
    for path, t in got.tensors:
        yield (f"{key}.{path}" if path else key), replace(
            t, storage_key=f"{member}/{t.storage_key}")

"""`torch.export.save` archives (`.pt2`): listed from their JSON configs, never loaded.

A PT2 archive is a zip whose root holds `archive_format` ("pt2"), the graph in
`models/*.json`, and each weight or constant as a raw member under `data/weights/` or
`data/constants/`, described by `*_config.json` (name -> member, dtype code, sizes). The
configs are read within the JSON cap; the members only have their local header read, to find
where their bytes are. Entries saved with `use_pickle` are tensor subclasses, pickled: they
are listed by name, not unpickled.
"""

from __future__ import annotations

import json
import zipfile

from ckpt_browser.model import INFO, WARNING, Problem
from ckpt_browser.standins import PickleFile, TensorRef

MAX_CONFIG = 64 * 2**20

# torch._export.serde.schema.ScalarType -> our dtype spelling
SCALAR_TYPES = {1: "U8", 2: "I8", 3: "I16", 4: "I32", 5: "I64", 6: "F16", 7: "F32", 8: "F64",
                9: "C32", 10: "C64", 11: "C128", 12: "BOOL", 13: "BF16", 28: "U16",
                29: "F8_E4M3", 30: "F8_E5M2", 31: "F8_E4M3FNUZ", 32: "F8_E5M2FNUZ",
                33: "F8_E8M0", 34: "U32", 35: "U64"}
CONFIGS = (("data/weights/", "model_weights_config.json"),
           ("data/constants/", "model_constants_config.json"))


def is_export(zf: zipfile.ZipFile) -> str | None:
    """The archive's root folder when it is a PT2 archive."""
    for info in zf.infolist()[:4096]:
        parts = info.filename.split("/")
        if len(parts) == 2 and parts[1] == "archive_format" and info.file_size <= 16:
            return parts[0]
    return None


def read_export(zf: zipfile.ZipFile, root: str, name: str, size: int, locate) -> PickleFile:
    """The weights and constants of a PT2 archive as tensor records; `locate(info)` gives a
    member's (data start, length) in the file."""
    from ckpt_browser.readers.torchfile import read_member

    obj: dict = {}
    storages: dict[str, tuple[int, int]] = {}
    problems: list[Problem] = []
    for folder, config in CONFIGS:
        info = zf.NameToInfo.get(f"{root}/{folder}{config}")
        if info is None or info.file_size > MAX_CONFIG:
            continue
        try:
            doc = json.loads(read_member(zf, info, MAX_CONFIG))
        except (ValueError, UnicodeDecodeError, RecursionError):
            problems.append(Problem(WARNING, name, f"{info.filename} is not valid JSON"))
            continue
        entries = doc.get("config") if isinstance(doc, dict) else None
        for key, entry in (entries.items() if isinstance(entries, dict) else ()):
            ref = _tensor(zf, root, folder, str(key), entry, storages, locate)
            obj[str(key)] = ref if ref is not None else f"{key}: a pickled tensor, not read"
    detail = (f"a torch.export archive: {len(obj)} weights and constants; torch.export.load "
              "rebuilds its graph from models/*.json (not read here)")
    return PickleFile(name=name, kind="export", obj=obj, tensors=tuple(
        (k, v) for k, v in obj.items() if type(v) is TensorRef), size=size, storages=storages,
        problems=tuple(problems) + (Problem(INFO, name, detail),))


def _tensor(zf, root, folder, key, entry, storages, locate) -> TensorRef | None:
    if not isinstance(entry, dict) or entry.get("use_pickle"):
        return None
    meta = entry.get("tensor_meta")
    if not isinstance(meta, dict):
        meta = {}
    code, sizes = meta.get("dtype"), meta.get("sizes")
    # an int code only: a list or object there is unhashable (it raised TypeError here)
    dtype = SCALAR_TYPES.get(code) if isinstance(code, int) else None
    if dtype is None or not isinstance(sizes, list):
        return None
    dims: list[int] = []
    for s in sizes:
        d = s.get("as_int") if isinstance(s, dict) else None
        if type(d) is not int or not 0 <= d < 2**62:
            return None
        dims.append(d)
    shape = tuple(dims)
    stride = []
    step = 1
    for d in reversed(shape):
        stride.append(step)
        step *= max(d, 1)
    member = zf.NameToInfo.get(f"{root}/{folder}{entry.get('path_name')}")
    skey = str(entry.get("path_name"))
    if member is not None:
        where = locate(member)
        if where is not None:
            storages[skey] = where
    return TensorRef(dtype, shape, tuple(reversed(stride)), skey,
                     requires_grad=entry.get("is_param") is True,
                     is_parameter=entry.get("is_param") is True)

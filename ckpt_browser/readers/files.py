"""Read any file of a checkpoint as what its content is, whatever its name says.

`sniff` looks at the first bytes; `read_file` hands the file to the reader for that format
and returns a FileInfo: safetensors header, torch zip / TorchScript / torch.export archive,
legacy torch file or plain pickle (restricted unpickler, never run), JSON (only noted: the
analysis parses the ones it needs) or other. A name that claims a format the content does not
have is a problem, not a guide.
"""

from __future__ import annotations

import os
import struct

from ckpt_browser import limits
from ckpt_browser.model import ERROR, WARNING, FileInfo, Problem, TensorInfo
from ckpt_browser.readers.regular import missing_reason, open_regular, read_small
from ckpt_browser.readers.safetensors import read_header

HEAD = 64
TORCH_NAMES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".tar", ".pt2", ".distcp")
PICKLE_FORMATS = ("torch-zip", "torch-legacy", "pickle", "torchscript", "export")
MAX_TEXT = 4096  # a text file named like a torch file is read whole up to this size
LFS = "version https://git-lfs.github.com/spec/"
NOT_A_CHECKPOINT = ("neither safetensors, a torch zip, a legacy torch file, a pickle nor JSON")


def sniff(head: bytes) -> str:
    """"safetensors", "zip", "torch-legacy", "pickle", "json" or "other", from the first bytes."""
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:  # PROTO 2..5
        return "torch-legacy" if _first_pickle(head) == "legacy" else "pickle"
    if len(head) >= 10:
        (n,) = struct.unpack("<Q", head[:8])
        if 2 <= n <= limits.LIMITS.safetensors_header and head[8:].lstrip(b" ")[:1] == b"{":
            return "safetensors"
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    if text in (b"{", b"["):
        return "json"
    first = _first_pickle(head)  # protocols 0 and 1 have no header: a pickle that ends here
    if first is None:
        return "other"
    return {"legacy": "torch-legacy", "pickle": "pickle"}.get(first, "other")


def sniff_named(head: bytes, name: str) -> str:
    """sniff, and a file named like a torch file whose first bytes are the start of a pickle
    is one: protocols 0 and 1 have no header, and the unpickler decides."""
    kind = sniff(head)
    if kind == "other" and claimed(name) == "torch" and (
            head[:1] in (b"(", b"}", b"]", b"c") or _first_pickle(head) == "cut"):
        return "pickle"
    return kind


def _first_pickle(head: bytes) -> str | None:
    from ckpt_browser.readers.torchfile import first_pickle

    return first_pickle(head)


def claimed(name: str) -> str | None:
    """The format a file's name claims, if any."""
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".json"):
        return "json"
    if name.endswith(TORCH_NAMES):
        return "torch"
    return None


def head_of(path: str) -> tuple[bytes, int]:
    with open_regular(path) as f:
        return f.read(HEAD), os.fstat(f.fileno()).st_size


def read_file(root: str, name: str, shard: bool = False) -> FileInfo:
    """One file as what it holds. `shard`: the index or the layout expects safetensors, so
    the header reader goes first (no extra read for a healthy shard)."""
    path = os.path.join(root, name)
    if shard or name.endswith(".safetensors"):
        info = read_header(path, name)
        if info.header_bytes is not None or info.size is None:
            return info
        try:
            kind = sniff(head_of(path)[0])
        except OSError:
            return info
        if kind in ("safetensors", "other"):
            return info  # the header reader's words say what is wrong
        return _with(_read(root, name, path), name, Problem(
            WARNING, name, f"named like a safetensors file, but it is {_a(kind)}; read as that"))
    return _read(root, name, path)


def _read(root: str, name: str, path: str) -> FileInfo:
    try:
        head, size = head_of(path)
    except FileNotFoundError:
        return _failed(name, path, None, missing_reason(path))
    except IsADirectoryError:
        return _failed(name, path, None, "is a folder, not a file")
    except PermissionError:
        return _failed(name, path, None, "cannot read the file: permission denied")
    except OSError as e:
        return _failed(name, path, None, f"cannot read the file: {e.strerror or e}")
    kind = sniff_named(head, name)
    if kind == "safetensors":
        return read_header(path, name)
    if kind in ("zip", "torch-legacy", "pickle"):
        return pickle_info(path, name)
    if kind == "json":
        return FileInfo(name, path, size, format="json", detail="JSON")
    problems: tuple[Problem, ...] = ()
    claim = claimed(name)
    text = _small_text(path, head, size) if claim == "torch" and size else None
    if text is not None and text.startswith(LFS):
        return FileInfo(name, path, size, format="other", detail="Git LFS pointer", problems=(
            Problem(ERROR, name, "is a Git LFS pointer, not the file: its content was never "
                    "downloaded (git lfs pull fetches it)"),))
    if text is not None and name.endswith(".ckpt"):
        # speechbrain's Checkpointer names every recoverable's file .ckpt, counters and
        # data positions too, which it writes as text
        return FileInfo(name, path, size, format="other", detail="text")
    if claim in ("torch", "json") and size:
        what = "a torch file" if claim == "torch" else "a JSON file"
        problems = (Problem(ERROR, name, f"named like {what}, but its {size:,} bytes are "
                            f"{NOT_A_CHECKPOINT}"),)
    elif claim == "torch":
        problems = (Problem(ERROR, name, "empty file: not a torch file or pickle"),)
    return FileInfo(name, path, size, format="other", problems=problems,
                    detail="empty" if not size else "")


def _small_text(path: str, head: bytes, size: int) -> str | None:
    """The file's content when it is a little plain text (a counter, a YAML record, an LFS
    pointer), else None."""
    if size > MAX_TEXT:
        return None
    try:
        text = (head if size <= len(head) else read_small(path, MAX_TEXT)).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if all(c.isprintable() or c in "\n\r\t" for c in text) else None


def pickle_info(path: str, name: str) -> FileInfo:
    """A torch or pickle file through the restricted reader; tensors get their byte ranges.
    Their component is decided later, by the content analysis ("other" until then)."""
    from ckpt_browser.readers.torchfile import read_pickle_file, tensor_bytes

    pf = read_pickle_file(path, name)
    rows = []
    for key, t in pf.tensors:
        nbytes, where = tensor_bytes(pf, t)
        begin, end = where if where is not None else (0, nbytes)
        rows.append(TensorInfo(key, t.dtype, t.shape, name, begin, end, t.numel, "other",
                               where is not None))
    fmt = pf.kind if pf.obj is not None or pf.kind != "pickle" else _failed_format(pf)
    return FileInfo(name, path, pf.size, tensors=tuple(rows), problems=pf.problems, format=fmt,
                    source=pf)


def _failed_format(pf) -> str:
    """A plain pickle that could not be read at all: "other" when nothing says it was one."""
    return "pickle" if pf.problems and "not a torch file or pickle" not in \
        pf.problems[0].message else "other"


def _a(kind: str) -> str:
    return {"zip": "a zip (torch.save)", "torch-legacy": "a legacy torch file",
            "pickle": "a pickle", "json": "JSON"}.get(kind, kind)


def _with(info: FileInfo, name: str, problem: Problem) -> FileInfo:
    from dataclasses import replace

    return replace(info, problems=(problem,) + info.problems)


def _failed(name: str, path: str, size, message: str) -> FileInfo:
    return FileInfo(name, path, size, format=_guess(name),
                    problems=(Problem(ERROR, name, message),))


def _guess(name: str) -> str:
    """The format of a file that cannot be read: what its name suggests."""
    claim = claimed(name)
    if claim == "torch":
        return "dcp-rank" if name.endswith(".distcp") else "torch-zip"
    return claim or "other"

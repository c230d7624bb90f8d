"""Mirror a remote checkpoint's structure into the cache: names, sizes, and only needed bytes.

Per file, by what the readers will read (decided by the first bytes, as the readers do):
- a safetensors file: one speculative read of the first 128 KiB, and a second only when the
  header is longer;
- a file of 16 MiB or less (JSON, markers, DCP `.metadata`, small torch files): whole;
- a larger torch zip: its head, its end record and central directory, data.pkl, and each
  storage record's local header with the data descriptor before it (ranges close together are
  fetched as one);
- DCP rank files: the byte ranges of their non-tensor items, after `.metadata` is read;
- anything else: nothing (the mirror file is sparse: right size, no data).
Requests run on a pool of `concurrency` threads. The manifest records each file's size and
version (ETag, else mtime): reopening lists again but fetches only what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ckpt_browser import limits
from ckpt_browser.readers.files import sniff
from ckpt_browser.readers.regular import open_regular, read_small
from ckpt_browser.remote import register
from ckpt_browser.remote.errors import RemoteError, remote_errors
from ckpt_browser.remote.urls import public

SPECULATIVE = 128 * 1024
SMALL = 16 * 2**20
ZIP_TAIL = 65_535 + 22 + 20 + 56  # longest comment, end record, zip64 locator and record
ZIP_HEAD = 64 * 1024
LOCAL_HEADER_MAX = 30 + 1024  # fixed part, name and extra field of one local header
DESCRIPTOR_MAX = 24  # a ZIP64 data descriptor with its signature
COALESCE = 64 * 1024
MANIFEST = ".ckpt-browser-mirror.json"


def cache_root() -> str:
    base = os.environ.get("CKPT_BROWSER_CACHE")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "ckpt-browser", "remote")


def mirror(url: str, *, cache: bool = True, concurrency: int = 16, timeout: float = 60.0,
           progress: Callable[[int, int], None] | None = None) -> str:
    """The local path that stands for `url` (a folder or a file in the mirror)."""
    from ckpt_browser.remote.fs import open_fs

    shown = public(url)
    fs, root = open_fs(url, timeout)
    base = cache_root() if cache else tempfile.mkdtemp(prefix="ckpt-browser-")
    if not cache:
        import atexit

        atexit.register(shutil.rmtree, base, True)  # also when the fetch fails
    m = _Mirror(fs, root, shown, concurrency, timeout)
    with remote_errors(shown, timeout):
        kind, files = m.listing()
        local = os.path.join(base, hashlib.sha256(shown.encode()).hexdigest()[:24],
                             *_tail(public(m.root) if "://" in m.root else m.root))
        m.fetch(local, files, progress)
    if kind == "folder":
        register(local, fs, m.root, shown)
        return local
    path = os.path.join(local, files[0][0])
    register(local, fs, m.root, m.folder_shown)
    register(path, fs, m.paths[files[0][0]], shown)  # the URL as given: it may be presigned
    return path


def _tail(root: str) -> list[str]:
    """The last two folder names of the remote path: detection reads names such as
    checkpoint-500, step-10, global_step4 or a run folder above an iteration folder."""
    parts = [p for p in root.split("://")[-1].rstrip("/").split("/") if p not in ("", ".", "..")]
    return parts[-2:]


class _Mirror:
    def __init__(self, fs, root: str, shown: str, concurrency: int, timeout: float):
        self.fs, self.shown = fs, shown
        self.folder_shown = shown.rstrip("/")  # the URL of the folder the names are in
        self.given = root  # as the URL said: a trailing slash marks an HTTP folder
        self.root = root.rstrip("/")
        self.slots = threading.BoundedSemaphore(concurrency)
        self.concurrency = concurrency
        self.timeout = timeout
        self.local = ""
        self.old: dict = {}
        self.new: dict[str, dict] = {}
        self.paths: dict[str, str] = {}  # name -> remote path, where not root/name
        self.times: dict[str, float] = {}  # name -> the store's mtime, where the listing says
        self.lock = threading.Lock()

    # -- listing -------------------------------------------------------------------------------

    def listing(self) -> tuple[str, list[tuple[str, int | None, str | None]]]:
        """("folder" | "file", [(relative name, size, version)]), within the caps."""
        from ckpt_browser.remote.fs import entries

        lim = limits.LIMITS
        kind, found, self.times = entries(self.fs, self.given, lim.remote_depth,
                                          lim.remote_files)
        if kind == "file":  # named without its query (a presigned URL's token stays out)
            self.folder_shown, _, name = self.shown.rpartition("/")
            self.paths[name] = self.given
            self.root = public(self.given).rpartition("/")[0] if "://" in self.given else \
                self.given.rpartition("/")[0]
            found = [(name, *found[0])]
        return kind, found

    # -- fetching ------------------------------------------------------------------------------

    def fetch(self, local: str, files, progress) -> None:
        self.local = local
        self.old = _load_manifest(os.path.join(local, MANIFEST))
        os.makedirs(self.local, exist_ok=True)
        plain = [f for f in files if not f[0].endswith(".distcp")]
        plain.sort(key=lambda f: f[0].endswith(".safetensors"))  # a big index must not come last
        ranks = [f for f in files if f[0].endswith(".distcp")]
        done = 0
        for _ in _pooled(self._file, plain, self.concurrency):
            done += 1
            if progress:
                progress(done, len(plain))
        for name, size, version in ranks:
            self._sparse(name, size)
            self.new[name] = {"size": size, "version": version}
        self._dcp_items([r[0] for r in ranks])
        self._forget_others()
        self._set_times()
        _save_manifest(os.path.join(self.local, MANIFEST), self.shown, self.new)

    def _forget_others(self) -> None:
        """Files gone from the remote folder since the last visit go from the mirror too."""
        for folder, _, names in os.walk(self.local):
            for n in names:
                rel = os.path.relpath(os.path.join(folder, n), self.local)
                if rel != MANIFEST and rel not in self.new:
                    os.remove(os.path.join(folder, n))

    def _set_times(self) -> None:
        """The mirror's files and folders take the store's times (a run folder's timeline shows
        when each checkpoint was written, not when it was mirrored): a file its listed time, a
        folder its own (the Hub's last commit) or else its newest file's. Folders deepest first,
        after every write, since writing into a folder changes its time."""
        newest: dict[str, float] = {}
        for name, t in self.times.items():
            path = os.path.join(self.local, name)
            if os.path.isfile(path):
                os.utime(path, (t, t))
            parent = os.path.dirname(name)
            while parent:
                newest[parent] = max(newest.get(parent, t), t)
                parent = os.path.dirname(parent)
        newest.update((n, t) for n, t in self.times.items()
                      if os.path.isdir(os.path.join(self.local, n)))  # a folder's own time wins
        for folder in sorted(newest, key=lambda f: -f.count("/")):
            path = os.path.join(self.local, folder)
            if os.path.isdir(path):
                os.utime(path, (newest[folder], newest[folder]))

    def _file(self, entry) -> None:
        name, size, version = entry
        old = self.old.get(name)
        path = os.path.join(self.local, name)
        if old and version is None:  # an HTTP listing says nothing: ask (a HEAD, no body)
            from ckpt_browser.remote.fs import info

            with self.slots, remote_errors(f"{self.folder_shown}/{name}", self.timeout):
                size, version = info(self.fs, self.paths.get(name, f"{self.root}/{name}"))
        if (old and version is not None and old.get("version") == version
                and old.get("size") == size and os.path.exists(path)
                and (size is None or os.path.getsize(path) == size)):
            with self.lock:
                self.new[name] = old
            return
        if os.path.lexists(path):  # changed since: no stale bytes may survive
            os.remove(path)
        size, seen = self._plan(name, size)
        with self.lock:
            self.new[name] = {"size": size, "version": version or seen}

    def _plan(self, name: str, size: int | None) -> tuple[int, str | None]:
        """Fetch what the readers need of one file: its size, and its version if seen."""
        if name.endswith(".safetensors"):
            first = SPECULATIVE
        elif size is None:  # an HTTP listing gives no sizes: the first answer will
            first = ZIP_HEAD
        else:
            first = size if size <= SMALL else ZIP_HEAD
        head, size, seen = self._read(name, 0, first if size is None else min(first, size),
                                      size)
        self._sparse(name, size)
        self._write(name, 0, head)
        if len(head) < size <= SMALL and not name.endswith(".safetensors"):
            self._write(name, len(head), self._read(name, len(head), size, size)[0])
        elif (name.endswith(".safetensors") or sniff(head) == "safetensors") and len(head) >= 8:
            # a safetensors file by its content, whatever its name: the rest of its header
            need = 8 + int.from_bytes(head[:8], "little")
            if len(head) < need <= min(size, 8 + limits.LIMITS.safetensors_header):
                more = self._read(name, len(head), need, size)[0]
                self._write(name, len(head), more)
        elif len(head) < size and head.startswith(b"PK\x03\x04"):
            self._zip(name, size)
        return size, seen

    def _zip(self, name: str, size: int) -> None:
        """End record, central directory, and what the torch-zip reader reads of each entry."""
        lim = limits.LIMITS
        start = max(0, size - ZIP_TAIL)
        tail = self._read(name, start, size, size)[0]
        self._write(name, start, tail)
        path = os.path.join(self.local, name)
        with open_regular(path) as f:
            end = zipfile._EndRecData(f)
            if end is None:
                return  # the reader will say: truncated zip
            cd_start = max(0, end[zipfile._ECD_OFFSET])
            cd_end = min(start, cd_start + min(end[zipfile._ECD_SIZE], lim.zip_directory_bytes))
        if cd_start < cd_end:
            self._write(name, cd_start, self._read(name, cd_start, cd_end, size)[0])
        try:
            with open_regular(path) as f:
                infos = zipfile.ZipFile(f).infolist()[:lim.remote_zip_entries]
        except (zipfile.BadZipFile, ValueError, OSError):
            return
        # the zip checks also read the data descriptor that ends each entry (torch writes one
        # after every record): it sits just before the next local header or the directory
        ranges, budget = [(max(0, cd_start - DESCRIPTOR_MAX), cd_start)], lim.remote_zip_bytes
        for i in infos:
            small = "/data/" not in i.filename or i.filename.endswith("data.pkl")
            body = min(i.file_size, lim.pickle_bytes, budget) if small else 0
            budget -= body
            ranges.append((max(0, i.header_offset - DESCRIPTOR_MAX),
                           min(size, i.header_offset + LOCAL_HEADER_MAX + body)))
        self._read_ranges(name, ranges, size)

    def _read_ranges(self, name: str, ranges, size) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(ranges):
            if merged and a <= merged[-1][1] + COALESCE:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])

        def one(r):
            data = self._read(name, r[0], r[1], size)[0]
            self._write(name, r[0], data)

        for _ in _pooled(one, merged, self.concurrency):
            pass

    def _dcp_items(self, ranks: list[str]) -> None:
        """Non-tensor DCP items (steps, loader state, param groups) live in the rank files."""
        from ckpt_browser.readers.dcp import read_dcp

        folders = sorted({os.path.dirname(r) for r in ranks})
        for folder in folders:
            if not os.path.exists(os.path.join(self.local, folder, ".metadata")):
                continue
            d = read_dcp(os.path.join(self.local, folder), folder)
            budget = limits.LIMITS.remote_dcp_bytes
            by_file: dict[str, list] = {}
            for e in d.entries.values():
                if e.kind != "bytes":
                    continue
                for c in e.chunks:
                    if c.file is None or c.offset is None or c.length > budget:
                        continue
                    budget -= c.length
                    by_file.setdefault(c.file, []).append((c.offset, c.offset + c.length))
            for file, ranges in by_file.items():
                rel = f"{folder}/{file}" if folder else file
                size = (self.new.get(rel) or {}).get("size")
                if size is not None:
                    self._read_ranges(rel, ranges, size)

    # -- bytes ---------------------------------------------------------------------------------

    def _read(self, name: str, start: int, end: int,
              size: int | None) -> tuple[bytes, int, str | None]:
        """Bytes [start, end) of a remote file, its size, and its version if the answer said."""
        from ckpt_browser.remote.fs import read_range

        with self.slots, remote_errors(f"{self.folder_shown}/{name}", self.timeout):
            return read_range(self.fs, self.paths.get(name, f"{self.root}/{name}"), start, end,
                              size)

    def _sparse(self, name: str, size: int) -> None:
        path = os.path.join(self.local, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab") as f:
            if os.fstat(f.fileno()).st_size != size:
                f.truncate(size)

    def _write(self, name: str, offset: int, data: bytes) -> None:
        fd = os.open(os.path.join(self.local, name), os.O_WRONLY)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)


def _pooled(work, items, threads: int):
    """map on a thread pool; Ctrl-C or an error drops the requests not yet started."""
    pool = ThreadPoolExecutor(threads)
    try:
        yield from pool.map(work, items)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _load_manifest(path: str) -> dict:
    try:
        doc = json.loads(read_small(path, limits.LIMITS.json_bytes).decode("utf-8"))
        return doc.get("files", {}) if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_manifest(path: str, url: str, files: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"url": url, "files": files}, f)
    os.replace(tmp, path)


__all__ = ["RemoteError", "cache_root", "mirror", "public"]

"""A checkpoint inside the Hugging Face hub cache, named as the repo it mirrors.

huggingface_hub downloads into `<cache>/models--org--name/` (datasets--, spaces-- likewise):
`blobs/<hash>` holds each file once, `snapshots/<commit>/` holds the repo's tree as symlinks into
blobs/, and `refs/<branch>` holds the commit a branch pointed to. A file still downloading is
`blobs/<hash>.incomplete`, and its snapshot link is made only when it completes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ckpt_browser.readers.regular import read_small, why_unreadable
from ckpt_browser.readers.walk import list_folder

KINDS = {"models": "model", "datasets": "dataset", "spaces": "space"}
MAX_REF_BYTES = 200  # a ref file holds one 40-hex commit hash


@dataclass(frozen=True)
class CacheEntry:
    repo_id: str  # "org/name"
    kind: str  # "model" | "dataset" | "space"
    revision: str  # the snapshot folder: a commit hash
    refs: tuple[str, ...]  # the branches or tags that point at it ("main")
    repo_folder: str  # <cache>/models--org--name
    unread_refs: tuple[str, ...] = ()  # "refs/main is a FIFO (named pipe), not a regular file"

    def shown(self) -> str:
        """`hf cache: org/name @ main (0123abcd)`, the way people name a revision."""
        short = self.revision[:8] if len(self.revision) == 40 else self.revision
        at = f"{', '.join(self.refs)} ({short})" if self.refs else short
        kind = "" if self.kind == "model" else f"{self.kind} "
        return f"hf cache: {kind}{self.repo_id} @ {at}"


def cache_entry(path: str) -> CacheEntry | None:
    """The cache entry a path lies in (the snapshot folder or anything under it), else None."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] != "snapshots":
            continue
        prefix, _, name = parts[i - 1].partition("--")
        if prefix not in KINDS or not name:
            return None
        repo_folder = os.sep.join(parts[:i])
        revision = parts[i + 1]
        refs, unread = _refs_to(repo_folder, revision)
        return CacheEntry(name.replace("--", "/"), KINDS[prefix], revision, refs, repo_folder,
                          unread)
    return None


def _refs_to(repo_folder: str, revision: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The refs naming `revision`, and why others could not be read (a FIFO or a device
    where a ref should be: refused before any read, so nothing blocks)."""
    refs = os.path.join(repo_folder, "refs")
    found, unread = [], []
    for name in sorted(_names(refs)):
        path = os.path.join(refs, name)
        if os.path.isdir(path):
            continue  # refs/pr/: pull-request refs, never a branch shown
        try:
            if read_small(path, MAX_REF_BYTES).strip().decode("ascii", "replace") == revision:
                found.append(name)
        except OSError as e:
            unread.append(f"refs/{name} {why_unreadable(e)}")
    return tuple(found), tuple(unread)


def _names(folder: str) -> list[str]:
    """The names in a folder of the cache, bounded ([] when it cannot be listed)."""
    try:
        return list(list_folder(folder).names)
    except OSError:
        return []


def incomplete_blobs(entry: CacheEntry) -> list[str]:
    """Blobs of an interrupted (or running) download."""
    names = _names(os.path.join(entry.repo_folder, "blobs"))
    return sorted(n for n in names if n.endswith(".incomplete"))


TRUE_WORDS = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub takes as set


def offline(environ=os.environ) -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) set: hf:// is answered from the cache."""
    value = environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in TRUE_WORDS


def hub_cache(environ=os.environ) -> str:
    """Where huggingface_hub keeps its cache, by the variables it reads, in its order."""
    home = environ.get("HF_HOME") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface")
    cache = environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE") or \
        os.path.join(home, "hub")
    return os.path.expanduser(os.path.expandvars(cache))


def offline_snapshot(url: str, environ=os.environ) -> str:
    """`hf://org/name[@revision][/subfolder]` (or `hf://datasets/org/name...`) as its folder
    in the local cache; PathNotFound, naming what is missing, when the cache lacks it."""
    from ckpt_browser.errors import PathNotFound

    rest = url[len("hf://"):].strip("/")
    kind = "models"
    for plural in ("datasets", "spaces"):
        if rest.startswith(plural + "/"):
            kind, rest = plural, rest[len(plural) + 1:]
    parts = rest.split("/")
    if len(parts) < 2:
        raise PathNotFound(url, "an hf:// path names a repo as org/name")
    org, name_rev, sub = parts[0], parts[1], parts[2:]
    name, _, revision = name_rev.partition("@")
    revision = revision or "main"
    repo = os.path.join(hub_cache(environ), f"{kind}--{org}--{name}")
    offline_words = "HF_HUB_OFFLINE is set, so the Hub is not asked"
    if not os.path.isdir(repo):
        raise PathNotFound(url, f"{org}/{name} is not in the Hugging Face cache "
                           f"({hub_cache(environ)}); {offline_words}")
    try:
        commit = _ref(repo, revision) or revision
    except OSError as e:
        raise PathNotFound(url, f"refs/{revision} of {org}/{name} in the Hugging Face cache "
                           f"{why_unreadable(e)}; {offline_words}") from None
    snapshot = os.path.join(repo, "snapshots", commit)
    if not os.path.isdir(snapshot):
        raise PathNotFound(url, f"revision {revision!r} of {org}/{name} is not in the Hugging "
                           f"Face cache; {offline_words}")
    path = os.path.join(snapshot, *sub)
    if not os.path.lexists(path):
        raise PathNotFound(url, f"{'/'.join(sub)} is not in the cached {org}/{name} "
                           f"@ {revision}; {offline_words}")
    return path


def _ref(repo: str, revision: str) -> str | None:
    """The commit a branch names; None when there is no such ref (a commit hash was given).
    OSError when the ref is there but is no regular file of a few bytes."""
    ref = os.path.join(repo, "refs", *revision.split("/"))
    try:
        return read_small(ref, MAX_REF_BYTES).strip().decode("ascii", "replace") or None
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None

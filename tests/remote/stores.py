"""The object stores the remote suite (`test_remote_stores.py`) runs over, behind one interface.

A store is a server on loopback holding every file of `sample_checkpoints/` under its relative
path, and the environment a user of that store would have (endpoint, credentials) set for the
current test by its fixture. `conftest.STORES` maps each scheme to the fixture that makes its
store; the `store` fixture runs a test once per entry.

Only S3 (moto, `S3Store`) exists here; gs:// and hf:// stores plug in with one STORES entry
each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from .conftest import Moto

# Names that end a URL naming one file, not a folder (so url() adds no "/").
FILE_SUFFIXES = (".ckpt", ".pt")


class Store(Protocol):
    """One object store serving `sample_checkpoints/` for the current test."""

    scheme: str
    """The URL scheme the store serves: "s3", "gs" or "hf"."""

    secret: str
    """A credential the fixture put in the environment. It must never appear in the CLI's
    output, its errors or the cache."""

    backend_module: str
    """The package that serves the scheme for fsspec ("s3fs", "gcsfs", "huggingface_hub"): made
    unimportable, a URL of this store must ask for the `remote` extra."""

    def url(self, rel: str, folder: bool = True) -> str:
        """`sample_checkpoints/<rel>` on this store as a URL. With `folder`, the URL ends in "/"
        unless `rel` names a file (ends with .ckpt or .pt)."""
        ...

    def object_reads(self) -> list[str]:
        """The paths (relative to sample_checkpoints, unquoted) of the objects whose bodies were
        read since the last reset, in the order they were read, repeats included. Listings,
        metadata and HEAD requests do not count."""
        ...

    def reset_requests(self) -> None:
        """Forget the requests seen so far: object_reads() is empty afterwards."""
        ...

    def put(self, rel: str, data: bytes) -> None:
        """Write `data` as the object at `rel` (relative to sample_checkpoints), creating it or
        overwriting it; either way it gets a new version (ETag, generation or commit)."""
        ...

    def denied(self) -> contextlib.AbstractContextManager[str]:
        """A context inside which the server refuses the credentials in the environment (which
        may be changed for its duration). It yields the credential being refused, which must not
        be printed either; on exit the store accepts the fixture's credentials again."""
        ...

    def missing_container_url(self) -> str:
        """A folder URL whose container (bucket or repo) does not exist."""
        ...

    def newest_time(self, rel: str) -> float:
        """When the store last wrote anything under `rel` (a folder or a file), as a POSIX
        time, asked of the store's own API: the time a run folder's timeline must show."""
        ...


class S3Store:
    """moto's S3 (the `Moto` of conftest) with bucket `bucket` = sample_checkpoints/; the AWS
    variables are set by the `s3_server` fixture."""

    scheme = "s3"
    backend_module = "s3fs"

    def __init__(self, moto: Moto, bucket: str, secret: str):
        self.moto = moto
        self.bucket = bucket
        self.secret = secret

    def url(self, rel: str, folder: bool = True) -> str:
        tail = "/" if folder and not rel.endswith(FILE_SUFFIXES) else ""
        return f"s3://{self.bucket}/{rel}{tail}"

    def object_reads(self) -> list[str]:
        return self.moto.object_reads()

    def reset_requests(self) -> None:
        self.moto.reset_requests()

    def put(self, rel: str, data: bytes) -> None:
        self.moto.client().put_object(Bucket=self.bucket, Key=rel, Body=data)

    @contextlib.contextmanager
    def denied(self) -> Iterator[str]:
        """The environment holds the key of an IAM user without any policy, and moto checks
        credentials and policies: every request is denied."""
        iam = self.moto.client("iam")
        user = "ckpt-browser-denied"
        try:
            iam.create_user(UserName=user)
        except iam.exceptions.EntityAlreadyExistsException:
            pass
        key = iam.create_access_key(UserName=user)["AccessKey"]
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
            mp.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
            self.moto.enforce_auth(True)
            try:
                yield key["SecretAccessKey"]
            finally:
                self.moto.enforce_auth(False)

    def missing_container_url(self) -> str:
        return "s3://no-such-bucket-ckpt/run/checkpoint-1/"

    def newest_time(self, rel: str) -> float:
        pages = self.moto.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=rel)
        return max(o["LastModified"].timestamp() for page in pages for o in page["Contents"])

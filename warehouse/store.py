"""One object-store interface with two backends: a local folder (default) and S3.

Conditional puts are part of the interface: ``if_none_match=True`` creates only when the key is
absent, ``if_match=etag`` replaces only the version the caller read. Checkpoints and page pointers
use them, which is what fences a second writer.

One module on purpose, past the usual size: the interface and its two backends sit side by side
because their conditional puts, listings, ETags and leftover temporaries must behave the same
line for line (tests/warehouse/test_store.py runs every case on both), and opening either from
the settings is a few lines beside them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit
from urllib.request import url2pathname

import boto3
import pyarrow.fs as pafs
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from warehouse.errors import ObjectNotFoundError, PreconditionFailedError, WarehouseError
from warehouse.settings import WarehouseSettings


@dataclass(frozen=True, slots=True)
class StoredObject:
    key: str
    data: bytes
    etag: str


@runtime_checkable
class ObjectStore(Protocol):
    """What every backend offers. Keys are ``/``-separated and relative to the store root."""

    @property
    def uri(self) -> str:
        """The root, as ``file:///abs/path`` or ``s3://bucket/prefix``."""
        ...

    def get(self, key: str) -> StoredObject:
        """Read an object. Raises ObjectNotFoundError."""
        ...

    def head(self, key: str) -> str | None:
        """The object's ETag, or None when absent."""
        ...

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str = "application/octet-stream",
    ) -> str:
        """Write an object and return its new ETag. Raises PreconditionFailedError."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted."""
        ...

    def delete(self, key: str) -> None:
        """Remove an object; absent keys are not an error."""
        ...


_LOCK_STRIPES = 256
"""Lock files under ``<root>/.locks/``; keys hash onto a fixed set so locks never pile up."""

_LOCAL_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")
"""The temp file a LocalStore put writes before moving it into place: ``.<name>.<uuid4 hex>.tmp``."""

TEMPORARY_MAX_AGE_SECONDS = 3600.0
"""A temporary older than this belongs to no put in flight (a put takes well under a minute, the
largest, a writer state, a few seconds): maintenance and ``newsroom doctor --repair`` delete it."""


@dataclass(frozen=True, slots=True)
class Temporary:
    """What a put killed mid-write left behind: a LocalStore temp file (``name`` is its path under the
    root) or an S3 multipart upload never completed (``name`` is its key; ``upload_id`` its id)."""

    name: str
    age_seconds: float
    upload_id: str | None = None

_READ_CHUNK = 1 << 20


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key, else raise ValueError.

    The same rules hold on every backend so that a key valid on one is valid on all: keys are
    non-empty, ``/``-separated, relative (no leading ``/``), with no empty segments and no segment
    starting with ``.`` (which rules out ``.`` and ``..`` and keeps dot-names free for the local
    backend's temp and lock files).

    Args:
        key: The object key to check.

    Returns:
        The key, unchanged.

    Raises:
        ValueError: The key is empty, absolute, or has an empty, dot-led or NUL/backslash segment.
    """
    if not key:
        raise ValueError("empty object key")
    if key.startswith("/"):
        raise ValueError(f"object key must be relative, got {key!r}")
    if "\\" in key or "\x00" in key:
        raise ValueError(f"object key holds a backslash or NUL: {key!r}")
    for part in key.split("/"):
        if not part or part.startswith("."):
            raise ValueError(f"unsafe segment in object key: {key!r}")
    return key


def _check_prefix(prefix: str) -> str:
    """Validate a list prefix: empty, or a key that may end in ``/``."""
    if prefix:
        check_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


def _check_conditions(if_none_match: bool, if_match: str | None) -> None:
    if if_none_match and if_match is not None:
        raise ValueError("if_none_match and if_match are mutually exclusive")
    if if_match is not None and not _normalize_etag(if_match):
        raise ValueError("if_match needs a non-empty etag")


def _normalize_etag(etag: str) -> str:
    """ETags travel unquoted in newsroom; S3 sends them quoted (RFC 9110 section 8.8.3)."""
    etag = etag.strip()
    if etag.startswith("W/"):
        etag = etag[2:]
    return etag.strip('"')


class LocalStore:
    """An ObjectStore over a local folder.

    Writes go to a temp file in the target's folder and are moved into place with ``os.replace``,
    so readers see the old bytes or the new ones, never a mix. The temp file is fsynced before the
    move and the folder after it (and every folder a put creates, in its parent), so an
    acknowledged put survives a power loss. Every mutation of a key holds an
    exclusive ``flock`` on one of a fixed set of lock files under ``<root>/.locks/``; flock locks
    belong to open file descriptions, so they exclude other threads as well as other processes, which
    makes ``if_match`` a real compare-and-swap. ``if_none_match`` additionally uses ``os.link``, which
    fails when the name exists. The ETag is the hex MD5 of the bytes, unquoted, as S3 computes it
    for single-part uploads.
    """

    def __init__(self, root: Path) -> None:
        """Open (and create) a store rooted at ``root``.

        Args:
            root: The folder holding the objects; relative paths resolve against the cwd.
        """
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._locks = self.root / ".locks"
        self._locks.mkdir(exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    @property
    def uri(self) -> str:
        """The root as ``file:///abs/path``."""
        return self.root.as_uri()

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest()) % _LOCK_STRIPES
        fd = os.open(self._locks / f"{stripe:03d}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _etag_of(self, path: Path) -> str | None:
        digest = hashlib.md5(usedforsecurity=False)
        try:
            with path.open("rb") as f:
                while chunk := f.read(_READ_CHUNK):
                    digest.update(chunk)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        return digest.hexdigest()

    def get(self, key: str) -> StoredObject:
        """Read an object.

        Args:
            key: The object key.

        Returns:
            The object's bytes and ETag.

        Raises:
            ObjectNotFoundError: No object has this key.
            ValueError: The key is unsafe.
        """
        path = self._path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as e:
            raise ObjectNotFoundError("no such object", key=key) from e
        return StoredObject(key=key, data=data, etag=hashlib.md5(data, usedforsecurity=False).hexdigest())

    def head(self, key: str) -> str | None:
        """The object's ETag, or None when absent.

        Raises:
            ValueError: The key is unsafe.
        """
        return self._etag_of(self._path(key))

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str = "application/octet-stream",
    ) -> str:
        """Write an object atomically and return its new ETag.

        Args:
            key: The object key; missing parent folders are created.
            data: The bytes to store.
            if_none_match: Write only if no object has this key.
            if_match: Write only if the current object's ETag equals this one.
            content_type: Ignored by the local backend.

        Returns:
            The new ETag (hex MD5 of ``data``).

        Raises:
            PreconditionFailedError: A condition did not hold; the stored bytes are unchanged.
            ValueError: The key is unsafe or both conditions were given.
        """
        _check_conditions(if_none_match, if_match)
        path = self._path(key)
        _make_dirs(path.parent)
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with tmp.open("xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            with self._locked(key):
                if if_none_match:
                    try:
                        os.link(tmp, path)
                    except FileExistsError as e:
                        raise PreconditionFailedError("object already exists", key=key) from e
                    _fsync_dir(path.parent)
                    return etag
                if if_match is not None:
                    current = self._etag_of(path)
                    if current is None:
                        raise PreconditionFailedError("if_match on a missing object", key=key)
                    if current != _normalize_etag(if_match):
                        raise PreconditionFailedError("object changed since it was read", key=key)
                os.replace(tmp, path)
                _fsync_dir(path.parent)
                return etag
        finally:
            tmp.unlink(missing_ok=True)

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted; prefixes match characters, as on S3.

        Raises:
            ValueError: The prefix is unsafe.
        """
        _check_prefix(prefix)
        folder = prefix.rpartition("/")[0]
        start = self.root.joinpath(*folder.split("/")) if folder else self.root
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = Path(dirpath).relative_to(self.root).as_posix()
            base = "" if rel == "." else f"{rel}/"
            keys.extend(
                f"{base}{name}"
                for name in filenames
                if not name.startswith(".") and f"{base}{name}".startswith(prefix)
            )
        return sorted(keys)

    def delete(self, key: str) -> None:
        """Remove an object; absent keys are not an error.

        Raises:
            ValueError: The key is unsafe.
        """
        path = self._path(key)
        with self._locked(key):
            try:
                path.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass

    def temporaries(self, now: float | None = None) -> list[Temporary]:
        """The temp files puts left behind (``.<name>.<32 hex>.tmp``; a put killed before its move).

        No reader lists dot-names, so nothing but :func:`delete_temporary` ever removes them.
        """
        now = time.time() if now is None else now
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if _LOCAL_TEMPORARY.match(name):
                    path = Path(dirpath) / name
                    try:
                        age = now - path.stat().st_mtime
                    except FileNotFoundError:
                        continue  # its put finished (or failed) meanwhile
                    found.append(Temporary(path.relative_to(self.root).as_posix(), max(0.0, age)))
        return sorted(found, key=lambda t: t.name)

    def delete_temporary(self, temporary: Temporary) -> None:
        """Remove one temp file :meth:`temporaries` found; gone already is not an error."""
        path = self.root.joinpath(*temporary.name.split("/"))
        if not _LOCAL_TEMPORARY.match(path.name) or not path.parent.resolve().is_relative_to(self.root):
            raise ValueError(f"not a temporary of this store: {temporary.name!r}")
        path.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    """Make a folder's entries (a rename, link or new child) durable: fsync(2) on the folder itself."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> None:
    """``mkdir -p``, fsyncing the parent of each folder created so the new entry is durable too."""
    if path.is_dir():
        return
    _make_dirs(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        if not path.is_dir():
            raise
        return  # another writer created it (and synced its parent)
    _fsync_dir(path.parent)


_SESSION_LOCK = threading.Lock()


@cache
def _session() -> boto3.session.Session:
    """One boto3 session per process, so each new client reuses its loaded service models."""
    return boto3.session.Session()


def _reset_session_after_fork() -> None:
    global _SESSION_LOCK
    _SESSION_LOCK = threading.Lock()  # another thread may have held it at fork time
    _session.cache_clear()


os.register_at_fork(after_in_child=_reset_session_after_fork)


class S3Store:
    """An ObjectStore over a bucket (and optional prefix) of any S3-compatible server.

    Conditional puts map to ``If-None-Match: *`` and ``If-Match: "<etag>"`` on PutObject, which
    AWS S3, SeaweedFS and moto all honour; the server answers 412 when a condition fails, or 409
    ``ConditionalRequestConflict`` when a concurrent conditional write to the key is in progress.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str = "us-east-1",
    ) -> None:
        """Open a store on ``s3://bucket/prefix``.

        Args:
            bucket: The bucket name; it must exist.
            prefix: Key prefix that acts as the store root (with or without slashes around it).
            endpoint_url: The server, e.g. ``http://127.0.0.1:8333``; None means AWS.
            access_key: Access key id; None uses the standard AWS credential chain.
            secret_key: Secret access key; None uses the standard AWS credential chain.
            region: Region used to sign requests.
        """
        if not bucket:
            raise ValueError("S3Store needs a bucket")
        prefix = prefix.strip("/")
        if prefix:
            check_key(prefix)
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.endpoint_url = endpoint_url
        self.region = region
        self._access_key = access_key
        self._secret_key = secret_key
        config = Config(
            max_pool_connections=32,
            retries={"mode": "standard"},
            # A custom endpoint rarely resolves virtual-host bucket names (bucket.127.0.0.1).
            s3={"addressing_style": "path"} if endpoint_url else None,
        )
        with _SESSION_LOCK:  # boto3 sessions are not thread-safe; clients are
            self._client = _session().client(
                "s3",
                endpoint_url=endpoint_url,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
                region_name=region,
                config=config,
            )

    def __repr__(self) -> str:
        return f"S3Store({self.uri!r}, endpoint_url={self.endpoint_url!r})"

    def __reduce__(self) -> tuple[type[S3Store], tuple[str, str, str | None, str | None, str | None, str]]:
        """Pickle as constructor arguments (boto3 clients do not pickle), e.g. for process pools."""
        return (
            S3Store,
            (self.bucket, self.prefix, self.endpoint_url, self._access_key, self._secret_key, self.region),
        )

    @property
    def uri(self) -> str:
        """The root as ``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{self.prefix.rstrip('/')}".rstrip("/")

    def _full(self, key: str) -> str:
        return f"{self.prefix}{check_key(key)}"

    def get(self, key: str) -> StoredObject:
        """Read an object.

        Raises:
            ObjectNotFoundError: No object has this key.
            WarehouseError: The server failed or could not be reached.
            ValueError: The key is unsafe.
        """
        full = self._full(key)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=full)
            data = response["Body"].read()
        except ClientError as e:
            if _is_not_found(e):
                raise ObjectNotFoundError("no such object", key=key) from e
            raise WarehouseError(f"S3 GetObject failed: {_describe(e)}", key=key) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 GetObject failed: {e}", key=key) from e
        return StoredObject(key=key, data=data, etag=_normalize_etag(response["ETag"]))

    def head(self, key: str) -> str | None:
        """The object's ETag, or None when absent.

        Raises:
            WarehouseError: The server failed or could not be reached.
            ValueError: The key is unsafe.
        """
        full = self._full(key)
        try:
            response = self._client.head_object(Bucket=self.bucket, Key=full)
        except ClientError as e:
            if _is_not_found(e):
                return None
            raise WarehouseError(f"S3 HeadObject failed: {_describe(e)}", key=key) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 HeadObject failed: {e}", key=key) from e
        return _normalize_etag(response["ETag"])

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str = "application/octet-stream",
    ) -> str:
        """Write an object and return its new ETag.

        Args:
            key: The object key.
            data: The bytes to store.
            if_none_match: Write only if no object has this key.
            if_match: Write only if the current object's ETag equals this one.
            content_type: Sent as the object's Content-Type.

        Returns:
            The new ETag, unquoted.

        Raises:
            PreconditionFailedError: A condition did not hold (412), a concurrent conditional
                write won (409), or ``if_match`` named a missing object (404 on some servers).
            WarehouseError: The server failed or could not be reached.
            ValueError: The key is unsafe or both conditions were given.
        """
        _check_conditions(if_none_match, if_match)
        kwargs: dict[str, str] = {}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = f'"{_normalize_etag(if_match)}"'
        full = self._full(key)
        try:
            response = self._client.put_object(
                Bucket=self.bucket, Key=full, Body=data, ContentType=content_type, **kwargs
            )
        except ClientError as e:
            status = _status(e)
            code = _code(e)
            conditional = if_none_match or if_match is not None
            if conditional and (
                status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")
            ):
                raise PreconditionFailedError(f"conditional put lost: {_describe(e)}", key=key) from e
            if if_match is not None and _is_not_found(e):
                raise PreconditionFailedError("if_match on a missing object", key=key) from e
            raise WarehouseError(f"S3 PutObject failed: {_describe(e)}", key=key) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 PutObject failed: {e}", key=key) from e
        return _normalize_etag(response["ETag"])

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted.

        Raises:
            WarehouseError: The server failed or could not be reached.
            ValueError: The prefix is unsafe.
        """
        _check_prefix(prefix)
        keys: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{prefix}"):
                keys.extend(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
        except ClientError as e:
            raise WarehouseError(f"S3 ListObjectsV2 failed: {_describe(e)}", key=prefix) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 ListObjectsV2 failed: {e}", key=prefix) from e
        # Folder markers ("a/") that other tools create are not objects in our sense.
        return sorted(k for k in keys if k and not k.endswith("/"))

    def delete(self, key: str) -> None:
        """Remove an object; absent keys are not an error.

        Raises:
            WarehouseError: The server failed or could not be reached.
            ValueError: The key is unsafe.
        """
        full = self._full(key)
        try:
            self._client.delete_object(Bucket=self.bucket, Key=full)
        except ClientError as e:
            if _is_not_found(e):
                return
            raise WarehouseError(f"S3 DeleteObject failed: {_describe(e)}", key=key) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 DeleteObject failed: {e}", key=key) from e

    def temporaries(self, now: float | None = None) -> list[Temporary]:
        """Multipart uploads under the prefix that were started and never completed or aborted.

        Our puts are single PutObjects, which S3 makes visible whole or not at all; an upload in
        parts (a tool, a pyarrow or polars writer pointed at the store) killed mid-way leaves its
        parts stored, and billed, until someone aborts it (AWS: ``AbortIncompleteMultipartUpload``
        lifecycle rules do the same where they are set).

        Raises:
            WarehouseError: The server failed or could not be reached.
        """
        now = time.time() if now is None else now
        found = []
        paginator = self._client.get_paginator("list_multipart_uploads")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                for upload in page.get("Uploads", []):
                    started = upload.get("Initiated")
                    age = now - started.timestamp() if started is not None else 0.0
                    found.append(Temporary(upload["Key"][len(self.prefix):], max(0.0, age), upload["UploadId"]))
        except ClientError as e:
            raise WarehouseError(f"S3 ListMultipartUploads failed: {_describe(e)}", key=self.prefix) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 ListMultipartUploads failed: {e}", key=self.prefix) from e
        return sorted(found, key=lambda t: (t.name, t.upload_id or ""))

    def delete_temporary(self, temporary: Temporary) -> None:
        """Abort one unfinished multipart upload (its parts are deleted); gone already is not an error.

        Raises:
            WarehouseError: The server failed or could not be reached.
        """
        if temporary.upload_id is None:
            raise ValueError(f"not an S3 upload: {temporary.name!r}")
        try:
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=self._full(temporary.name),
                                                UploadId=temporary.upload_id)
        except ClientError as e:
            if _is_not_found(e) or _code(e) == "NoSuchUpload":
                return
            raise WarehouseError(f"S3 AbortMultipartUpload failed: {_describe(e)}", key=temporary.name) from e
        except BotoCoreError as e:
            raise WarehouseError(f"S3 AbortMultipartUpload failed: {e}", key=temporary.name) from e


def _status(error: ClientError) -> int | None:
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _is_not_found(error: ClientError) -> bool:
    return _status(error) == 404 or _code(error) in ("NoSuchKey", "404", "NotFound")


def _describe(error: ClientError) -> str:
    return f"{_status(error)} {_code(error)}".strip()


def open_store(settings: WarehouseSettings) -> ObjectStore:
    """Open the store that ``settings.root`` names.

    Args:
        settings: A root of ``s3://bucket/prefix`` opens an S3Store with the S3 settings; a
            ``file://`` URI or a plain path (relative to the cwd) opens a LocalStore.

    Returns:
        The store.

    Raises:
        ValueError: The root has another scheme or an S3 root lacks a bucket.
    """
    root = settings.root
    parsed = urlsplit(root)
    if parsed.scheme == "s3":
        access = settings.s3_access_key_id
        secret = settings.s3_secret_access_key
        return S3Store(
            bucket=parsed.netloc,
            prefix=parsed.path,
            endpoint_url=settings.s3_endpoint_url,
            access_key=access.get_secret_value() if access is not None else None,
            secret_key=secret.get_secret_value() if secret is not None else None,
            region=settings.s3_region,
        )
    return LocalStore(_local_root(root))


def _local_root(root: str) -> Path:
    """The folder a local root names (a path, relative to the cwd, or a ``file://`` URI)."""
    parsed = urlsplit(root)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise ValueError(f"unsupported store root {root!r}: use a folder path or s3://bucket/prefix")
    return Path(root)


def store_settings_problem(settings: WarehouseSettings) -> str | None:
    """Why the store the settings name cannot be opened, as ``VARIABLE: why``; None when it can.

    Checked when a command starts (issue 32), without creating, writing or fetching anything:

    * a local root that is a file, or lies under one, or would have to be created in a folder
      this process cannot write;
    * an ``s3://`` root without credentials: neither both ``NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID``
      and ``NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY`` nor any source of the AWS credential chain
      (``AWS_*`` variables, the shared credentials and config files, SSO, a container or instance
      role). Whether the bucket exists and the keys are accepted is only known at the first request.
    """
    if urlsplit(settings.root).scheme == "s3":
        if settings.s3_access_key_id is not None and settings.s3_secret_access_key is not None:
            return None
        with _SESSION_LOCK:
            found = _session().get_credentials()
        if found is None:
            return ("NEWSROOM_WAREHOUSE_ROOT: an s3:// root needs credentials: set NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID "
                    "and NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY, or an AWS credential source (AWS_ACCESS_KEY_ID, "
                    "AWS_PROFILE, ~/.aws/credentials, an instance role); none was found")
        return None
    try:
        root = _local_root(settings.root).expanduser().absolute()
    except (ValueError, RuntimeError) as e:
        return f"NEWSROOM_WAREHOUSE_ROOT: {e}"
    existing = next((p for p in (root, *root.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        where = "is a file" if existing == root else f"lies under {existing}, which is a file"
        return f"NEWSROOM_WAREHOUSE_ROOT: {root} {where}, not a folder"
    if existing != root and not os.access(existing, os.W_OK | os.X_OK):
        return f"NEWSROOM_WAREHOUSE_ROOT: {root} cannot be created: {existing} is not writable"
    return None


def check_store_settings(settings: WarehouseSettings) -> None:
    """Raise ValueError with ``invalid setting VARIABLE: why`` when :func:`store_settings_problem` finds one."""
    problem = store_settings_problem(settings)
    if problem is not None:
        raise ValueError(f"invalid setting {problem}")


def list_temporaries(store: ObjectStore) -> list[Temporary]:
    """What killed puts left behind in ``store`` (temp files, unfinished uploads), with their ages;
    none for a store of another kind."""
    if isinstance(store, LocalStore | S3Store):
        return store.temporaries()
    return []


def delete_temporary(store: ObjectStore, temporary: Temporary) -> None:
    """Remove one thing :func:`list_temporaries` found."""
    if isinstance(store, LocalStore | S3Store):
        store.delete_temporary(temporary)


def arrow_filesystem(store: ObjectStore) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path of the store root on it.

    Join a key onto the base path with ``/`` to read it with pyarrow (and through pyarrow
    datasets, DuckDB or polars), e.g. ``pq.read_table(f"{base}/{key}", filesystem=fs)``.

    Args:
        store: A LocalStore or an S3Store.

    Returns:
        ``(filesystem, base_path)``; ``base_path`` has no trailing slash.

    Raises:
        TypeError: The store is neither a LocalStore nor an S3Store.
    """
    if isinstance(store, LocalStore):
        return pafs.LocalFileSystem(), store.root.as_posix()
    if isinstance(store, S3Store):
        options: dict[str, str] = {}
        if store.endpoint_url:
            endpoint = urlsplit(store.endpoint_url)
            options["endpoint_override"] = endpoint.netloc
            options["scheme"] = endpoint.scheme or "https"
        fs = pafs.S3FileSystem(
            access_key=store._access_key,
            secret_key=store._secret_key,
            region=store.region,
            allow_bucket_creation=False,
            allow_bucket_deletion=False,
            **options,
        )
        return fs, f"{store.bucket}/{store.prefix}".rstrip("/")
    raise TypeError(f"no pyarrow filesystem for {type(store).__name__}")

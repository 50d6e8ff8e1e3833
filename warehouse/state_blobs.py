"""A language writer's state blob: JSON, compressed, in the object store.

Written as Zstandard (level 1) of compact JSON with sorted keys, so the same state is the same
bytes; each blob's key carries a hash of them (``layout.story_state_key``), and fencing is the
change segment and the checkpoint's conditional put (``tasks.cluster.commit_writer``). Read by its magic number: Zstandard, or gzip as every state was written before (those
still load). Any ``zstd -d`` reads the blobs; the frame header carries the decompressed size.

Why not gzip: at 50,000 active stories a state is about 380 MB of JSON, which gzip level 9 took
23 s to compress and ``json.dumps`` 11–12 s to write, every minute. Zstandard level 1 takes
0.6 s (and 0.3 s to decompress, against 2.9 s) for a smaller blob, and orjson writes the JSON in
1.3 s (``bench/writer_checkpoint.py``).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from warehouse.errors import StateBlobError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_LEVEL = 1
MAX_STATE_BYTES = 16 << 30
"""Largest decompressed state read (16 GiB): a corrupt or hostile header never sizes a buffer past it."""


def _default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode_state(state: dict[str, Any]) -> bytes:
    """``state`` as compact, key-sorted JSON in one Zstandard frame (deterministic bytes).

    A writer state has no NaN or infinity (orjson would write them as null, and the load would
    then fail on that value rather than silently read it).

    >>> decode_state(encode_state({"b": [1.5, None], "a": "x"}))
    {'a': 'x', 'b': [1.5, None]}
    """
    raw = orjson.dumps(state, default=_default, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return pa.Codec("zstd", compression_level=ZSTD_LEVEL).compress(raw, asbytes=True)


def zstd_content_size(data: bytes) -> int:
    """The decompressed size a Zstandard frame header declares (RFC 8878, section 3.1.1.1).

    Raises:
        StateBlobError: If ``data`` is not a Zstandard frame or its header has no content size.
    """
    if len(data) < 6 or data[:4] != ZSTD_MAGIC:
        raise StateBlobError("not a Zstandard frame")
    descriptor = data[4]
    size_flag = descriptor >> 6
    single_segment = bool(descriptor & 0x20)
    dictionary_bytes = (0, 1, 2, 4)[descriptor & 0x03]
    size_bytes = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if size_bytes == 0:
        raise StateBlobError("Zstandard frame does not declare its content size")
    start = 5 + (0 if single_segment else 1) + dictionary_bytes
    field = data[start : start + size_bytes]
    if len(field) != size_bytes:
        raise StateBlobError("truncated Zstandard frame header")
    size = int.from_bytes(field, "little")
    return size + 256 if size_bytes == 2 else size


def decode_state(data: bytes) -> dict[str, Any]:
    """The state a blob holds, whether written as Zstandard (now) or gzip (before).

    Raises:
        StateBlobError: If the blob is neither, or declares more than ``MAX_STATE_BYTES``.
    """
    if data[:4] == ZSTD_MAGIC:
        size = zstd_content_size(data)
        if size > MAX_STATE_BYTES:
            raise StateBlobError(f"state declares {size} bytes, more than {MAX_STATE_BYTES}")
        try:
            raw = pa.Codec("zstd").decompress(data, decompressed_size=size, asbytes=True)
        except (OSError, pa.ArrowException) as e:
            raise StateBlobError(f"corrupt Zstandard state: {e}") from e
    elif data[:2] == GZIP_MAGIC:
        try:
            # json, not orjson: the writer that made these used json.dumps, which could write NaN.
            state = json.loads(gzip.decompress(data))
        except (OSError, EOFError, ValueError) as e:
            raise StateBlobError(f"corrupt gzip state: {e}") from e
        if not isinstance(state, dict):
            raise StateBlobError("state blob does not hold a JSON object")
        return state
    else:
        raise StateBlobError("state blob is neither Zstandard nor gzip")
    try:
        state = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise StateBlobError(f"corrupt state JSON: {e}") from e
    if not isinstance(state, dict):
        raise StateBlobError("state blob does not hold a JSON object")
    return state


def verify_state(data: bytes) -> None:
    """Check that a blob decompresses whole into what looks like a JSON object, without parsing it.

    Decompression reads every frame and fails on a truncated or garbled one; parsing a large state
    takes most of a load (bench/writer_checkpoint.py), so ``newsroom health`` checks this far only.
    The decompressed bytes are streamed in chunks, never held whole (a 50,000-story state is about
    380 MB of JSON).

    Raises:
        StateBlobError: If it does not.
    """
    if data[:4] == ZSTD_MAGIC:
        size = zstd_content_size(data)
        if size > MAX_STATE_BYTES:
            raise StateBlobError(f"state declares {size} bytes, more than {MAX_STATE_BYTES}")
        compression = "zstd"
    elif data[:2] == GZIP_MAGIC:
        size, compression = None, "gzip"
    else:
        raise StateBlobError("state blob is neither Zstandard nor gzip")
    first = last = b""
    total = 0
    try:
        with pa.input_stream(pa.py_buffer(data), compression=compression) as stream:
            while chunk := stream.read(_VERIFY_CHUNK):
                total += len(chunk)
                first = first or chunk.lstrip()[:1]
                last = chunk.rstrip()[-1:] or last
    except (OSError, pa.ArrowException, EOFError) as e:
        raise StateBlobError(f"corrupt {compression} state: {e}") from e
    if size is not None and total != size:
        raise StateBlobError(f"state holds {total} bytes, its frame declares {size}")
    if first != b"{" or last != b"}":
        raise StateBlobError("state blob does not hold a JSON object")


_VERIFY_CHUNK = 8 << 20

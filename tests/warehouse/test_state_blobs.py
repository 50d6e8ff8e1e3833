"""The writer's state blob format: Zstandard JSON now, gzip JSON as before, nothing else."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from transforms.clustering import LanguageClusterer
from transforms.features import features_from_text
from warehouse.state_blobs import (
    MAX_STATE_BYTES,
    ZSTD_MAGIC,
    StateBlobError,
    decode_state,
    encode_state,
    zstd_content_size,
)

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
TEXTS = [
    "Storm Ciara closes schools across Wales as rivers burst their banks and roads flood overnight.",
    "Schools across Wales shut as Storm Ciara floods roads and rivers burst their banks.",
    "The central bank raised its main interest rate by a quarter point to curb inflation.",
]


def _clusterer_state() -> dict[str, object]:
    clusterer = LanguageClusterer("en")
    for i, text in enumerate(TEXTS):
        clusterer.assign(features_from_text(f"a{i}", text[:40], text, "en", T0, f"pub{i}"))
    return {"clusterer": clusterer.to_state(), "seen": {"a0": "h0"}, "consumed": ["k"], "updated_at": T0.isoformat()}


def test_a_clusterer_state_round_trips_exactly_and_resumes_identically() -> None:
    state = _clusterer_state()
    blob = encode_state(state)
    assert blob[:4] == ZSTD_MAGIC
    back = decode_state(blob)
    assert back == json.loads(json.dumps(state))  # every float bit for bit, as the JSON writer had it
    resumed = LanguageClusterer.from_state(back["clusterer"])  # type: ignore[arg-type]
    assert resumed.to_state() == state["clusterer"]


def test_same_state_same_bytes_whatever_the_key_order() -> None:
    # Fencing compares the blobs two writers wrote: equal decisions must mean equal bytes.
    a = {"b": 1, "a": {"y": [1.25, None], "x": "z"}}
    b = {"a": {"x": "z", "y": [1.25, None]}, "b": 1}
    assert encode_state(a) == encode_state(b)
    assert encode_state(a) != encode_state({**a, "b": 2})


def test_numpy_scalars_and_arrays_are_written_as_plain_numbers() -> None:
    state = {"w": np.float32(0.5), "n": np.int64(3), "v": np.arange(3, dtype=np.uint32)}
    assert decode_state(encode_state(state)) == {"n": 3, "v": [0, 1, 2], "w": 0.5}


def test_gzip_states_written_before_still_load() -> None:
    state = _clusterer_state()
    legacy = gzip.compress(json.dumps(state, sort_keys=True).encode(), mtime=0)
    assert decode_state(legacy) == json.loads(json.dumps(state))


def test_the_frame_header_gives_the_size() -> None:
    payload = {"k": "x" * 100_000}
    blob = encode_state(payload)
    assert zstd_content_size(blob) == len(json.dumps(payload, separators=(",", ":")).encode())


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "neither"),
        (b'{"clusterer": {}}', "neither"),
        (ZSTD_MAGIC + b"\x00\x00", "content size"),  # no size in the header
        (ZSTD_MAGIC + b"\xe0" + (MAX_STATE_BYTES + 1).to_bytes(8, "little"), "more than"),
        (ZSTD_MAGIC + b"\xe0" + (1000).to_bytes(8, "little") + b"garbage", "corrupt"),
        (ZSTD_MAGIC + b"\xe0\x01\x02", "truncated"),
    ],
)
def test_bad_blobs_fail_clearly(blob: bytes, message: str) -> None:
    with pytest.raises(StateBlobError, match=message):
        decode_state(blob)


def test_a_json_array_is_not_a_state() -> None:
    with pytest.raises(StateBlobError, match="JSON object"):
        decode_state(encode_state([1, 2]))  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command-line tool is not installed")
def test_any_zstd_tool_reads_a_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json.zst"
    path.write_bytes(encode_state({"a": 1}))
    out = subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True).stdout
    assert json.loads(out) == {"a": 1}

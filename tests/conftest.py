"""Shared fixtures: real photos from the shared sample set, preprocessed per edition."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

from ._zoo_server import FileServer, start

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DIR = Path(os.environ.get("SHIFTBENCH_SAMPLE_DIR", REPO.parent / "shared" / "data" / "imagenet-sample-100"))


def sample_paths() -> list[Path]:
    paths = sorted(SAMPLE_DIR.glob("*.JPEG"))
    if not paths:
        raise RuntimeError(
            f"real test photos not found in {SAMPLE_DIR}; set SHIFTBENCH_SAMPLE_DIR to a folder of ImageNet JPEGs"
        )
    return paths


@cache
def photos(edition: str, n: int = 2, start: int = 0) -> np.ndarray:
    """n real photos preprocessed for an edition, N x S x S x 3 uint8."""
    from shiftbench.editions import preprocess
    from shiftbench.sources import load_image_rgb

    paths = sample_paths()[start : start + n]
    return np.stack([np.asarray(preprocess(load_image_rgb(p), edition)) for p in paths])


@pytest.fixture(scope="session")
def photo_224() -> np.ndarray:
    return photos("224", 1)[0]


def unwritable_folder(tmp: Path) -> Path:
    """A folder this process cannot create files in: a read-only one under ``tmp``, or sysfs for root
    (root ignores permission bits); skips where there is none."""
    if os.geteuid() != 0:
        ro = tmp / "ro"
        ro.mkdir(exist_ok=True)
        ro.chmod(0o555)
        return ro
    if Path("/sys/kernel").is_dir():
        return Path("/sys")
    pytest.skip("running as root without sysfs: no folder is read-only to this process")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture()
def server() -> Iterator[FileServer]:
    """A file server on 127.0.0.1 for the zoo's download tests (tests/_zoo_server.py); stopped after the test."""
    state = FileServer()
    httpd, thread = start(state)
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

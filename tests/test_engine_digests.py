"""The engine's pixels, pinned: every corruption of the ``imagenet_c`` and ``noc`` namespaces at every
edition and severity gives the 8-bit outputs recorded in ``tests/fixtures/engine_digests.json``
(uint8 and float inputs, the tensor backend, release mode; see ``tests/fixtures/engine_digests.py``).

The table was recorded before the engine's kernels became registered functions and its severity
tables named records; it holds across such refactorings. 224 and 299 px run as ``slow`` tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import shiftbench

from .fixtures import engine_digests as E

RECORDED: dict[str, str] = json.loads((Path(__file__).parent / "fixtures" / "engine_digests.json").read_text())
EDITIONS = sorted({k.split("/")[1] for k in RECORDED}, key=int)


def test_every_corruption_and_edition_is_recorded() -> None:
    for name in E.names():
        for ed in shiftbench.get_corruption(name).params:
            assert f"{name}/{ed}/uint8/1" in RECORDED, (name, ed)


@pytest.mark.parametrize(
    "edition", [pytest.param(e, marks=() if e in E.SMALL else (pytest.mark.slow,)) for e in EDITIONS]
)
def test_outputs_equal_the_recorded_digests(edition: str) -> None:
    x = E.batch(edition)
    differ = []
    for name in E.names():
        if edition not in shiftbench.get_corruption(name).params:
            continue
        for case, s, kw in E.cases(name, edition):
            key = f"{name}/{edition}/{case}/{s}"
            if E.digest(E.run(x, name, edition, s, kw)) != RECORDED[key]:
                differ.append(key)
    assert not differ, f"outputs changed: {differ}"

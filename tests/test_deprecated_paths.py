"""Import paths kept for a while after a move: each forwards to the new home and says so with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import shiftbench
from shiftbench.rng import seeding


def _forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unload the old module (hasattr would import it through the package's __getattr__)."""
    monkeypatch.delitem(sys.modules, "shiftbench.seeding", raising=False)
    if "seeding" in vars(shiftbench):
        monkeypatch.delattr(shiftbench, "seeding")


def _fresh_import(monkeypatch: pytest.MonkeyPatch) -> object:
    _forget(monkeypatch)
    with pytest.warns(DeprecationWarning, match=r"shiftbench\.rng\.seeding"):
        return importlib.import_module("shiftbench.seeding")


def test_old_seeding_module_forwards_every_name_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    old = _fresh_import(monkeypatch)
    assert old is not seeding and seeding.__all__
    for name in seeding.__all__:
        assert getattr(old, name) is getattr(seeding, name), name
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
    # the same generator, so the same draws, whichever path a script imports
    a = old.derive_generator(3, 12345, "fog", 2).random(4)
    b = seeding.derive_generator(3, 12345, "fog", 2).random(4)
    np.testing.assert_array_equal(a, b)


def test_old_seeding_attribute_and_from_import(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_import(monkeypatch)
    _forget(monkeypatch)
    with pytest.warns(DeprecationWarning):
        mod = shiftbench.seeding  # the attribute of the package, as before the move
    assert mod.LegacyDraws is seeding.LegacyDraws
    from shiftbench.seeding import LegacyDraws  # noqa: PLC0415

    assert LegacyDraws is seeding.LegacyDraws
    assert "seeding" not in shiftbench.__all__  # no longer advertised

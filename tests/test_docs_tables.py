"""The measured tables of the docs are what tools/gen_docs.py writes from perf/results/*.json."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _gen_docs():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "tools" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


gen = _gen_docs()


@pytest.mark.parametrize("path", gen.documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_docs_are_up_to_date(path: Path) -> None:
    text = path.read_text()
    assert gen.render(text) == text, f"{path.relative_to(REPO)} is stale: run python tools/gen_docs.py"


def test_every_generator_is_used() -> None:
    used = {name for p in gen.documents() for name in gen.GENERATORS if f"<!-- gen:{name} start" in p.read_text()}
    assert used == set(gen.GENERATORS)


def test_tables_follow_the_results(tmp_path: Path) -> None:
    # a changed result changes the table: nothing in a table is typed by hand
    results = tmp_path / "results"
    shutil.copytree(gen.RESULTS, results)
    doc = "intro\n<!-- gen:speed-cpu start: x -->\nold table\n<!-- gen:speed-cpu end -->\nafter\n"
    before = gen.render(doc, results)
    data = json.loads((results / "speed--2cpu--cpu.json").read_text())
    data["results"]["shiftbench"]["overall_rate"] = 4321.0
    (results / "speed--2cpu--cpu.json").write_text(json.dumps(data))
    after = gen.render(doc, results)
    assert "old table" not in before and before.startswith("intro\n") and before.endswith("after\n")
    assert "**4,321** /" in after and "**4,321** /" not in before


def test_markers_must_pair_and_be_known() -> None:
    with pytest.raises(ValueError, match="end properly"):
        gen.render("<!-- gen:speed-cpu start -->\nno end\n")
    with pytest.raises(KeyError, match="no-such-table"):
        gen.render("<!-- gen:no-such-table start -->\n<!-- gen:no-such-table end -->\n")
    # a marker quoted inside a line of prose is not a marker
    assert gen.render("see `<!-- gen:NAME start -->` here\n") == "see `<!-- gen:NAME start -->` here\n"


def test_check_mode_reports_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "stale.md"
    doc.write_text("<!-- gen:eval-overhead start -->\nhand-edited 1.0 %\n<!-- gen:eval-overhead end -->\n")
    monkeypatch.setattr(gen, "documents", lambda: [doc])
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "hand-edited" in doc.read_text()  # --check changes nothing
    assert gen.main([]) == 0 and "hand-edited" not in doc.read_text()
    assert gen.main(["--check"]) == 0

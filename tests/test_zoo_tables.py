"""The published tables against the paper texts, the zoo's entries against their sources, and the
published-vs-measured comparison."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from shiftbench.benchmarks import list_benchmarks
from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError, UnknownNameError
from shiftbench.zoo import entries
from shiftbench.zoo.tables import compare, published_for, render, table, tables

PAPERS = Path(__file__).resolve().parents[1].parent / "shared" / "papers"
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _paper_lines(name: str) -> list[str]:
    path = PAPERS / name
    if not path.is_file():
        pytest.skip(f"paper text {path} not present")
    return path.read_text(encoding="utf-8").splitlines()


def _cells(line: str) -> tuple[str, list[float]]:
    """A tab-separated table row: its label and every number after it (ranks '(5)' dropped)."""
    label, *rest = line.split("\t")
    nums = [float(NUMBER.match(c.strip()).group()) for c in rest if c.strip()]  # type: ignore[union-attr]
    return label.strip(), nums


@pytest.mark.parametrize("tid", ["hendrycks2018:1", "hendrycks2018:2", "laugros2020:4", "rusak2022:3"])
def test_rows_equal_the_paper_text(tid: str) -> None:
    t = table(tid)
    lines = _paper_lines(t.paper_file)
    for row in t.rows:
        label, nums = _cells(lines[row.line - 1])
        assert label == row.label, (tid, row.line)
        assert nums == [row.values[k] for k in t.column_keys()], (tid, row.label)
    # and no printed row was left out: every line between the first and last row is a row
    first, last = t.rows[0].line, t.rows[-1].line
    assert last - first + 1 == len(t.rows)


def test_table_laugros2021_1_equals_the_paper_text() -> None:
    """A Markdown table in this paper's text: ``| label | 81 (0) | ...``, the bracketed differences dropped."""
    t = table("laugros2021:1")
    lines = _paper_lines(t.paper_file)
    assert "mean_CE_Set1" in lines[t.rows[0].line - 3] and "Border" in lines[t.rows[0].line - 3]
    for row in t.rows:
        label, *cells = [c.strip() for c in lines[row.line - 1].strip().strip("|").split("|")]
        nums = [float(NUMBER.match(c).group()) for c in cells if c]  # type: ignore[union-attr]
        assert label == row.label and nums == [row.values[k] for k in t.column_keys()], row.label
    assert t.rows[-1].line - t.rows[0].line + 1 == len(t.rows)
    assert t.benchmarks == ("imagenet-c", "border-obstruction")


def test_laugros2021_1_measured_from_imagenet_c_and_border_obstruction_records() -> None:
    """The two set means are the mean CE over the 8 and the 7 corruptions (only when all are there); border and
    obstruction CE come from this benchmark's records only, not from ImageNet-NOC's."""
    from shiftbench.zoo.tables import CE_SET1, CE_SET2, measured_from_records, measured_from_report

    ce = {c: 0.5 + 0.01 * i for i, c in enumerate(CE_SET1 + CE_SET2)}
    rows = [{"model": "zoo:resnet50", "corruptions": {c: {"ce": v} for c, v in ce.items()}, "mce_complete": True}]
    got = measured_from_report({"units": "", "rows": rows}, "laugros2021:1")["zoo:resnet50"]
    assert got == {"imagenet_c_mce_set1": pytest.approx(100 * sum(ce[c] for c in CE_SET1) / 8),
                   "imagenet_c_mce_set2": pytest.approx(100 * sum(ce[c] for c in CE_SET2) / 7)}
    rows[0]["corruptions"].pop("fog")
    assert set(measured_from_report({"units": "", "rows": rows}, "laugros2021:1")["zoo:resnet50"]) == {"imagenet_c_mce_set1"}
    recs = [{"model": "zoo:resnet50", "benchmark": "border-obstruction", "ce": {"border": 0.6, "obstruction": 0.7}},
            {"model": "zoo:resnet18", "benchmark": "imagenet-noc", "ce": {"border": 0.9}, "mce": 0.8}]
    assert measured_from_records("laugros2021:1", "border-obstruction", recs) == {"zoo:resnet50": {"border": 60.0, "obstruction": 70.0}}
    # ImageNet-NOC's tables take ImageNet-NOC's evaluations only
    assert measured_from_records("laugros2020:3", "imagenet-noc", [{**recs[0], "mce": 0.65}]) == {}


def test_transposed_table_003_3_equals_the_paper_text() -> None:
    t = table("laugros2020:3")
    lines = _paper_lines(t.paper_file)
    header = lines[184].split("\t")[1:]  # line 185: Alex Squeeze VGG-11 ...
    _, ic = _cells(lines[185])  # line 186: mCE.IC
    _, noc = _cells(lines[186])  # line 187: mCE.INOC
    assert [r.label for r in t.rows] == [h.strip() for h in header]
    assert [r.values["imagenet_c_relative_mce"] for r in t.rows] == ic
    assert [r.values["imagenet_noc_mce"] for r in t.rows] == noc


def test_cells_cited_from_the_papers() -> None:
    # 004 line 89: "AugMix 70.8 88.6 62.1 99.1 39.0 78.5 85.4 65.3 58.9 22.5"
    augmix = {r.label: r for r in table("rusak2022:3").rows}["AugMix"]
    assert (
        augmix.values["mde"] == 85.4 and augmix.values["imagenet_c_mce"] == 65.3 and augmix.model == "resnet50-augmix"
    )
    # 000 line 209: "ResNet-50 23.9 76.7 80 82 83 75 89 78 80 78 75 66 57 71 85 77 77"
    r50 = {r.label: r for r in table("hendrycks2018:1").rows}["ResNet-50"]
    assert (r50.values["error"], r50.values["mce"], r50.values["jpeg_compression"]) == (23.9, 76.7, 77)
    # 003 line 206: "DeepAugment 65 25 69 93 61 67 46 43 59 (2) 60 (1)"
    da = {r.label: r for r in table("laugros2020:4").rows}["DeepAugment"]
    assert (da.values["noc_border"], da.values["imagenet_noc_mce"], da.values["imagenet_c_mce"]) == (61, 59, 60)


def test_mce_column_is_the_mean_of_the_ce_columns() -> None:
    # 000 Table 1 prints mCE with one decimal and CEs rounded to integers: the mean agrees to rounding
    t = table("hendrycks2018:1")
    ces = t.column_keys()[2:]
    for row in t.rows:
        mean = sum(row.values[k] for k in ces) / len(ces)  # type: ignore[misc]
        assert abs(mean - row.values["mce"]) <= 0.5, row.label  # type: ignore[operator]


NOT_IN_ZOO: set[tuple[str, str]] = set()
"""Rows whose architecture the zoo has no weights for (``shiftbench reproduce`` lists them as not in the zoo)."""


def test_imagenet_p_rows_are_the_numbers_the_paper_text_states() -> None:
    t = table("hendrycks2019:P")
    lines = _paper_lines(t.paper_file)
    text = "\n".join(lines)
    for row in t.rows[1:]:
        # e.g. line 386: "... a ResNeXt-50 does even better with a 52.4% mFR and a 74.2% mT5D."
        m = re.search(re.escape(row.label) + r"\D*?(\d+\.\d)% mFR and (?:a )?(\d+\.\d)%", lines[row.line - 1])
        assert m, (row.label, row.line)
        assert (float(m.group(1)), float(m.group(2))) == (row.values["mfr"], row.values["mt5d"])
        # the clean error: "ResNet-50 (23.9% top-1 error)", "DenseNet-161 (22.9% top-" (lines 358-369)
        errors = {float(e) for e in re.findall(re.escape(row.label) + r" \((\d+\.\d)% (?:top-|error)", text)}
        assert errors == {row.values["error"]}, row.label
    # AlexNet: 100 by definition (FR divides by AlexNet's FP, line 239) and its error in Table 1 (line 284)
    alex = t.rows[0]
    assert alex.values == {"error": 43.5, "mfr": 100.0, "mt5d": 100.0}
    assert "FPAlexNet" in lines[alex.line - 1] and "uT5DAlexNet" in lines[261] and lines[283].startswith("43.5 100.0")
    # every mFR the section states is a row
    stated = re.findall(r"(\d+\.\d)% mFR", " ".join(lines[384:388]))
    assert sorted(map(float, stated)) == sorted(r.values["mfr"] for r in t.rows[1:])


def test_every_row_names_a_zoo_entry_and_every_table_id_resolves() -> None:
    zoo = entries()
    for t in tables().values():
        assert table(t.id) is t
        for r in t.rows:
            if (t.id, r.model) in NOT_IN_ZOO:
                assert r.model not in zoo and any(r.label in n and "zoo has neither" in n for n in t.notes)
                continue
            assert r.model in zoo, (t.id, r.label, r.model)
        assert t.benchmarks and all(b in list_benchmarks() for b in t.benchmarks), t.id
    assert table("imagenet-d:table3") is table("rusak2022:3") and table("RUSAK2022:3") is table("rusak2022:3")
    # the earlier numeric identifiers still resolve (not shown to users)
    assert table("4:3") is table("rusak2022:3") and table("004-3") is table("rusak2022:3") and table("1:p") is table("hendrycks2019:P")
    with pytest.raises(UnknownNameError, match="rusak2022:3"):
        table("004:9")


@pytest.mark.parametrize("name", sorted(entries()))
def test_entry_contract(name: str) -> None:
    e = entries()[name]
    assert e.arch.split(":")[0] in ("torchvision", "timm") or e.arch.startswith("shiftbench.zoo."), e.arch
    assert e.url.startswith("https://") and e.source
    file_name = e.url.rsplit("/", 1)[-1]
    # where the file name carries the publisher's SHA-256 prefix (torch.hub convention), it is the checksum
    m = re.search(r"-([0-9a-f]{8})\.pth(?:\.tar)?$", file_name)
    if m:
        assert e.sha256_prefix == m.group(1)
    else:
        assert e.sha256_prefix is None and e.size_bytes is None  # nothing invented
    p = e.preprocessing
    assert p.size >= 224 and 0.8 <= p.crop_fraction <= 1 and p.interpolation in ("bilinear", "bicubic")
    assert p.mean == (0.485, 0.456, 0.406) and p.scale == 255.0
    if "drive" in e.url or "dropbox" in e.url:
        assert e.page and e.file_name  # a hand-download page and a stable cache name


def test_cache_names_are_distinct() -> None:
    paths = [f"{n}/{e.cache_name}" for n, e in entries().items()]
    assert len(set(paths)) == len(paths)


def test_compare_puts_measured_next_to_published() -> None:
    c = compare("rusak2022:3", {"zoo:resnet50-augmix": {"mde": 86.0, "imagenet_c_mce": 64.8}, "DeepAugment": {"mde": 85.6}})
    rows = {r.label: r for r in c.rows}
    assert rows["AugMix"].difference == {"mde": pytest.approx(0.6), "imagenet_c_mce": pytest.approx(-0.5)}
    assert rows["DeepAugment"].difference == {"mde": 0.0}  # matched by the paper's row label
    assert rows["SIN"].measured == {} and rows["SIN"].difference == {}
    assert c.unmatched == ()
    text = render(c)
    assert "85.4>86.0 (+0.6)" in text and "65.3>64.8 (-0.5)" in text and "Table 3" in text
    doc = json.loads(render(c, "json"))
    assert doc["table"] == "rusak2022:3" and doc["rows"][4]["model"] == "zoo:resnet50-augmix"
    assert doc["rows"][4]["measured"] == {"mde": 86.0, "imagenet_c_mce": 64.8} and "paper_line" not in doc["rows"][4]
    assert doc["reference"] == {"authors": "Rusak, Schneider, Pachitariu, Gehler, Bringmann, Bethge & Brendel",
                                "title": "ImageNet-D: A new challenging robustness dataset inspired by domain adaptation",
                                "venue": "ICML 2022 Shift Happens workshop", "year": 2022}
    rows_csv = list(csv.DictReader(io.StringIO(render(c, "csv"))))
    assert len(rows_csv) == 8 * 10
    cell = next(r for r in rows_csv if r["model"] == "zoo:resnet50-augmix" and r["column"] == "mde")
    assert (float(cell["published"]), float(cell["measured"]), float(cell["difference"])) == (
        85.4,
        86.0,
        pytest.approx(0.6),
    )


def test_compare_refuses_unknown_metrics_and_reports_unmatched_models() -> None:
    with pytest.raises(InvalidArgumentError, match="mde"):
        compare("hendrycks2018:1", {"resnet50": {"mde": 80.0}})
    with pytest.raises(InvalidArgumentError, match="finite"):
        compare("hendrycks2018:1", {"resnet50": {"mce": float("nan")}})
    c = compare("hendrycks2018:1", {"my-net": {"mce": 70.0}})
    assert c.unmatched == ("my-net",)
    assert "my-net" in render(c)


def test_published_for_lists_every_table_of_a_model() -> None:
    found = {(t.id, r.label) for t, r in published_for("zoo:resnet50")}
    assert found == {
        ("hendrycks2018:1", "ResNet-50"),
        ("hendrycks2018:2", "ResNet-50"),
        ("laugros2020:3", "Res-50"),
        ("laugros2020:4", "Standard"),
        ("rusak2022:3", "vanilla ResNet50"),
        ("hendrycks2019:P", "ResNet-50"),
        ("laugros2021:1", "Standard"),
    }


def test_cli_zoo_list_table_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "list", "--results-format", "json"]) == 0
    listed = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(listed) == {f"zoo:{n}" for n in entries()}
    assert (
        "rusak2022:3" in listed["zoo:efficientnet-l2-ns"]["published"]
        and "16.5" in listed["zoo:efficientnet-l2-ns"]["published"]
    )
    measured = tmp_path / "m.json"
    measured.write_text(json.dumps({"resnet50": {"imagenet_c_relative_mce": 104.0, "imagenet_noc_mce": 80.0}}))
    assert main(["zoo", "table", "laugros2020:3", "--measured", str(measured), "--results-format", "csv"]) == 0
    out = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    r50 = [r for r in out if r["model"] == "zoo:resnet50"]
    assert [(r["column"], float(r["difference"])) for r in r50] == [
        ("imagenet_c_relative_mce", -1.0),
        ("imagenet_noc_mce", -1.0),
    ]
    assert main(["zoo", "info", "resnet50-ant3x3"]) == 0
    info = capsys.readouterr().out
    assert "ANT3x3_Model.pth" in info and "none published" in info and "laugros2020:4 row 'ANT ^{3x3}'" in info
    assert "from Laugros, Caplier & Ospici (2020), 'Increasing the Coverage and Balance of Robustness Benchmarks by " \
        "Using Non-Overlapping Corruptions', arXiv:2010.13365 (ICLR 2021 submission), Table 4" in info
    assert not re.search(r"\b00[0-4]\b|line \d+|\.txt", info)  # the paper, not a file of the project's copies
    assert main(["zoo", "table", "004:9"]) == 2
    assert "rusak2022:3" in capsys.readouterr().err


def test_measured_from_stored_records_of_each_benchmark() -> None:
    from shiftbench.zoo.tables import measured_from_records

    noc = [{"model": "zoo:resnet50", "clean_error": 0.24, "ce": {"noc_blur": 0.5, "noc_hue": 0.25}, "mce": None},
           {"model": "zoo:resnet50-augmix", "ce": {"noc_blur": 0.4}, "mce": 0.59}]
    assert measured_from_records("laugros2020:4", "imagenet-noc", noc) == {
        "zoo:resnet50": {"noc_blur": 50.0, "noc_hue": 25.0}, "zoo:resnet50-augmix": {"noc_blur": 40.0, "imagenet_noc_mce": 59.0}}
    d = [{"model": "zoo:resnet50", "benchmark": "imagenet-d", "errors": {"clipart": 0.634, "sketch": 0.5}, "mde": 88.0},
         {"model": "zoo:resnet50-ant", "benchmark": "imagenet-d:wordnet", "errors": {"clipart": 0.1}, "mde": 10.0}]
    assert measured_from_records("rusak2022:3", "imagenet-d", d) == {"zoo:resnet50": {"clipart": 63.4, "sketch": 50.0, "mde": 88.0}}
    p = [{"model": "zoo:resnet50", "mfr": 0.58, "mt5d": 0.783, "test_perturbations": 10},
         {"model": "zoo:alexnet", "mfr": 0.9, "mt5d": 0.9, "test_perturbations": 2}]  # partial: no mFR
    assert measured_from_records("hendrycks2019:P", "imagenet-p", p) == {"zoo:resnet50": {"mfr": 58.0, "mt5d": 78.3}}
    assert measured_from_records("hendrycks2019:P", "icons-50-style", [{"model": "x", "gap": 0.1}]) == {}
    # compare takes them as they are
    r50 = {r.model: r for r in compare("hendrycks2019:P", measured_from_records("hendrycks2019:P", "imagenet-p", p)).rows}["resnet50"]
    assert r50.difference == {"mfr": 0.0, "mt5d": 0.0}


def _header_cells(lines: list[str], first_row_line: int) -> list[str]:
    """The printed column headings above a table's first row: tab-separated header lines merged by position
    (a lower line's cell wins: "Noise" over "Gauss."), the row-label cell dropped, "(rank)" removed."""
    heads: list[list[str]] = []
    i = first_row_line - 2
    while i >= 0 and "\t" in lines[i] and len(heads) < 2:
        heads.insert(0, lines[i].split("\t"))
        i -= 1
    width = max(len(h) for h in heads)
    merged = []
    for pos in range(width):
        cells = [h[pos].strip() for h in heads if pos < len(h) and h[pos].strip()]
        merged.append(cells[-1] if cells else "")
    return [re.sub(r"\s*\(rank\)$", "", c) for c in merged[1:] if c]


@pytest.mark.parametrize("tid", ["hendrycks2018:1", "hendrycks2018:2", "laugros2020:4", "rusak2022:3"])
def test_every_column_is_the_papers_heading_and_metric(tid: str) -> None:
    t = table(tid)
    lines = _paper_lines(t.paper_file)
    assert _header_cells(lines, t.rows[0].line) == [c.printed for c in t.columns]
    from shiftbench.zoo.tables import METRICS

    assert all(c.metric in METRICS for c in t.columns)


PRINTED_METRIC = {"Error": "error", "IN": "error", "IN-R": "error", "mCE": "mce", "Rel. mCE": "relative_mce",
                  "INOC.mCE": "mce", "IC.mCE": "mce", "mDE": "mde", "IN-C": "mce", "mCE.INOC": "mce",
                  "mCE.IC": "relative_mce", "mFR": "mfr", "mT5D": "mt5d", "mean_CE_Set1": "mce", "mean_CE_Set2": "mce"}
"""What each printed summary heading is (per-corruption and per-domain columns: CE, relative CE or error)."""


def test_every_number_carries_its_metric() -> None:
    for t in tables().values():
        for c in t.columns:
            if c.printed in PRINTED_METRIC:
                assert c.metric == PRINTED_METRIC[c.printed], (t.id, c.key)
            elif t.id == "hendrycks2018:2":
                assert c.metric == "relative_ce", c.key
            elif t.id == "rusak2022:3":
                assert c.metric == "error", c.key
            else:
                assert c.metric == "ce", (t.id, c.key)
            for r in t.rows:
                assert c.key in r.values, (t.id, r.label, c.key)


def test_laugros_mce_ic_is_relative_mce() -> None:
    # the printed 'mCE.IC' equals Hendrycks & Dietterich's relative mCE (Table 2) to rounding, not their mCE (Table 1)
    t3 = {r.model: r.values["imagenet_c_relative_mce"] for r in table("laugros2020:3").rows}
    rel = {r.model: r.values["relative_mce"] for r in table("hendrycks2018:2").rows}
    mce = {r.model: r.values["mce"] for r in table("hendrycks2018:1").rows}
    shared = sorted(set(t3) & set(rel))
    assert len(shared) >= 5
    for m in shared:
        assert abs(t3[m] - rel[m]) <= 0.5, m
    assert abs(t3["resnet50"] - mce["resnet50"]) > 20
    # so a measured ResNet-50 at its published relative mCE shows no gap in the comparison
    c = compare("laugros2020:3", {"resnet50": {"imagenet_c_relative_mce": 105.0, "imagenet_noc_mce": 81.0}})
    assert {r.model: r for r in c.rows}["resnet50"].difference == {"imagenet_c_relative_mce": 0.0, "imagenet_noc_mce": 0.0}
    assert "relative mCE" in render(c) and "mCE.IC" in render(c)


def test_identifiers_and_citations_name_the_paper(capsys: pytest.CaptureFixture[str]) -> None:
    for t in tables().values():
        author = t.reference["authors"].split(",")[0].split(" ")[0].lower()  # type: ignore[index]
        assert t.id.startswith(f"{author}{t.reference['year']}:"), t.id  # type: ignore[index]
        assert set(t.reference) == {"authors", "title", "venue", "year"}  # type: ignore[arg-type]
    assert main(["zoo", "table"]) == 0
    out = capsys.readouterr().out
    assert "imagenet-c:table1" in out and "Laugros, Caplier & Ospici (2020)" in out
    assert not re.search(r"\b00[0-4]:|\b00[0-4] Table|_[0-9a-f]{16}\.txt", out)

"""The papers' published tables (models x metrics) and their side-by-side comparison with measured values.

Tables are package data (``shiftbench/data/zoo_tables.json``), keyed by the paper's first author
and year and the table: ``hendrycks2018:1`` (ImageNet-C CE/mCE, also ``imagenet-c:table1``),
``hendrycks2018:2`` (relative CE), ``laugros2020:3`` (ImageNet-C relative mCE vs ImageNet-NOC mCE),
``laugros2020:4`` (ImageNet-NOC CE of robust ResNet-50s), ``rusak2022:3`` (ImageNet-D errors and mDE),
``hendrycks2019:P`` (ImageNet-P mFR and mT5D). Every column names its metric (error, CE, relative CE,
mCE, relative mCE, mDE, mFR, mT5D), every table cites its paper (authors, title, venue, year) and every
row names the zoo entry that reproduces it.

The comparison only needs "model name -> measured metrics" (in the paper's
unit, %), so any runner can feed it::

    >>> from shiftbench.zoo.tables import compare, render
    >>> c = compare("laugros2020:3", {"resnet50": {"imagenet_c_relative_mce": 104.1}})
    >>> c.rows[5].difference["imagenet_c_relative_mce"]
    -0.9
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..checks import suggest
from ..errors import InvalidArgumentError, UnknownNameError

__all__ = [
    "Column",
    "Row",
    "PublishedTable",
    "Comparison",
    "tables",
    "table",
    "published_for",
    "compare",
    "render",
    "measured_from_report",
    "measured_from_records",
    "METRICS",
]

FORMATS = ("table", "json", "csv")

CE_SET1 = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "pixelate")
"""The ImageNet-C corruptions that overlap the most (Laugros, Caplier & Ospici, 2021, Section 4.2: noises, blurs, pixelate)."""
CE_SET2 = ("snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "jpeg_compression")
"""The other seven ImageNet-C corruptions (the same paper's second set)."""


METRICS = {
    "error": "top-1 error",
    "ce": "Corruption Error (normalised by AlexNet)",
    "relative_ce": "relative Corruption Error (degradation from clean error, normalised by AlexNet's)",
    "mce": "mean Corruption Error",
    "relative_mce": "relative mean Corruption Error",
    "mde": "mean Domain Error (normalised by AlexNet)",
    "mfr": "mean Flip Rate (normalised by AlexNet)",
    "mt5d": "mean Top-5 Distance (normalised by AlexNet)",
}
"""The metrics a published column can be, and what each is."""


@dataclass(frozen=True)
class Column:
    """A column: its key (what measured values are keyed by), label, metric (:data:`METRICS`) and the heading the
    paper prints (which may differ: Laugros et al. print relative mCE as 'mCE.IC')."""

    key: str
    label: str
    metric: str = ""
    printed: str = ""


@dataclass(frozen=True)
class Row:
    """A published row: the paper's label, the zoo entry, the line of the paper text, the values (unit of the table)."""

    label: str
    model: str
    line: int
    values: Mapping[str, float | None]


@dataclass(frozen=True)
class PublishedTable:
    id: str
    paper: str
    paper_file: str
    table: str
    title: str
    unit: str
    lower_is_better: bool
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...]
    benchmarks: tuple[str, ...] = ()
    """The registered benchmarks whose stored records give its columns (``shiftbench reproduce`` runs them)."""
    reference: Mapping[str, Any] | None = None
    """The paper: authors, title, venue, year."""
    aliases: tuple[str, ...] = ()
    """Other identifiers accepted for the table (``imagenet-c:table1``...)."""

    def column_keys(self) -> list[str]:
        return [c.key for c in self.columns]

    @property
    def citation(self) -> str:
        """``Authors (year), 'Title', venue, Table N``."""
        return f"{self.paper}, Table {self.table}"


@lru_cache(maxsize=1)
def tables() -> dict[str, PublishedTable]:
    """All published tables by id (``"rusak2022:3"``...)."""
    text = resources.files("shiftbench").joinpath("data/zoo_tables.json").read_text(encoding="utf-8")
    out: dict[str, PublishedTable] = {}
    for tid, t in json.loads(text)["tables"].items():
        out[tid] = PublishedTable(
            id=tid,
            paper=t["paper"],
            paper_file=t["paper_file"],
            table=t["table"],
            title=t["title"],
            unit=t["unit"],
            lower_is_better=bool(t["lower_is_better"]),
            columns=tuple(Column(c["key"], c["label"], c.get("metric", ""), c.get("printed", c["label"]))
                          for c in t["columns"]),
            rows=tuple(Row(r["label"], r["model"], int(r["line"]), dict(r["values"])) for r in t["rows"]),
            notes=tuple(t.get("notes", ())),
            benchmarks=tuple(t.get("benchmarks", ())),
            reference=dict(t.get("reference") or {}),
            aliases=tuple(a for a in t.get("id_aliases", ()) if not a[:1].isdigit()),
        )
    return out


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    """Every accepted identifier (lower case) -> the table's id; the shipped files' old numeric ids included."""
    text = resources.files("shiftbench").joinpath("data/zoo_tables.json").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for tid, t in json.loads(text)["tables"].items():
        for a in (tid, *t.get("id_aliases", ())):
            out[a.lower()] = tid
    return out


def table(table_id: str) -> PublishedTable:
    """One published table by its id (``"rusak2022:3"``) or an alias (``"imagenet-d:table3"``).

    Raises:
        UnknownNameError: no such table (lists the known ones).
    """
    known = tables()
    key = str(table_id).strip().replace("/", ":")
    aliases = _aliases()
    if key.lower() not in aliases and ":" in key:
        paper, num = key.split(":", 1)
        if paper.isdigit():  # earlier numeric ids
            key = f"{int(paper):03d}:{num}"
    if key.lower() not in aliases:
        key = key.replace("-", ":", 1) if key.count("-") == 1 and ":" not in key else key
    if key.lower() not in aliases:
        names = sorted(known) + sorted(a for t in known.values() for a in t.aliases)
        raise UnknownNameError("table", table_id, names, suggest(key, names))
    return known[aliases[key.lower()]]


def published_for(model: str) -> list[tuple[PublishedTable, Row]]:
    """Every published row that names the zoo entry ``model``."""
    name = model[4:] if model.startswith("zoo:") else model
    return [(t, r) for t in tables().values() for r in t.rows if r.model == name]


@dataclass(frozen=True)
class ComparedRow:
    label: str
    model: str
    line: int
    published: Mapping[str, float | None]
    measured: Mapping[str, float]
    difference: Mapping[str, float]


@dataclass(frozen=True)
class Comparison:
    """A published table with measured values beside it (differences = measured - published)."""

    table: PublishedTable
    rows: tuple[ComparedRow, ...]
    unmatched: tuple[str, ...]


def compare(table_id: str, measured: Mapping[str, Mapping[str, float]]) -> Comparison:
    """Put measured metrics next to a published table.

    Args:
        table_id: e.g. ``"rusak2022:3"``.
        measured: metrics per model, in the table's unit (%), keyed by zoo name
            (``"resnet50"`` or ``"zoo:resnet50"``) or by the paper's row label;
            metric names are the table's column keys (``table(id).column_keys()``).

    Raises:
        InvalidArgumentError: a measured metric is not a column of the table, or not a finite number.
    """
    t = table(table_id)
    keys = set(t.column_keys())
    by_key: dict[str, Mapping[str, float]] = {}
    for name, metrics in measured.items():
        bad = sorted(set(metrics) - keys)
        if bad:
            raise InvalidArgumentError(
                "measured",
                f"{name}: {', '.join(bad)}",
                f"metrics among the columns of {t.id}: {', '.join(t.column_keys())}",
            )
        for k, v in metrics.items():
            if not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
                raise InvalidArgumentError("measured", f"{name}.{k}={v!r}", "a finite number (in %)")
        by_key[name[4:] if name.startswith("zoo:") else name] = metrics
    rows = []
    used: set[str] = set()
    for r in t.rows:
        got = by_key.get(r.model) or by_key.get(r.label) or {}
        used.update(k for k in (r.model, r.label) if k in by_key)
        diff = {k: round(float(v) - float(p), 6) for k, v in got.items() if (p := r.values.get(k)) is not None}
        rows.append(ComparedRow(r.label, r.model, r.line, dict(r.values), {k: float(v) for k, v in got.items()}, diff))
    return Comparison(t, tuple(rows), tuple(sorted(set(by_key) - used)))


def measured_from_report(report: Mapping[str, Any], table_id: str) -> dict[str, dict[str, float]]:
    """The metrics of a table's columns from a ``shiftbench evaluate --results-format json`` report, in %.

    Reads each evaluated model's clean error, mCE (only when it covers all 15
    benchmark corruptions), relative mCE and per-corruption CE / relative CE
    (``hendrycks2018:2`` takes the relative ones); the baseline row is skipped. Models are
    keyed by their evaluated name (``zoo:resnet50``), which :func:`compare` matches.

    Raises:
        InvalidArgumentError: the document is not such a report.
    """
    t = table(table_id)
    rows = report.get("rows") if isinstance(report, Mapping) else None
    if not isinstance(rows, list) or "units" not in report:
        raise InvalidArgumentError(
            "measured", "a JSON document", "a report of shiftbench evaluate --results-format json"
        )
    relative = "relative_mce" in t.column_keys()
    keys = set(t.column_keys())
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        if row.get("reference"):
            continue  # the published baseline row
        rel = row.get("relative_mce") if row.get("mce_complete") else None
        got: dict[str, float | None] = {"error": row.get("clean_error"), "relative_mce": rel,
                                        "imagenet_c_relative_mce": rel}
        mce = row.get("mce") if row.get("mce_complete") else None
        got["mce"] = got["imagenet_c_mce"] = mce
        for name, sc in (row.get("corruptions") or {}).items():
            got[name] = sc.get("relative_ce" if relative else "ce")
        for key, group in (("imagenet_c_mce_set1", CE_SET1), ("imagenet_c_mce_set2", CE_SET2)):
            vals = [got.get(c) for c in group]
            if all(_finite(v) for v in vals):  # the mean over the set (Laugros, Caplier & Ospici, 2021, Table 1)
                got[key] = sum(float(v) for v in vals) / len(group)  # type: ignore[arg-type]
        metrics = {k: round(100 * float(v), 4) for k, v in got.items() if k in keys and v is not None}
        if metrics:
            out[str(row.get("model"))] = metrics
    return out


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def measured_from_records(table_id: str, benchmark: str, records: Any) -> dict[str, dict[str, float]]:
    """The metrics of a table's columns from a benchmark's stored records (``shiftbench results`` JSON), in %.

    ``imagenet-c``: as :func:`measured_from_report` (its records are that report's rows).
    ``imagenet-noc``: clean error, CE per corruption, mCE (``imagenet_noc_mce``, only when complete), from
    the evaluations of ImageNet-NOC itself. ``border-obstruction``: the CE of border and obstruction.
    ``imagenet-d``: error per domain and mDE. ``imagenet-p``: mFR and mT5D (only over all ten test
    perturbations). Other benchmarks give nothing. Models are keyed by their stored name
    (``zoo:resnet50``); a later record of a model overrides an earlier one.
    """
    t = table(table_id)
    keys = set(t.column_keys())
    if not isinstance(records, list):
        return {}
    if benchmark == "imagenet-c":
        return measured_from_report({"units": "", "rows": records}, table_id)
    out: dict[str, dict[str, float]] = {}
    for r in records:
        if not isinstance(r, Mapping) or r.get("reference"):
            continue
        got: dict[str, Any] = {}
        if benchmark in ("imagenet-noc", "border-obstruction"):
            if r.get("benchmark") not in (None, benchmark):
                continue  # another selection of candidates (a saved benchmark, border and obstruction)
            got = {c: 100 * v for c, v in (r.get("ce") or {}).items() if _finite(v)}
            if _finite(r.get("mce")) and benchmark == "imagenet-noc":
                got["imagenet_noc_mce"] = 100 * r["mce"]
        elif benchmark == "imagenet-d":
            if r.get("benchmark") not in (None, "imagenet-d"):
                continue  # another mapping scores other classes: not the paper's numbers
            got = {d: 100 * v for d, v in (r.get("errors") or {}).items() if _finite(v)}
            if _finite(r.get("mde")):
                got["mde"] = float(r["mde"])
        elif benchmark == "imagenet-p":
            if r.get("test_perturbations") == 10:
                got = {k: 100 * r[k] for k in ("mfr", "mt5d") if _finite(r.get(k))}
        metrics = {k: round(float(v), 4) for k, v in got.items() if k in keys}
        if metrics:
            out.setdefault(str(r.get("model")), {}).update(metrics)
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def render(comparison: Comparison, fmt: str = "table") -> str:
    """The comparison as text: ``"table"`` (aligned, published -> measured (diff)), ``"json"`` or ``"csv"``."""
    if fmt not in FORMATS:
        raise InvalidArgumentError("format", fmt, ", ".join(FORMATS))
    t = comparison.table
    if fmt == "json":
        doc: dict[str, Any] = {
            "table": t.id,
            "paper": t.paper,
            "reference": dict(t.reference or {}),
            "title": t.title,
            "unit": t.unit,
            "columns": [{"key": c.key, "label": c.label, "metric": c.metric, "printed": c.printed} for c in t.columns],
            "rows": [
                {
                    "label": r.label,
                    "model": f"zoo:{r.model}",
                    "published": r.published,
                    "measured": r.measured,
                    "difference": r.difference,
                }
                for r in comparison.rows
            ],
            "unmatched": list(comparison.unmatched),
            "notes": list(t.notes),
        }
        return json.dumps(doc, indent=1)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["table", "row", "model", "column", "published", "measured", "difference"])
        for r in comparison.rows:
            for c in t.columns:
                w.writerow(
                    [
                        t.id,
                        r.label,
                        f"zoo:{r.model}",
                        c.key,
                        r.published.get(c.key),
                        r.measured.get(c.key),
                        r.difference.get(c.key),
                    ]
                )
        return buf.getvalue()
    header = ["Model", *(c.label for c in t.columns)]
    body = []
    for r in comparison.rows:
        cells = [r.label]
        for c in t.columns:
            p = r.published.get(c.key)
            if c.key in r.measured:
                d = r.difference.get(c.key)
                cells.append(f"{_fmt(p)}>{r.measured[c.key]:.1f}" + ("" if d is None else f" ({d:+.1f})"))
            else:
                cells.append(_fmt(p))
        body.append(cells)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        f"{t.id}: {t.title} ({t.unit}; published"
        + (" > measured (difference)" if any(r.measured for r in comparison.rows) else "")
        + ")",
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    lines.append(f"Source: {t.citation}.")
    lines += [f"Note: {n}" for n in t.notes if "relative mCE" in n and "'mCE.IC'" in n]
    if comparison.unmatched:
        lines.append(f"Measured but not in this table: {', '.join(comparison.unmatched)}.")
    return "\n".join(lines)

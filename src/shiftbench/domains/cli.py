"""``shiftbench evaluate --benchmark imagenet-d``: called by the evaluate command with all its options."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..errors import ShiftbenchError
from .evaluate import ImageNetDResult, evaluate_imagenet_d, stored_correlations
from .mapping import DOMAINS, benchmark_name
from .metrics import ALEXNET_SOURCE, alexnet_errors, confusion_matrix

__all__ = ["evaluate_command"]

# Options of `shiftbench evaluate` that mean nothing for ImageNet-D, with their defaults.
_MEANINGLESS: dict[str, Any] = {
    "released": None,
    "edition": None,
    "corruptions": None,
    "severities": "1-5",
    "perturbations": None,
    "difficulties": None,
    "seed": 0,
    "release": False,
    "classes": "auto",
    "clean": True,
}


def _given_on_command_line(name: str) -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    try:
        src = ctx.get_parameter_source(name)
    except Exception:  # noqa: BLE001 - not a parameter of this command
        return False
    return src is not None and src.name in ("COMMANDLINE", "ENVIRONMENT")


def _check_options(kw: dict[str, Any]) -> None:
    for name, default in _MEANINGLESS.items():
        if name not in kw:
            continue
        if kw[name] != default or _given_on_command_line(name):
            opt = "--" + name.replace("_", "-")
            if name == "release":
                opt = "--release/--no-release"
            elif name == "clean":
                opt = "--clean/--no-clean"
            raise click.BadParameter(
                f"{opt} does not apply to --benchmark imagenet-d (it evaluates DomainNet's six domains as they are)",
                param_hint=opt.split("/")[0],
            )
    if str(kw.get("baseline", "alexnet")).lower() != "alexnet":
        raise click.BadParameter(
            "--benchmark imagenet-d normalises by AlexNet's published errors (ImageNet-D Table 2) only; "
            "leave --baseline at alexnet",
            param_hint="--baseline",
        )
    if kw.get("data") is None:
        raise click.BadParameter(
            "--benchmark imagenet-d needs --data: the DomainNet folder (<root>/<domain>/<class>/<image>) "
            "or one domain folder",
            param_hint="--data",
        )


def _pct(x: float | None, nd: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{nd}f}"


def _rows(r: ImageNetDResult) -> list[dict[str, Any]]:
    base = alexnet_errors()
    out = []
    for d in r.domains:
        f = r.filtered.get(d)
        out.append(
            {
                "model": r.model,
                "mapping": r.mapping,
                "domain": d,
                "images": r.n_images.get(d, 0),
                "top1_error": r.errors.get(d),
                "top5_error": r.top5_errors.get(d),
                "alexnet_error": base[d],
                "de": r.de.get(d),
                "filtered_error": f.filtered_error if f else None,
                "rejected": f.rejected if f else None,
                "mde": r.mde,
            }
        )
    return out


def _render(r: ImageNetDResult, console: Console, details: bool, notes: list[str]) -> None:
    t = Table(
        title=f"ImageNet-D ({r.mapping} mapping): {r.model}: top-1 error (%) and Domain Error", title_justify="left", header_style="bold"
    )
    for col in ("Domain", "Images", "Top-1 err", "Top-5 err", "AlexNet err", "DE (%)", "Filtered err", "Rejected"):
        t.add_column(col, justify="left" if col == "Domain" else "right")
    for row in _rows(r):
        t.add_row(
            row["domain"],
            str(row["images"]),
            _pct(row["top1_error"]),
            _pct(row["top5_error"]),
            _pct(row["alexnet_error"]),
            _pct(row["de"]),
            _pct(row["filtered_error"]),
            _pct(row["rejected"]),
        )
    t.add_section()
    t.add_row("mDE", "", "", "", "", "–" if r.mde is None else f"{r.mde:.1f}", "", "", style="bold")
    console.print(t)
    if details:
        for d in r.domains:
            rows = r.analysis.get(d) or []
            if not rows:
                continue
            a = Table(title=f"{d}: most frequent predictions", title_justify="left", header_style="bold")
            for col in ("#", "ImageNet class", "Index", "Predictions", "Share (%)", "ImageNet-D"):
                a.add_column(col, justify="right" if col in ("#", "Index", "Predictions", "Share (%)") else "left")
            for p in rows:
                flag = f"inside ({', '.join(p.maps_to[:3])})" if p.inside else "outside"
                a.add_row(str(p.rank), p.name, str(p.index), str(p.count), f"{100 * p.share:.1f}", flag)
            console.print(a)
    for n in notes:
        console.print(f"• {n}", highlight=False)


def _correlation_notes(store: str) -> list[str]:
    try:
        corr = stored_correlations(store)
    except (ShiftbenchError, OSError):
        return []
    out = []
    for (a, b), (rho, n) in corr.items():
        if rho is not None:
            out.append(f"Spearman rank correlation {a} vs {b} over {n} stored models: {rho:+.2f}")
    return out


def _emit(text: str, results_file: str | None) -> None:
    if results_file:
        Path(results_file).parent.mkdir(parents=True, exist_ok=True)
        Path(results_file).write_text(text, encoding="utf-8")
        click.echo(f"Results written to {results_file}", err=True)
    else:
        sys.stdout.write(text)


def _imagenet_val_command(kw: dict[str, Any], mapping: str) -> None:
    """004 Table 4's first row on an ImageNet validation folder."""
    from .imagenet_val import evaluate_imagenet_val

    row, skipped = evaluate_imagenet_val(
        kw.get("model") or "efficientnet-lite0", kw["data"], mapping=mapping, weights=kw.get("weights"),
        batch_size=int(kw.get("batch_size") or 32), device=kw.get("device") or "cpu", limit=kw.get("limit"),
        bad_images=kw.get("bad_images") or "skip",
    )  # fmt: skip
    rec = {
        "model": kw.get("model") or "efficientnet-lite0", "data": str(kw["data"]), "mapping": mapping,
        "benchmark": benchmark_name(mapping), "images": row.n_total, "images_in_imagenet_d": row.n,
        "top1_error": row.error, "filtered_error": row.filtered_error, "rejected": row.rejected,
        "outside_imagenet_d": row.outside, "unreadable_skipped": skipped,
    }  # fmt: skip
    fmt = kw.get("results_format", "table")
    if fmt == "json":
        _emit(json.dumps(rec, indent=2) + "\n", kw.get("results_file"))
        return
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rec))
        w.writeheader()
        w.writerow(rec)
        _emit(buf.getvalue(), kw.get("results_file"))
        return
    t = Table(title=f"ImageNet-D Table 4, IN val row ({mapping} mapping): {rec['model']}", title_justify="left")
    for col in ("Images", "In ImageNet-D", "Top-1 err", "Filtered err", "Rejected", "Outside ImageNet-D"):
        t.add_column(col, justify="right")
    t.add_row(str(row.n_total), str(row.n), _pct(row.error), _pct(row.filtered_error), _pct(row.rejected),
              _pct(row.outside))  # fmt: skip
    console = Console(width=max(Console().width, 120))
    console.print(t)
    console.print(
        "• Labels and predictions mapped to ImageNet-D; scored on the images whose label is in ImageNet-D. "
        "004 prints 12.1 / 13.4 / 52.7 for a ResNet50 (docs/imagenet-d.md: what the 52.7 can be).",
        highlight=False,
    )


def _confusion_outputs(result: ImageNetDResult, store: str | None, details: bool) -> tuple[dict[str, Any], list[str]]:
    """004 section 1's check of the mapping: the class-confusion matrix on the real domain (JSON part, notes)."""
    p = result.predictions.get("real")
    if p is None or not p.keys:
        return {}, []
    cm = confusion_matrix(p.labels, p.top1, result.mapping)
    worst = cm.confusions(10)
    doc = {
        "columns": list(cm.columns), "classes": list(cm.classes), "counts": cm.counts.tolist(),
        "diagonal_share": cm.diagonal_share(), "ambiguous": cm.ambiguous,
        "confusions": [{"true": a, "predicted": b, "count": n, "share": s} for a, b, n, s in worst],
    }  # fmt: skip
    notes = [
        f"Mapping check (real domain): {c} images predicted as {q}: {n} ({100 * s:.0f} %)" for c, q, n, s in worst[:5]
    ]
    if store and result.evaluation_id is not None and details:
        base = Path(store).parent / f"imagenet-d-eval{result.evaluation_id}-confusion-real"
        buf = io.StringIO()
        rows = cm.to_rows()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        base.with_suffix(".csv").write_text(buf.getvalue(), encoding="utf-8")
        notes.append(f"Class-confusion matrix of the real domain (CSV): {base.with_suffix('.csv')}")
        if importlib.util.find_spec("matplotlib") is not None:
            from .plot import plot_confusion_matrix

            plot_confusion_matrix(cm, base.with_suffix(".png"), title=f"{result.model}, real ({result.mapping})")
            notes.append(f"Class-confusion chart: {base.with_suffix('.png')}")
    return doc, notes


def evaluate_command(**kw: Any) -> None:
    """Evaluate on ImageNet-D and print (or write) the report."""
    _check_options(kw)
    mapping = kw.get("mapping") or "paper"
    from .imagenet_val import is_imagenet_folder

    if is_imagenet_folder(kw["data"]):
        _imagenet_val_command(kw, mapping)
        return
    fmt = kw.get("results_format", "table")
    results_file = kw.get("results_file")
    details = bool(kw.get("details", True))
    store = kw.get("store")
    progress = None
    if kw.get("progress", True):
        state = {"next": 0.0}

        def progress(done: int, total: int, domain: str) -> None:
            if total and (done / total >= state["next"] or done == total):
                click.echo(f"  {done}/{total} images ({100 * done / total:.0f} %), {domain}", err=True)
                state["next"] = math.floor(done / total * 10 + 1) / 10

    try:
        result = evaluate_imagenet_d(
            kw.get("model") or "efficientnet-lite0",
            kw["data"],
            weights=kw.get("weights"),
            batch_size=int(kw.get("batch_size") or 32),
            device=kw.get("device") or "cpu",
            store=store,
            limit=kw.get("limit"),
            bad_images=kw.get("bad_images") or "skip",
            rerun=bool(kw.get("rerun", False)),
            progress=progress,
            mapping=mapping,
        )
    except KeyboardInterrupt:
        click.echo(
            f"\nInterrupted. Finished batches are stored in {store}; run the same command again to resume.", err=True
        )
        raise
    notes = [
        f"Data: {result.data}.",
        f"Class mapping: {result.mapping} (benchmark {benchmark_name(result.mapping)}).",
        f"DE and mDE are normalised by {ALEXNET_SOURCE}.",
    ]
    if result.mde is None:
        missing = [d for d in DOMAINS if d not in result.errors]
        notes.append(f"No mDE: it needs all six domains (missing {', '.join(missing)}).")
    n_min = min(result.n_images.values()) if result.n_images else 0
    if 0 < n_min < 1000:
        notes.append(
            f"Only {n_min} images in some domain: an error rate carries a standard error of up to "
            f"{50 / math.sqrt(n_min):.1f} points."
        )
    notes += [f"Warning: {w}" for w in result.warnings]
    outside = {d: n for d, n in result.outside_imagenet_d.items() if n}
    if outside:
        notes.append(
            "Left out by design (DomainNet classes outside ImageNet-D): "
            + ", ".join(f"{d} {n} image(s)" for d, n in outside.items())
        )
    if store and result.evaluation_id is not None:
        notes.append(
            f"Predictions stored as ImageNet-D evaluation {result.evaluation_id} in {store} (tables imagenet_d_*)."
        )
        if details:
            chart = Path(store).parent / f"imagenet-d-eval{result.evaluation_id}-top-predictions.png"
            if importlib.util.find_spec("matplotlib") is not None:
                from .plot import plot_error_analysis

                title = f"ImageNet-D: most frequent predictions of {result.model}"
                plot_error_analysis(result.analysis, chart, title=title)
                notes.append(f"Error-analysis chart (blue: inside ImageNet-D, orange: outside): {chart}")
            else:
                notes.append("No error-analysis chart: it needs matplotlib (pip install 'shiftbench[plot]').")
            notes += _correlation_notes(store)
    confusion, cm_notes = _confusion_outputs(result, store, details)
    notes += cm_notes
    if fmt == "json":
        text = json.dumps({**result.to_dict(), "confusion_real": confusion, "notes": notes}, indent=2) + "\n"
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(_rows(result)[0]) if result.domains else ["domain"])
        w.writeheader()
        w.writerows(_rows(result))
        text = buf.getvalue()
    else:
        text = ""
    if fmt in ("json", "csv"):
        if results_file:
            Path(results_file).parent.mkdir(parents=True, exist_ok=True)
            Path(results_file).write_text(text, encoding="utf-8")
            click.echo(f"Results written to {results_file}", err=True)
        else:
            sys.stdout.write(text)
        return
    if results_file:
        Path(results_file).parent.mkdir(parents=True, exist_ok=True)
        with open(results_file, "w", encoding="utf-8") as fh:
            _render(result, Console(file=fh, width=140), details, notes)
        click.echo(f"Results written to {results_file}", err=True)
    else:
        _render(result, Console(width=max(Console().width, 120)), details, notes)

"""CLI commands of the evaluation pipeline: ``shiftbench evaluate`` and ``shiftbench results``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..progress import progress_for
from .baselines import alexnet_baseline
from .metrics import BENCHMARK_CORRUPTIONS, summarize
from .models import DEFAULT_MODEL, read_class_list
from .report import (
    FORMATS,
    ReportRow,
    baseline_row,
    render_details,
    render_table,
    to_csv,
    to_json,
)
from .runner import BENCHMARKS, EvaluationResult, evaluate, resolve_baseline
from .store import DEFAULT_STORE, EXPORT_TABLES, ResultsStore, records_to_csv

__all__ = ["register"]

_TABLE_WIDTH = 160


def _stdout_console() -> Console:
    c = Console()
    if not c.is_terminal or c.width < _TABLE_WIDTH:
        c = Console(width=max(_TABLE_WIDTH, c.width) if not c.is_terminal else c.width)
    return c


def _emit(text: str, results_file: str | None) -> None:
    if results_file:
        Path(results_file).parent.mkdir(parents=True, exist_ok=True)
        Path(results_file).write_text(text, encoding="utf-8")
        click.echo(f"Results written to {results_file}", err=True)
    else:
        click.echo(text, nl=False)


def _demo_notes(result: EvaluationResult, demo: bool) -> list[str]:
    n = result.n_images
    notes: list[str] = []
    if demo:
        notes.append(
            f"These {n} images (ImageNet validation photos shipped inside the foolbox wheel) demonstrate the pipeline; "
            "they are no benchmark. Published ImageNet-C numbers use all 50 000 validation images."
        )
    elif 0 < n < 1000:
        notes.append(
            f"Only {n} images per condition: an error rate carries a standard error of up to "
            f"{50 / math.sqrt(n):.1f} points."
        )
    return notes


def _report_rows(result: EvaluationResult) -> list[ReportRow]:
    rows: list[ReportRow] = []
    base_name = result.summary.baseline
    if base_name == "AlexNet" and result.settings.get("edition") == "224":
        rows.append(baseline_row(alexnet_baseline(), BENCHMARK_CORRUPTIONS))
    rows.append(
        ReportRow(
            result.model,
            result.summary,
            result.n_images,
            {
                "evaluation": result.evaluation_id,
                "store": str(result.store_path),
                "model_checksum": result.model_checksum,
                "data": result.data,
                "clean_data": result.clean_data,
                "settings": result.settings,
            },
        )
    )
    return rows


def _print_notes(console: Console, notes: list[str]) -> None:
    for n in notes:
        console.print(f"• {n}", highlight=False, soft_wrap=False)


# Benchmarks evaluated by other subpackages. Each handler takes the options of
# ``shiftbench evaluate`` as keyword arguments (the same ``kw`` as
# ``_evaluate_command``) and prints or writes its own report; it is imported only
# when asked for, so a benchmark's optional dependencies never slow the CLI.
OTHER_BENCHMARKS: dict[str, str] = {
    "imagenet-p": "shiftbench.perturbations.cli:evaluate_command",
    "imagenet-noc": "shiftbench.overlap.cli:evaluate_command",
    "imagenet-d": "shiftbench.domains.cli:evaluate_command",
}


def _other_benchmark_handler(name: str) -> Any:
    import importlib

    module, _, attr = OTHER_BENCHMARKS[name].partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.startswith("shiftbench"):
            raise click.ClickException(f"--benchmark {name!r} is not available in this build of shiftbench") from e
        raise
    return getattr(mod, attr)


def _evaluate_command(**kw: Any) -> None:
    if kw.get("mapping") is not None and kw.get("benchmark") != "imagenet-d":
        raise click.BadParameter(
            f"--mapping applies to --benchmark imagenet-d, not {kw.get('benchmark')!r}", param_hint="--mapping"
        )
    if kw.get("benchmark") != "imagenet-d":
        kw.pop("mapping", None)
    if kw.get("benchmark") in OTHER_BENCHMARKS:
        _other_benchmark_handler(kw["benchmark"])(**kw)
        return
    for opt in ("perturbations", "difficulties"):
        if kw.pop(opt, None) is not None:
            raise click.BadParameter(
                f"--{opt} applies to --benchmark imagenet-p, not {kw.get('benchmark')!r}", param_hint=f"--{opt}"
            )
    fmt = kw.pop("results_format")
    results_file = kw.pop("results_file")
    show_progress = kw.pop("progress")
    details = kw.pop("details")
    classes_opt = kw.pop("classes")
    weights = kw.pop("weights")
    model_name = kw.pop("model")
    demo = kw["data"] is None and kw["released"] is None
    classes: Any = classes_opt
    if classes_opt not in ("auto", "model", "data"):
        classes = list(read_class_list(classes_opt))
    model: Any = model_name
    if weights is not None:
        from .models import load_model

        model = load_model(model_name, weights=weights, device=kw["device"])
    err = Console(stderr=True)
    progress: Any = None
    if show_progress:
        progress = progress_for(err)
    store = kw.pop("store")
    try:
        result = evaluate(model, store=store, classes=classes, progress=progress, **kw)
    except KeyboardInterrupt:
        click.echo(
            f"\nInterrupted. Every batch finished so far is stored in {store}; run the same command again to resume.",
            err=True,
        )
        raise  # the root command turns it into exit code 130
    if result.new_predictions == 0:
        click.echo(
            f"All requested runs were already complete in {store}: scores recomputed from the stored predictions.",
            err=True,
        )
    rows = _report_rows(result)
    notes = [
        f"Model {result.model} ({result.model_checksum[:19]}...) on {result.data}"
        + (f"; clean images: {result.clean_data}" if result.clean_data and result.clean_data != result.data else ""),
        *_demo_notes(result, demo),
        f"Baseline: {result.summary.baseline_source}." if result.summary.baseline else "Baseline: none.",
        *result.summary.notes,
        *result.notes,
        f"Stored as evaluation {result.evaluation_id} in {result.store_path} (`shiftbench results` lists all).",
    ]
    if fmt == "json":
        _emit(to_json(rows, notes), results_file)
        return
    if fmt == "csv":
        _emit(to_csv(rows), results_file)
        return
    console = (
        _stdout_console()
        if not results_file
        else Console(file=open(results_file, "w", encoding="utf-8"), width=_TABLE_WIDTH)
    )
    try:
        title = f"{BENCHMARKS[result.settings['benchmark']].title}: Corruption Error (%)"
        render_table(rows, console, title=title)
        if details:
            render_details(rows[-1], console)
        _print_notes(console, notes)
    finally:
        if results_file:
            console.file.close()
            click.echo(f"Results written to {results_file}", err=True)


def _imagenet_d_records(store: str, model: str | None) -> list[dict[str, Any]]:
    """Stored ImageNet-D evaluations (per-domain errors, mDE), if this build has the domains subpackage."""
    try:
        from ..domains.evaluate import stored_domain_errors
    except ImportError:
        return []
    recs = stored_domain_errors(store)
    return [r for r in recs if model is None or model in r["model"]]


def _render_imagenet_d(records: list[dict[str, Any]], console: Console) -> None:
    from ..domains.mapping import DOMAINS

    # One leaderboard per class mapping: different mappings score different class sets.
    for bench in sorted({r.get("benchmark", "imagenet-d") for r in records}):
        group = [r for r in records if r.get("benchmark", "imagenet-d") == bench]
        mapping = group[0].get("mapping", "paper")
        title = f"ImageNet-D leaderboard by mDE (top-1 error per domain, %; {mapping} mapping, benchmark {bench})"
        t = Table(title=title, title_justify="left", header_style="bold")
        for col in ("Model", "Images", *DOMAINS, "mDE"):
            t.add_column(col, justify="left" if col == "Model" else "right")
        for r in sorted(group, key=lambda r: (r["mde"] is None, r["mde"] or 0.0)):
            cells = [f"{100 * r['errors'][d]:.1f}" if d in r["errors"] else "–" for d in DOMAINS]
            mde = "–" if r["mde"] is None else f"{r['mde']:.1f}"
            t.add_row(f"{r['model']} #{r['evaluation']}", str(r["images"]), *cells, mde)
        console.print(t)
    console.print("mDE: mean over the six domains of the error divided by AlexNet's (ImageNet-D Table 2); – : domain not stored.")


def _emit_imagenet_d(records: list[dict[str, Any]], store: str, results_format: str, results_file: str | None) -> None:
    if results_format == "json":
        _emit(to_json([], [f"Store: {store}"], {"imagenet_d": records}), results_file)
    elif results_format == "csv":
        from ..domains.mapping import DOMAINS

        flat = [
            {k: v for k, v in r.items() if k != "errors"} | {f"error_{d}": r["errors"].get(d) for d in DOMAINS}
            for r in records
        ]
        _emit(records_to_csv(flat), results_file)
    else:
        _render_imagenet_d(records, _stdout_console())


def _results_command(
    store: str,
    model: str | None,
    baseline: str,
    runs: bool,
    export: str | None,
    table: str,
    evaluation: int | None,
    results_format: str,
    results_file: str | None,
) -> None:
    with ResultsStore(store, create=False) as db:
        if export:
            n = db.export(export, table=table, evaluation_id=evaluation)
            click.echo(f"Exported {n} {table} record(s) to {export}", err=True)
            return
        evs = db.evaluations(model)
        if evaluation is not None:
            evs = [e for e in evs if e.id == evaluation]
        d_records = [] if (runs or evaluation is not None) else _imagenet_d_records(store, model)
        if d_records and not evs:
            _emit_imagenet_d(d_records, store, results_format, results_file)
            return
        if not evs:
            click.echo(f"No stored evaluations in {store}" + (f" matching {model!r}" if model else "") + ".", err=True)
            return
        # ImageNet-P evaluations keep their runs apart (p_runs); their report lives in shiftbench.perturbations.cli.
        p_evs = [e for e in evs if e.benchmark == "imagenet-p"]
        evs = [e for e in evs if e.benchmark != "imagenet-p"]
        p_cli: Any = None
        if p_evs:
            from ..perturbations import cli as p_cli
        console = _stdout_console()
        if runs and p_evs:
            t = Table(title=f"ImageNet-P runs in {store}", title_justify="left", header_style="bold")
            for col in ("Eval", "Run", "Model", "Data", "Perturbation", "Level", "Frames", "Status", "Done", "Skipped"):
                t.add_column(col)
            for e in p_evs:
                for pr in db.p_runs(e.id):
                    t.add_row(
                        str(e.id), str(pr.id), e.model, e.source_kind, pr.perturbation, str(pr.level), str(pr.frames),
                        pr.status, f"{pr.n_scored + pr.n_skipped}/{pr.n_expected}", str(pr.n_skipped),
                    )
            console.print(t)
        if runs and not evs:
            return
        if runs:
            t = Table(title=f"Runs in {store}", title_justify="left", header_style="bold")
            for col in ("Eval", "Run", "Model", "Data", "Corruption", "Sev.", "Status", "Done", "Skipped", "Error (%)"):
                t.add_column(col)
            for e in evs:
                for r in db.runs(e.id):
                    err_pct = "–" if r.top1_error is None else f"{100 * r.top1_error:.1f}"
                    t.add_row(
                        str(e.id),
                        str(r.id),
                        e.model,
                        f"{e.source_kind}",
                        r.corruption,
                        str(r.severity),
                        r.status,
                        f"{r.n_predicted + r.n_skipped}/{r.n_expected}",
                        str(r.n_skipped),
                        err_pct,
                    )
            console.print(t)
            return
        groups: dict[tuple[str, str, str, str], list[ReportRow]] = {}
        for e in evs:
            clean, tab, incomplete = db.error_table(e.id)
            base, why = resolve_baseline(baseline, store=db, edition=e.edition, source_kind=e.source_kind)
            s = summarize(e.model, tab, clean, base)
            n = max((r.n_predicted for r in db.runs(e.id)), default=0)
            meta = {
                "evaluation": e.id,
                "data": f"{e.source_kind} {e.source}",
                "edition": e.edition,
                "seed": e.seed if e.seed >= 0 else None,
                "release": e.release,
                "label_space": f"{e.label_space} ({e.n_classes} classes)",
                "incomplete_runs": len(incomplete),
                "no_baseline_reason": why,
            }
            groups.setdefault((e.benchmark, e.edition, f"{e.source_kind} {e.source}", e.label_space), []).append(
                ReportRow(f"{e.model} #{e.id}", s, n, meta)
            )
        all_rows = [r for rows in groups.values() for r in rows]
        p_records = p_cli.results_section(db, p_evs, baseline) if p_evs else []
        if results_format == "json":
            extra = {k: v for k, v in (("imagenet_p", p_records), ("imagenet_d", d_records)) if v}
            _emit(to_json(all_rows, [f"Store: {store}"], extra or None), results_file)
            return
        if results_format == "csv":
            # one kind of record per CSV: ImageNet-C rows when there are any, else the ImageNet-P ones
            _emit(to_csv(all_rows) if all_rows else records_to_csv(p_records), results_file)
            return
        if p_records:
            p_cli.render_results_section(p_records, console)
        if d_records:
            _render_imagenet_d(d_records, console)
        for (bench, edition, data, space), rows in groups.items():
            rows.sort(key=lambda x: (x.summary.mce is None, x.summary.mce if x.summary.mce is not None else 0.0))
            title = f"Leaderboard by mCE: {bench}, edition {edition}, {data} ({space} label space)"
            render_table(rows, console, title=title)
            for row in rows:
                s = row.summary
                bits = [f"{row.label}: {row.n_images} images"]
                if s.mce is not None:
                    bits.append(
                        f"mCE over {len(s.mce_corruptions)}/15 corruptions" + ("" if s.complete else " (partial)")
                    )
                if row.meta["incomplete_runs"]:
                    bits.append(f"{row.meta['incomplete_runs']} incomplete run(s) left out")
                bits.append(
                    f"baseline {s.baseline or 'none'}"
                    + (
                        f" ({row.meta['no_baseline_reason']})"
                        if row.meta["no_baseline_reason"] and baseline.lower() != "none"
                        else ""
                    )
                )
                console.print("• " + "; ".join(bits), highlight=False)


def register(cli: click.Group) -> None:
    """Attach ``evaluate`` and ``results`` to the root command group."""

    @cli.command("evaluate")
    @click.option(
        "--model",
        default=DEFAULT_MODEL,
        show_default=True,
        help="Model name: efficientnet-lite0 (built in), torchvision:<arch>, timm:<arch>.",
    )
    @click.option(
        "--weights",
        type=click.Path(dir_okay=False),
        default=None,
        help="Local checkpoint (state_dict), loaded with torch.load(weights_only=True); 'none' = random weights.",
    )
    @click.option(
        "--data",
        type=click.Path(),
        default=None,
        help="Clean images (ImageFolder: <data>/<wnid>/<image>), corrupted on the fly. "
        "With --released: the clean images for the clean error.",
    )
    @click.option(
        "--released",
        type=click.Path(),
        default=None,
        help="Released dataset: ImageNet-C / Tiny-ImageNet-C tree or CIFAR-10-C/100-C folder.",
    )
    @click.option(
        "--benchmark",
        type=click.Choice(sorted([*BENCHMARKS, *OTHER_BENCHMARKS])),
        default="imagenet-c",
        show_default=True,
        help="imagenet-c (corruptions), imagenet-p (perturbation sequences), imagenet-noc, imagenet-d.",
    )
    @click.option("--edition", default=None, help="224 (default), 299, 64 (Tiny), 32 (CIFAR); released data: detected.")
    @click.option(
        "--corruptions",
        default=None,
        help="Comma-separated names, wildcards or groups (benchmark, extra, noise, blur...). Default: all.",
    )
    @click.option("--severities", default="1-5", show_default=True, help="e.g. 1-5 or 1,3,5.")
    @click.option(
        "--perturbations",
        default=None,
        help="imagenet-p: comma-separated perturbation names, wildcards or groups (test, validation). Default: test.",
    )
    @click.option(
        "--difficulties",
        default=None,
        help="imagenet-p: difficulties, e.g. 1-3 or 1,2 (default: 1, the level of the published AlexNet numbers).",
    )
    @click.option("--seed", type=int, default=0, show_default=True, help="Seed of the on-the-fly corruptions.")
    @click.option(
        "--mapping",
        type=click.Choice(["paper", "wordnet"]),
        default=None,
        help="imagenet-d: class mapping, paper (as published, the default) or wordnet (curated variant).",
    )
    @click.option(
        "--release/--no-release",
        default=False,
        show_default=True,
        help="Store-and-reload each corrupted image as JPEG q85, like the released datasets.",
    )
    @click.option("--batch-size", type=int, default=8, show_default=True)
    @click.option("--device", default="cpu", show_default=True, help="cpu, cuda, cuda:N or mps.")
    @click.option(
        "--store",
        type=click.Path(dir_okay=False),
        default=str(DEFAULT_STORE),
        show_default=True,
        help="Results store (SQLite); interrupted runs resume from it.",
    )
    @click.option(
        "--baseline",
        default="alexnet",
        show_default=True,
        help="CE baseline: alexnet (published), none, a model name in the store, eval:<id>, or a .json file.",
    )
    @click.option(
        "--classes",
        default="auto",
        show_default=True,
        help="Label space: auto, model (all model outputs), data (restrict logits to the data's classes), "
        "or a file of class ids (wnids) to restrict to.",
    )
    @click.option("--limit", type=int, default=None, help="At most N images per condition, spread over the classes.")
    @click.option(
        "--bad-images",
        type=click.Choice(["skip", "fail"]),
        default="skip",
        show_default=True,
        help="Unreadable or truncated images: skip and count them, or stop.",
    )
    @click.option("--clean/--no-clean", default=True, show_default=True, help="Also evaluate the clean images.")
    @click.option("--rerun", is_flag=True, help="Discard stored runs of the requested conditions and start over.")
    @click.option("--results-format", type=click.Choice(FORMATS), default="table", show_default=True)
    @click.option("--results-file", type=click.Path(dir_okay=False), default=None)
    @click.option(
        "--progress/--no-progress", default=True, show_default=True, help="Progress with rate and ETA on stderr."
    )
    @click.option("--details/--no-details", default=True, show_default=True, help="Also print errors per severity.")
    def evaluate_cmd(**kw: Any) -> None:
        """Evaluate a classifier on ImageNet-C: clean error, CE per corruption, mCE, relative mCE.

        With no arguments: EfficientNet-Lite0 on the 20 ImageNet images inside the
        foolbox wheel, all registered corruptions x 5 severities, on the fly (a
        demonstration of the pipeline, not a benchmark). Predictions go to the
        results store; an interrupted evaluation resumes when run again.

        \b
        Typical use:
          shiftbench evaluate --model torchvision:resnet50 --data /data/imagenet/val
          shiftbench evaluate --released /data/ImageNet-C --data /data/imagenet/val
        """  # noqa: D301 - click reads the backspace as "keep this paragraph as is"
        _evaluate_command(**kw)

    @cli.command("results")
    @click.option("--store", type=click.Path(dir_okay=False), default=str(DEFAULT_STORE), show_default=True)
    @click.option("--model", default=None, help="Only models whose name contains this text.")
    @click.option(
        "--baseline",
        default="alexnet",
        show_default=True,
        help="CE baseline: alexnet, none, a model name in the store, eval:<id>, or a .json file.",
    )
    @click.option("--runs", is_flag=True, help="List the stored runs with their status instead of the leaderboard.")
    @click.option(
        "--export",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write stored records to a .csv or .json file (see --table).",
    )
    @click.option(
        "--table",
        type=click.Choice(EXPORT_TABLES),
        default="runs",
        show_default=True,
        help="What --export writes: one record per run, or per image (top-5 predictions and label); "
        "p_runs / p_videos: the same for ImageNet-P (per video: the top-5 list of every frame).",
    )
    @click.option("--evaluation", type=int, default=None, help="Only this evaluation id.")
    @click.option("--results-format", type=click.Choice(FORMATS), default="table", show_default=True)
    @click.option("--results-file", type=click.Path(dir_okay=False), default=None)
    def results_cmd(**kw: Any) -> None:
        """List and compare stored evaluations: a leaderboard of models by mCE, per dataset."""
        _results_command(**kw)

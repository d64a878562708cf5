"""CLI of the overlap study: ``shiftbench overlap run`` and ``shiftbench overlap select``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import click

from ..errors import DataError, InvalidArgumentError
from .harness import DEFAULT_THRESHOLDS
from .scores import CLEAN, STANDARD, OverlapMatrix, overlap_matrix
from .select import Selection, select_for_thresholds

__all__ = ["overlap_group", "select_cmd", "read_overlap_matrix"]


def _fmt_selections(sels: list[Selection]) -> str:
    lines = ["threshold  size  mean overlap  max overlap  #largest  benchmark"]
    for s in sels:
        names = ", ".join(n.removeprefix("noc_") for n in s.names)
        lines.append(
            f"{s.threshold:9.3f}  {s.size:4d}  {s.mean_overlap:12.3f}  {s.max_overlap:11.3f}  {s.n_largest:8d}  {names}"
        )
        if s.ties:
            lines.append(
                f"{'':9}  ties (same mean): " + " | ".join(", ".join(n.removeprefix("noc_") for n in t) for t in s.ties)
            )
        if s.excluded:
            lines.append(
                f"{'':9}  left out (undefined scores): {', '.join(n.removeprefix('noc_') for n in s.excluded)}"
            )
    return "\n".join(lines) + "\n"


def _fmt_matrix(names: list[str], rows: list[str], values: Any, fmt: str = "{:6.2f}") -> str:
    short = [n.removeprefix("noc_")[:10] for n in names]
    out = ["".ljust(22) + "".join(s.rjust(11) for s in short)]
    for r, row in zip(rows, values):
        out.append(
            r.removeprefix("noc_")[:21].ljust(22) + "".join(("n/a" if v != v else fmt.format(v)).rjust(11) for v in row)
        )
    return "\n".join(out) + "\n"


def read_overlap_matrix(path: str | Path) -> OverlapMatrix:
    """An overlap matrix from JSON (``{"names": [...], "values": [[...]]}``) or CSV (header of names, then rows)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError("matrix", str(path), "an existing .json or .csv file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"matrix file {str(p)!r} is not readable: {e}") from e
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"matrix file {str(p)!r} is not valid JSON: {e}") from e
        if isinstance(doc, dict) and "overlaps" in doc:
            doc = doc["overlaps"]
        return OverlapMatrix.from_dict(doc)
    rows = [r for r in csv.reader(text.splitlines()) if r]
    if not rows:
        raise DataError(f"matrix file {str(p)!r} is empty")
    header = [h.strip() for h in rows[0]]
    body = rows[1:]
    if header and header[0] == "" and all(len(r) == len(header) for r in body):
        header = header[1:]  # an empty corner cell: the first column holds row names (pandas' to_csv)
    if body and all(len(r) == len(header) + 1 for r in body):  # a first column of row names
        row_names = [r[0].strip() for r in body]
        if row_names != header:
            raise InvalidArgumentError(
                "matrix", f"row names {row_names}", f"the column names in the same order: {header}"
            )
        body = [r[1:] for r in body]
    try:
        vals = [[float("nan") if v.strip() in ("", "nan", "n/a") else float(v) for v in r] for r in body]
    except ValueError as e:
        raise DataError(f"matrix file {str(p)!r}: {e}") from e
    if any(len(r) != len(header) for r in vals) or len(vals) != len(header):
        raise InvalidArgumentError(
            "matrix",
            f"{len(vals)} rows of {sorted({len(r) for r in vals})} values for {len(header)} names",
            "a square matrix",
        )
    return OverlapMatrix(header, vals)


def _parse_set(values: tuple[str, ...]) -> dict[str, Any]:
    import tomllib

    out: dict[str, Any] = {}
    for item in values:
        key, eq, raw = item.partition("=")
        if not eq or "." not in key:
            raise click.BadParameter(f"{item!r}: expected section.key=value, e.g. train.epochs=2", param_hint="--set")
        try:
            out[key.strip()] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = raw
    return out


def _thresholds(spec: str | None) -> list[float]:
    if spec is None:
        return list(DEFAULT_THRESHOLDS)
    try:
        return [float(x) for x in spec.split(",") if x.strip()]
    except ValueError as e:
        raise InvalidArgumentError("thresholds", spec, "comma-separated numbers in [0, 1], e.g. 0,0.05,0.1") from e


class _OverlapGroup(click.Group):
    """``shiftbench overlap --config ...`` (options first) still runs the study: it means ``overlap run``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:
            raise click.UsageError(
                "give --config CONFIG (a study to run: `shiftbench overlap --config mnist-digits`), "
                "or a subcommand: run, calibrate, select",
                ctx=ctx,
            )
        if args[0].startswith("-") and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("overlap", cls=_OverlapGroup)
def overlap_group() -> None:
    """The corruption-overlap study: train and test it (run), build benchmarks from it (select)."""



@overlap_group.command("run")
@click.option(
    "--config",
    "config",
    required=True,
    help="Study config (TOML file) or a built-in name: mnist-digits, mnist-imagenet-c, imagenet100-resnet18, "
    "imagenet100-resnet18-ic-noc.",
)
@click.option("--set", "overrides", multiple=True, help="Override a config value: section.key=value (repeatable).")
@click.option("--heatmap/--no-heatmap", default=True, show_default=True, help="Draw <output>/overlap_heatmap.png.")
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the summary as JSON here."
)
def overlap_cmd(config: str, overrides: tuple[str, ...], heatmap: bool, json_out: str | None) -> None:
    """Train and test a corruption-overlap study, then run Algorithm 1.

    Trains a standard model, one model per corruption and one per mixture (half of
    every batch corrupted), tests each on the clean and every corrupted test set,
    stores the accuracy matrix in <output>/overlap.sqlite, and prints the overlap
    matrix, each corruption's mean overlap, Algorithm 1's benchmarks, balance and
    coverage. Interrupted studies resume. `overlap calibrate` calibrates a
    corruption's severity range.

    \b
      shiftbench overlap --config mnist-imagenet-c
      shiftbench overlap --config imagenet100-resnet18 --set data.root=/data/imagenet
      shiftbench overlap calibrate --config mnist-digits --corruption noc_rain
    """  # noqa: D301
    from ..outputs import check_output_file
    from .harness import load_config, run_study

    if json_out:  # before the study: an unwritable place fails now, not after hours of training
        check_output_file(json_out, "--json")
    cfg = load_config(config, _parse_set(overrides))
    try:
        res = run_study(cfg, log=lambda s: click.echo(s, err=True), heatmap=heatmap)
    except KeyboardInterrupt:
        click.echo(
            f"\nInterrupted. Finished epochs are checkpointed in {cfg.output}; run the same command to resume.",
            err=True,
        )
        raise
    acc = res.accuracy
    click.echo(f"Accuracy (rows: trained with; columns: tested on), store {res.store_path}")
    click.echo(_fmt_matrix(acc.tests, acc.models, acc.values, "{:6.3f}"))
    click.echo("Overlapping scores (Laugros et al., 2020, eq. 2)")
    click.echo(_fmt_matrix(res.overlaps.names, res.overlaps.names, res.overlaps.values))
    if res.overlaps.undefined:
        click.echo(
            f"Undefined (the model did not gain on its own corruption): {', '.join(res.overlaps.undefined)}\n"
        )
    mo = res.mean_overlaps()
    click.echo("Mean overlap of each corruption with the others (Laugros et al., 2021, Section 4.2; higher: more redundant)")
    for name in sorted(mo, key=lambda k: -mo[k] if mo[k] == mo[k] else 1.0):
        click.echo(f"  {name.removeprefix('noc_'):<22} {'n/a' if mo[name] != mo[name] else f'{mo[name]:.3f}'}")
    click.echo("")
    click.echo("Algorithm 1")
    click.echo(_fmt_selections(res.selections))
    click.echo("Balance (spread of the mCE of single-corruption models, CE normalised by the standard model) and")
    click.echo("coverage (other candidates overlapping some benchmark corruption by more than 0.3)")
    for row in res.analyses():
        bal = f"std {row['mce_std']:.3f}, max-min {row['mce_spread']:.3f}" if "mce_std" in row else "n/a (one corruption)"
        cov = ""
        if "covered" in row:
            n_out = len(row["covered"]) + len(row["uncovered"])
            cov = f"; covers {len(row['covered'])}/{n_out}"
            if row["uncovered"]:
                cov += " (not: " + ", ".join(u.removeprefix("noc_") for u in row["uncovered"]) + ")"
        click.echo(f"  {row['benchmark']:<24} balance {bal}{cov}")
    click.echo("")
    for mname, mc in res.mixture_coverages().items():
        if isinstance(mc, str):
            click.echo(f"Mixture {mname}: {mc}")
            continue
        click.echo(
            f"Mixture model {mname} (Laugros et al., 2020, Section 5.2, Table 1's layout; CE in % of the standard model's errors):"
        )
        click.echo(f"  {'':<22} {'standard':>9} {mname:>9}")
        click.echo(f"  {'clean error':<22} {mc.clean_error[0]:9.3f} {mc.clean_error[1]:9.3f}")
        for c, (a, b) in mc.ces.items():
            click.echo(f"  {c.removeprefix('noc_'):<22} {a:9.0f} {b:9.0f}{'' if c in mc.covered else '   not covered'}")
        click.echo(f"  {'mCE':<22} {mc.mce[0]:9.1f} {mc.mce[1]:9.1f}")
        click.echo(f"  covers {len(mc.covered)} of {len(mc.ces)}")
    if res.heatmap:
        click.echo(f"Heatmap: {res.heatmap}")
    click.echo(f"Summary: {Path(cfg.output) / 'overlap_result.json'}  ({res.seconds:.0f} s this run)")
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(res.summary(), indent=1), encoding="utf-8")

@overlap_group.command("calibrate")
@click.option("--config", "config", required=True, help="The study whose standard model and test images are used.")
@click.option("--set", "overrides", multiple=True, help="Override a config value: section.key=value (repeatable).")
@click.option("--corruption", required=True, help="A candidate corruption (e.g. noc_rain) or a user corruption.")
@click.option("--range", "search", default=None, help="Search interval 'mild,harsh' (default: the published range).")
@click.option("--targets", default="0.95,0.5", show_default=True, help="Robustness levels to find.")
@click.option("--grid", default=7, show_default=True, help="Evaluations spread over the interval before bisecting.")
@click.option("--tolerance", type=float, default=None, help="Bracket width where bisection stops.")
@click.option("--limit", type=int, default=None, help="Use at most this many test images.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where the JSON and the plot go (default: <study output>/calibration).")
def calibrate_cmd(
    config: str,
    overrides: tuple[str, ...],
    corruption: str,
    search: str | None,
    targets: str,
    grid: int,
    tolerance: float | None,
    limit: int | None,
    out_dir: str | None,
) -> None:
    """Find where the study's standard model keeps R = 0.95 and R = 0.5 under a corruption (Laugros et al., 2020, Appendix A).

    Trains the standard model first if the study has not (resumable). The search and every
    evaluation go to <out>/<corruption>.json, the plot to <out>/<corruption>.png, and the
    study's store (table overlap_calibrations).

    \b
      shiftbench overlap calibrate --config mnist-digits --corruption noc_rain
      shiftbench overlap calibrate --config mnist-digits --corruption noc_blur --range 0,1
    """  # noqa: D301
    from .calibrate import plot_calibration
    from .harness import calibrate_study_corruption, load_config

    cfg = load_config(config, _parse_set(overrides))
    rng = None
    if search is not None:
        try:
            lo, hi = (float(v) for v in search.split(","))
        except ValueError:
            raise InvalidArgumentError("range", search, "two numbers 'mild,harsh', e.g. 12,120") from None
        rng = (lo, hi)
    cal = calibrate_study_corruption(
        cfg, corruption, search=rng, targets=_thresholds(targets), grid=grid, tolerance=tolerance, limit=limit,
        log=lambda s: click.echo(s, err=True),
    )
    out = Path(out_dir) if out_dir else Path(cfg.output) / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{cal.corruption}.json").write_text(json.dumps(cal.to_dict(), indent=1), encoding="utf-8")
    try:
        png = plot_calibration(cal, out / f"{cal.corruption}.png")
    except Exception as e:  # noqa: BLE001  (matplotlib missing: the JSON is still there)
        png = None
        click.echo(f"plot skipped: {e}", err=True)
    click.echo(f"Calibration of {cal.corruption} for {cal.model} (clean accuracy {cal.clean_accuracy:.3f})")
    click.echo("  value        R      accuracy")
    for v, r, a in sorted(cal.evaluations):
        click.echo(f"  {v:10.4g}  {r:6.3f}  {'' if a is None else f'{a:.3f}'}")
    for t in cal.targets:
        v = cal.endpoints[t]
        click.echo(f"R = {t:g}: {'not reached' if v is None else f'{v:.4g}'}")
    for n in cal.notes:
        click.echo(f"note: {n}")
    click.echo(f"Saved {out / (cal.corruption + '.json')}" + (f" and {png}" if png else ""))


@overlap_group.command("select")
@click.option(
    "--matrix", type=click.Path(dir_okay=False), default=None, help="Overlap matrix: .json (names, values) or .csv."
)
@click.option(
    "--store",
    type=click.Path(dir_okay=False),
    default=None,
    help="A study's overlap.sqlite (uses its accuracy matrix).",
)
@click.option("--study", default=None, help="Study name in --store (default: the only one).")
@click.option(
    "--thresholds",
    default=None,
    help="Comma-separated, in [0, 1]. Default: Laugros et al.'s (2020) Appendix B: 0,0.025,0.05,0.1,0.2,0.35,0.5.",
)
@click.option("--names", default=None, help="Only these corruptions (comma-separated).")
@click.option(
    "--save", "save_name", default=None, help="Save the benchmark of the first threshold under this name."
)
@click.option(
    "--save-file", type=click.Path(dir_okay=False), default=None, help="Where to write it (default: <name>.json)."
)
@click.option(
    "--baseline",
    type=click.Choice(["auto", "alexnet", "standard"]),
    default="auto",
    show_default=True,
    help="CE baseline of a saved benchmark: AlexNet's published ImageNet errors (Laugros et al., 2020, Appendix A), or the "
    "errors of the study's standard model (needs --store). auto: standard with --store, else alexnet.",
)
@click.option(
    "--results-format", "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def select_cmd(
    matrix: str | None,
    store: str | None,
    study: str | None,
    thresholds: str | None,
    names: str | None,
    save_name: str | None,
    save_file: str | None,
    baseline: str,
    fmt: str,
) -> None:
    """Algorithm 1: the largest set of corruptions whose pairwise overlaps stay under each threshold.

    \b
      shiftbench select --matrix overlaps.json --thresholds 0.1
      shiftbench select --store overlap-runs/mnist-digits/overlap.sqlite --thresholds 0.1 --save mnist-noc
    """  # noqa: D301
    from .noc import benchmark_from_selection, save_benchmark
    from .store import OverlapStore

    if (matrix is None) == (store is None):
        raise click.UsageError("give exactly one of --matrix and --store")
    db = None
    acc = None
    cfg: dict[str, Any] = {}
    if matrix is not None:
        om = read_overlap_matrix(matrix)
    else:
        if not Path(str(store)).is_file():
            raise InvalidArgumentError("store", store, "an existing overlap.sqlite of a study")
        db = OverlapStore(str(store), readonly=not save_name)  # only --save writes to the store
        studies = db.studies()
        if study is None:
            if len(studies) != 1:
                raise InvalidArgumentError("study", None, f"one of {[n for _, n in studies]}")
            sid = studies[0][0]
        else:
            ids = {n: i for i, n in studies}
            if study not in ids:
                raise InvalidArgumentError("study", study, f"one of {list(ids)}")
            sid = ids[study]
        cfg = db.study_config(sid)
        tests = [CLEAN, *(cfg.get("test_corruptions") or cfg["corruptions"])]
        acc = db.accuracy_matrix(sid, [STANDARD, *cfg["corruptions"]], tests)
        om = overlap_matrix(acc, [c for c in cfg["corruptions"] if c in tests], on_undefined="nan")
    try:
        sub = [n.strip() for n in names.split(",")] if names else None
        sels = select_for_thresholds(om, _thresholds(thresholds), sub)
        if fmt == "json":
            click.echo(json.dumps({"names": om.names, "selections": [s.to_dict() for s in sels]}, indent=1))
        else:
            click.echo(_fmt_selections(sels), nl=False)
        if save_name:
            mode = baseline if baseline != "auto" else ("standard" if acc is not None else "alexnet")
            base = None
            if mode == "standard":
                if acc is None:
                    raise InvalidArgumentError(
                        "baseline", "standard", "alexnet with --matrix (the standard model's errors need --store)"
                    )
                base = {c: 1.0 - acc.get(STANDARD, c) for c in sels[0].names}
            bench = benchmark_from_selection(
                sels[0],
                save_name,
                baseline=base,
                baseline_name=f"standard model of study {cfg.get('name')!r}" if base else "custom",
            )
            p = save_benchmark(bench, save_file or f"{save_name}.json", store=db)
            click.echo(f"Saved benchmark {save_name!r} ({', '.join(bench.corruptions)}) to {p}", err=True)
            click.echo(
                f"Evaluate it with: shiftbench evaluate --benchmark imagenet-noc --corruptions {p}", err=True
            )
    finally:
        if db is not None:
            db.close()


select_cmd = click.Command(
    "select",
    callback=select_cmd.callback,
    params=select_cmd.params,
    help=(select_cmd.help or "") + "\n\nSame as `shiftbench overlap select` (kept for existing scripts).",
    hidden=True,
)
"""``shiftbench select``: the former root name of ``shiftbench overlap select``."""


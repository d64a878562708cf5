"""CLI commands of the corruption engine: ``list``, ``corrupt``, ``generate``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import DataError, InvalidArgumentError


def _split_list(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(x for x in v.replace(",", " ").split() if x)
    return out


def _nonempty(option: str, given: tuple[str, ...], parsed: list) -> list:  # type: ignore[type-arg]
    """An option given with nothing in it is an error, not the default."""
    if given and not parsed:
        raise InvalidArgumentError(option, ",".join(given), "one or more values (leave the option out for the default)")
    return parsed


def _severities(values: tuple[str, ...]) -> list[int]:
    out = []
    for v in _split_list(values):
        try:
            out.append(int(v))
        except ValueError:
            raise InvalidArgumentError("--severities", v, "integers in 1..5, e.g. --severities 1,3,5") from None
    return out


@click.group("list")
def list_cmd() -> None:
    """List registered operations."""


@list_cmd.command("corruptions")
@click.argument("pattern", required=False, default="*")
@click.option(
    "--group",
    type=click.Choice(["benchmark", "extra", "candidate"]),
    default=None,
    help="Only the 15 benchmark or the 4 extra corruptions, or the overlap study's candidates (listed only when asked).",
)
@click.option("--edition", default=None, help="Only corruptions defined for this edition (224, 299, 64, 32).")
def list_corruptions_cmd(pattern: str, group: str | None, edition: str | None) -> None:
    """List ImageNet-C corruptions (PATTERN: wildcard such as '*blur*', or noise/blur/weather/digital)."""
    from rich.console import Console
    from rich.table import Table

    from .. import get_corruption, list_corruptions
    from ..editions import get_edition

    ed = get_edition(edition).name if edition else None
    table = Table(title="ImageNet-C corruptions")
    for col in ("name", "family", "group", "random", "editions", "description"):
        table.add_column(col)
    for n in list_corruptions(pattern, group=group, edition=ed):
        c = get_corruption(n)
        table.add_row(c.name, c.family, c.group, "yes" if c.random else "no", " ".join(c.editions), c.description)
    Console().print(table)


@click.command("corrupt")
@click.argument("in_image", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("out_image", type=click.Path(path_type=Path))  # refused in one line by check_output_image
@click.option("--corruption", "-c", required=True, help="Corruption name, e.g. fog (see `shiftbench list corruptions`).")
@click.option("--severity", "-s", type=int, default=3, show_default=True, help="Severity 1..5.")
@click.option("--seed", type=int, default=0, show_default=True, help="Experiment seed (draws derive from seed and the image's pixels).")
@click.option("--edition", default=None, help="Parameter table: 224, 299, 64 or 32 (default: from the image size).")
@click.option("--preprocess/--no-preprocess", default=False, help="Apply the edition's preprocessing first (e.g. Resize 256 + CenterCrop 224).")
@click.option("--release", is_flag=True, help="Also store-and-reload as JPEG q85, as the published datasets were stored.")
def corrupt_cmd(
    in_image: Path, out_image: Path, corruption: str, severity: int, seed: int, edition: str | None, preprocess: bool, release: bool
) -> None:
    """Corrupt one image file and write the result.

    OUT_IMAGE's extension picks the format: .png, .tif/.tiff, .bmp, .webp (lossless) or .jpg/.jpeg
    (quality 95). A format that cannot hold the image as it is (RGBA as .jpg, 16-bit or float as
    .jpg) is refused, never converted; missing folders are created.
    """
    from PIL import Image

    from .. import corrupt
    from ..editions import preprocess as prep
    from ..io import load_image_rgb, wide_levels
    from ..outputs import check_output_image, corrupted_mode, save_image_atomic

    check_output_image(out_image, "OUT_IMAGE")  # extension and place, before reading anything
    try:
        with Image.open(in_image) as im:
            im.load()
            wide = wide_levels(im, repr(str(in_image)))  # 16-bit colour: its exact levels, not Pillow's high bytes
            img = Image.fromarray(wide) if wide is not None else im.copy()
    except FileNotFoundError:
        raise DataError(f"IN_IMAGE {str(in_image)!r} does not exist") from None
    except Exception as e:  # noqa: BLE001
        raise DataError(f"IN_IMAGE {str(in_image)!r} could not be read as an image: {e}") from None
    if preprocess:
        img = prep(load_image_rgb(in_image), edition or "224")
    # the format must hold the result as it is (no silent loss of alpha or depth): checked before the work
    fmt = check_output_image(out_image, "OUT_IMAGE", corrupted_mode(img.mode))
    out = corrupt(img, corruption, severity, seed=seed, edition=edition, release=release)
    save_image_atomic(out, out_image, fmt, "OUT_IMAGE")
    click.echo(f"wrote {out_image} ({corruption}, severity {severity}, seed {seed})")


@click.group("generate")
def generate_group() -> None:
    """Generate corrupted datasets on disk."""


@generate_group.command("imagenet-c")
@click.option("--src", required=True, type=click.Path(path_type=Path), help="ImageFolder of clean images, or CIFAR arrays (.npy/.npz/CIFAR python batch).")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output folder (created with its parents).")
@click.option("--edition", default="224", show_default=True, help="224, 299, 64 or 32 (32 writes the CIFAR-10-C .npy layout).")
@click.option("--corruptions", multiple=True, help="Names or wildcards, comma separated (default: all 19).")
@click.option("--severities", multiple=True, help="Comma-separated severities (default: 1,2,3,4,5).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=int, default=0, show_default=True,
              help="Worker processes, one thread each (0: as --threads says).")
@click.option("--threads", default="auto", show_default=True, metavar="N|auto",
              help="With --workers 0: this many worker processes; auto: the CPUs the machine's other running tasks "
              "leave free (shiftbench.cpus.free_cpus: all on an idle machine, 1 on a busy one).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--labels", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Labels .npy for a .npy image array.")
@click.option("--device", default="cpu", show_default=True, help="Where the corruptions run: cpu, cuda, cuda:N or mps (on CUDA the files are checked to equal the CPU's byte for byte).")
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[ADDRESS]",
    help="Run the shards as Ray tasks (pip install 'shiftbench[ray]'): ADDRESS of a running cluster (HOST:PORT, "
    "ray://HOST:PORT, or 'auto' for one started on this machine); alone: RAY_ADDRESS, else Ray on this machine. "
    "--src and --out must be on storage every node sees at the same path. Same files as without --ray.",
)
def generate_imagenet_c(
    src: Path,
    out: Path,
    edition: str,
    corruptions: tuple[str, ...],
    severities: tuple[str, ...],
    seed: int,
    workers: int,
    threads: str,
    batch_size: int,
    labels: Path | None,
    device: str,
    ray_address: str | None,
) -> None:
    """Write ImageNet-C (or Tiny/64/299/CIFAR-10-C) from clean images; resumable."""
    from ..evaluation.threads import resolve_model_threads

    n_threads = resolve_model_threads(threads)
    if workers == 0 and ray_address is None:
        workers = n_threads
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ..generate import GenerateConfig, generate

    config = GenerateConfig(
        src=str(src),
        out=str(out),
        edition=edition,
        corruptions=_nonempty("--corruptions", corruptions, _split_list(corruptions)),
        severities=_nonempty("--severities", severities, _severities(severities)) or [1, 2, 3, 4, 5],
        seed=seed,
        workers=workers,
        batch_size=batch_size,
        labels=str(labels) if labels else None,
        device=device,
        ray=ray_address,
    )
    columns = (
        TextColumn("[bold]generating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} img/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    import time

    t_start = time.perf_counter()
    lines = not sys.stderr.isatty()  # a log file: plain lines about every 10 % and at least every 30 s
    with Progress(*columns, disable=lines, transient=False) as prog:
        task = prog.add_task("gen", total=None, rate="-")
        first: dict[str, int] = {}
        mark = {"next": 0.0, "last": t_start}

        def cb(done: int, total: int) -> None:
            first.setdefault("done", done)
            now = time.perf_counter()
            dt = now - t_start
            rate = (done - first["done"]) / dt if dt > 0 else 0.0
            prog.update(task, completed=done, total=total, rate=f"{rate:.0f}")
            if lines and total and (done / total >= mark["next"] or now - mark["last"] >= 30.0 or done == total):
                eta = (total - done) / rate if rate > 0 else float("inf")
                click.echo(f"generating: {done}/{total} corrupted images ({100 * done / total:.0f} %), "
                           f"{rate:.0f} img/s, ETA {eta:.0f} s", err=True)
                mark["next"] = (int(done / total * 10) + 1) / 10
                mark["last"] = now

        try:
            report = generate(config, progress=cb)
        except KeyboardInterrupt:
            click.echo(f"\nInterrupted. Finished files are kept; rerun the same command to complete {out}.", err=True)
            raise SystemExit(130) from None
    if report.cluster:
        click.echo(f"ran on {report.cluster}", err=True)
    click.echo(
        f"{report.layout} layout in {out}: {report.written} files written, {report.already_done} corrupted images already done, "
        f"{len(report.failed)} source images failed, {report.seconds:.1f} s"
    )
    if report.failed:
        for f, why in report.failed[:20]:
            click.echo(f"  skipped {f}: {why}", err=True)
        if len(report.failed) > 20:
            click.echo(f"  ... and {len(report.failed) - 20} more (see manifest.json)", err=True)
        raise SystemExit(1)


@generate_group.command("imagenet-p")
@click.option("--src", required=True, type=click.Path(path_type=Path), help="ImageFolder of clean photos, or CIFAR arrays (.npy/.npz/CIFAR python batch) for edition 32.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output folder (created with its parents).")
@click.option("--edition", default="224", show_default=True,
              help="224 (ImageNet-P), 299, 64 (Tiny-ImageNet-P), 64x64 (ImageNet 64x64-P: photos squashed) or 32 (CIFAR-P, .npy).")
@click.option("--perturbations", multiple=True, help="Names, wildcards or test/validation/noise/temporal, comma separated (default: all 14).")
@click.option("--difficulties", multiple=True, help="Comma-separated difficulties of the noise perturbations (default: 1,2,3; temporal ones have difficulty-1 data only).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=int, default=0, show_default=True,
              help="Worker processes, one thread each (0: as --threads says).")
@click.option("--threads", default="auto", show_default=True, metavar="N|auto",
              help="With --workers 0: this many worker processes; auto: the CPUs the machine's other running tasks "
              "leave free (shiftbench.cpus.free_cpus: all on an idle machine, 1 on a busy one; measured in "
              "perf/generate_workers.py).")
@click.option("--batch-size", type=int, default=4, show_default=True, help="Photos per task.")
@click.option("--preset", default="veryslow", show_default=True, help="x264 preset (the reference's is veryslow; faster ones change the compressed pixels).")
@click.option("--labels", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Labels .npy for a .npy image array.")
@click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Run the tasks on Ray (pip install 'shiftbench[ray]'), as for generate imagenet-c. Same files as without --ray.")
def generate_imagenet_p_cmd(
    src: Path,
    out: Path,
    edition: str,
    perturbations: tuple[str, ...],
    difficulties: tuple[str, ...],
    seed: int,
    workers: int,
    threads: str,
    batch_size: int,
    preset: str,
    labels: Path | None,
    ray_address: str | None,
) -> None:
    """Write ImageNet-P (or Tiny / 64x64 / 299 / CIFAR-P) from clean photos; resumable.

    MP4 per photo and sequence in <out>/<perturbation>[_<d>]/<class>/ as the reference scripts
    (Hendrycks & Dietterich, 2019) wrote them; CIFAR-P as <out>/<perturbation>[_<d>].npy.
    """
    from ..evaluation.threads import resolve_model_threads
    from ..perturbations.generate import PGenerateConfig, generate_imagenet_p

    n_threads = resolve_model_threads(threads)
    if workers == 0 and ray_address is None:
        workers = n_threads
    diffs = []
    for item in _split_list(difficulties):
        try:
            diffs.append(int(item))
        except ValueError:
            raise InvalidArgumentError("--difficulties", item, "integers in 1..3, comma separated") from None
    config = PGenerateConfig(
        src=str(src), out=str(out), edition=edition,
        perturbations=_nonempty("--perturbations", perturbations, _split_list(perturbations)),
        difficulties=_nonempty("--difficulties", difficulties, diffs) or [1, 2, 3],
        seed=seed, workers=workers, batch_size=batch_size, preset=preset,
        labels=str(labels) if labels else None, ray=ray_address,
    )
    try:
        report = generate_imagenet_p(config)
    except KeyboardInterrupt:
        click.echo(f"\nInterrupted. Finished files are kept; rerun the same command to complete {out}.", err=True)
        raise SystemExit(130) from None
    if report.cluster:
        click.echo(f"ran on {report.cluster}", err=True)
    click.echo(
        f"{report.layout} layout in {out}: {report.written} files written, {report.already_done} videos already done, "
        f"{len(report.failed)} source images failed, {report.seconds:.1f} s"
    )
    if report.failed:
        for f, why in report.failed[:20]:
            click.echo(f"  skipped {f}: {why}", err=True)
        raise SystemExit(1)

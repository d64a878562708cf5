"""``shiftbench report``: a self-contained HTML report of every stored evaluation, with the papers' figures."""

from __future__ import annotations

import click

from ..evaluation.store import DEFAULT_STORE

__all__ = ["report_cmd"]


@click.command("report")
@click.option("--store", type=click.Path(dir_okay=False), default=str(DEFAULT_STORE), show_default=True,
              help="The results store (shiftbench evaluate --store).")
@click.option("--out", type=click.Path(dir_okay=False), default="report.html", show_default=True,
              help="The HTML file to write (one file, opens offline).")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False), default=None,
              help="Also write every figure as PNG and SVG into this folder.")
@click.option("--study", type=click.Path(dir_okay=False), default=None,
              help="An overlap-study store (shiftbench overlap run): adds its overlap heatmaps.")
@click.option("--gallery-image", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Photo for the corruption gallery (default: the first foolbox demo image, if installed).")
@click.option("--no-gallery", is_flag=True, help="Leave the corruption gallery out (faster).")
def report_cmd(store: str, out: str, figures_dir: str | None, study: str | None, gallery_image: str | None,
               no_gallery: bool) -> None:
    """Write one self-contained HTML report: tables, the papers' figures with your models, a corruption gallery."""
    from ..report import build_report

    r = build_report(store, out, figures_dir=figures_dir, study=study, gallery_image=gallery_image,
                     gallery=not no_gallery)
    click.echo(f"Wrote {r.html} ({len(r.benchmarks)} benchmark(s): {', '.join(r.benchmarks)}; {r.n_figures} figure(s))",
               err=True)
    if r.figure_files:
        click.echo(f"Wrote {len(r.figure_files)} figure file(s) to {figures_dir}", err=True)

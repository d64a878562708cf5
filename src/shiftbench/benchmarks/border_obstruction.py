"""Border and obstruction CE (Laugros, Caplier & Ospici, 2021, Section 4.3 and Table 1).

The two corruptions no ImageNet-C corruption overlaps: a band of 10 to 45 px at the image's edge, and a square of
50 to 120 px at a random position, each filled with one gray value drawn uniformly from [0, 1], one draw of the
size per image (the paper's protocol: no severity levels). Conditions: the clean images, border, obstruction.
Score: error and CE, the error divided by a baseline's error on the same corruption (``--baseline``: ``alexnet``,
the default, takes AlexNet's published errors on the nearest published corruptions, those of Laugros, Caplier &
Ospici, 2020, Appendix A, since the 2021 paper publishes none; a model name or ``eval:<id>`` takes a stored
evaluation of this benchmark, e.g. AlexNet measured on the same images, the paper's own normalisation; a ``.json``
file gives ``{"border": error, "obstruction": error}``). Records and store as ImageNet-NOC's (one stored
``imagenet-noc`` evaluation whose options name this benchmark).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError, InvalidArgumentError
from ..evaluation.protocol import Section, Settings, option
from ..evaluation.store import records_to_csv
from ..overlap.noc import BORDER_OBSTRUCTION, BORDER_OBSTRUCTION_NAME, NocBenchmark, border_obstruction
from . import register_benchmark
from .imagenet_noc import ImageNetNOC, stored_records
from .papers import LAUGROS2021

__all__ = ["BorderObstruction", "BorderSettings", "resolve_baseline"]


@dataclass(frozen=True)
class BorderSettings(Settings):
    """The options of the border-and-obstruction benchmark."""

    data: str | Path | None = option(None, metavar="PATH", help="Clean ImageNet photos (ImageFolder: "
                                     "<data>/<wnid>/<image>); default: the 20 demo images.")
    seed: int = option(0, minimum=0, help="Seed of the on-the-fly corruptions (one size per image from the range).")
    classes: str | Sequence[str] = option(
        "auto", help="Label space: auto, model, data, or a file of class ids (wnids) to restrict to.")
    baseline: str = option(
        "alexnet", help="CE baseline: alexnet (the nearest published AlexNet errors, Laugros, Caplier & Ospici, 2020), "
        "a stored model or eval:<id> of this benchmark, or a .json file {\"border\": error, \"obstruction\": error}.")


def resolve_baseline(spec: str | None, store: str | Path) -> NocBenchmark:
    """The benchmark with the CE baseline ``spec`` names (see the module docstring)."""
    s = "alexnet" if spec in (None, "") else str(spec).strip()
    if s.lower() == "alexnet":
        return border_obstruction()
    if s.lower() == "none":
        raise InvalidArgumentError("baseline", s, "a baseline for the CE: alexnet, a stored model, eval:<id> or a .json file")
    p = Path(s).expanduser()
    if s.endswith(".json") or p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"--baseline {s!r}: not a readable JSON file ({e})") from None
        if not isinstance(doc, dict) or not all(isinstance(doc.get(c), (int, float)) for c in BORDER_OBSTRUCTION):
            raise InvalidArgumentError("baseline", s, 'a JSON object {"border": error, "obstruction": error}')
        return border_obstruction({c: float(doc[c]) for c in BORDER_OBSTRUCTION}, p.stem)
    if not Path(store).is_file():
        raise InvalidArgumentError("baseline", s, "alexnet, a .json file, or a model / eval:<id> with a stored evaluation "
                                   f"of {BORDER_OBSTRUCTION_NAME} (the store does not exist yet)")
    records = [r for r in stored_records(Path(store)) if r["benchmark"] == BORDER_OBSTRUCTION_NAME]
    if s.startswith("eval:"):
        chosen = [r for r in records if str(r["evaluation"]) == s[5:]]
    else:
        chosen = [r for r in records if r["model"] == s]
    chosen = [r for r in chosen if all(c in r["errors"] for c in BORDER_OBSTRUCTION)]
    if not chosen:
        known = sorted({r["model"] for r in records}) + [f"eval:{r['evaluation']}" for r in records]
        raise InvalidArgumentError("baseline", s, f"alexnet, a .json file, or a stored {BORDER_OBSTRUCTION_NAME} "
                                   f"evaluation: {', '.join(known) or 'none stored'}")
    r = chosen[-1]
    return border_obstruction({c: r["errors"][c] for c in BORDER_OBSTRUCTION}, f"{r['model']} #{r['evaluation']}")


@register_benchmark
class BorderObstruction(ImageNetNOC):
    name = BORDER_OBSTRUCTION_NAME
    title = "Border and obstruction (Laugros, Caplier & Ospici, 2021, Table 1)"
    measures = "Top-1 error and CE under two corruptions that no ImageNet-C corruption overlaps."
    headline = ("clean_error", "mce")
    Settings = BorderSettings  # type: ignore[assignment]
    conditions = "clean, border (10-45 px band), obstruction (50-120 px square), one size drawn per image"
    sources = ("on the fly from clean photos (--data; default: the 20 demo images)",)
    records = "per image and condition: whether the top-1 class is right"
    full_set = ("the 50,000 ImageNet validation images, each corruption (Laugros, Caplier & Ospici, 2021, compare "
                "their CE with ImageNet-C's)")
    paper = LAUGROS2021
    refusals = {
        "severities": "its corruptions have no severity levels (one value per image from the whole range)",
        "edition": "it is defined at 224 px only",
    }

    def selection(self, s: Any, store: Path | None) -> tuple[NocBenchmark, list[str]]:
        bench = resolve_baseline(s.baseline, store if store is not None else Path("."))
        return bench, list(bench.corruptions)

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return []

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        """This benchmark's stored evaluations (also listed with ImageNet-NOC's), CE against ``baseline``."""
        recs = [r for r in stored_records(store, model) if r["benchmark"] == BORDER_OBSTRUCTION_NAME
                and (evaluation is None or r["evaluation"] == evaluation)]
        if not recs:
            return None
        try:
            base = resolve_baseline(baseline, store).baseline
        except InvalidArgumentError:
            base = border_obstruction().baseline
        for r in recs:
            r["ce"] = {c: r["errors"][c] / base.errors[c] for c in BORDER_OBSTRUCTION if c in r["errors"]}
            r["mce"] = sum(r["ce"].values()) / len(r["ce"]) if len(r["ce"]) == len(BORDER_OBSTRUCTION) else None
            r["baseline"] = base.name
        flat = [{k: v for k, v in r.items() if k not in ("errors", "ce")}
                | {f"error_{c}": r["errors"].get(c) for c in BORDER_OBSTRUCTION}
                | {f"ce_{c}": r["ce"].get(c) for c in BORDER_OBSTRUCTION} for r in recs]
        return Section("border_obstruction", recs, lambda: records_to_csv(flat), lambda console: _render(recs, console))


def _render(recs: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

    t = Table(title=f"{BorderObstruction.title}: stored (%)", title_justify="left", header_style="bold")
    for col in ("Model", "Images", "Clean error", "Border error", "Obstruction error", "Border CE", "Obstruction CE", "Baseline"):
        t.add_column(col, justify="left" if col in ("Model", "Baseline") else "right")
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
    for r in recs:
        t.add_row(r["label"], str(r["images"]), pct(r["clean_error"]), pct(r["errors"].get("border")),
                  pct(r["errors"].get("obstruction")), pct(r["ce"].get("border")), pct(r["ce"].get("obstruction")),
                  r["baseline"])
    console.print(t)

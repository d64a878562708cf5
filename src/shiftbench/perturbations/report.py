"""ImageNet-P reports: a table per difficulty (FR and T5D normalised by AlexNet, mFR, mT5D, and the
unnormalised flip probabilities and top-5 distances), JSON and CSV records, and the stored leaderboards.

The benchmark itself (options, evaluation, results listing) is :mod:`shiftbench.benchmarks.imagenet_p`.
"""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..evaluation.store import ResultsStore
from ._spec import TEST_PERTURBATIONS, get_perturbation
from .metrics import alexnet_p_baseline
from .pipeline import (
    BENCHMARK,
    PEvaluationResult,
    scores_from_store,
    stored_p_baseline,
)
from .scores import SequenceScores

__all__ = [
    "result_notes",
    "result_json",
    "result_records",
    "render_result",
    "results_section",
    "render_results_section",
]


SHORT_NAMES: dict[str, str] = {
    "gaussian_noise": "Gauss.",
    "shot_noise": "Shot",
    "motion_blur": "Motion",
    "zoom_blur": "Zoom",
    "snow": "Snow",
    "brightness": "Bright",
    "translate": "Transl.",
    "rotate": "Rotate",
    "tilt": "Tilt",
    "scale": "Scale",
    "speckle_noise": "Speckle",
    "gaussian_blur": "G.Blur",
    "spatter": "Spatter",
    "shear": "Shear",
}
"""Column titles after Tables 3 and 4 of the ImageNet-C/P paper (validation perturbations added)."""

UNITS = (
    "fp and mean_fp are flip probabilities (fractions); ut5d is the mean top-5 distance (0..15); fr, t5d, mfr and "
    "mt5d are ratios to the baseline (1.0 = the baseline; the table prints them x 100)"
)


# -- reports -----------------------------------------------------------------------------------------


def _pct(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f}"


def _num(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def result_notes(r: PEvaluationResult) -> list[str]:
    n = r.n_videos
    notes = [
        f"Model {r.model} ({r.model_checksum[:19]}...) on {r.data}; label space {r.label_space}.",
    ]
    if r.demo:
        notes.append(
            f"These {n} images (ImageNet validation photos shipped inside the foolbox wheel) demonstrate the pipeline; "
            "they are no benchmark. Published ImageNet-P numbers use the 50 000 released videos per perturbation."
        )
    elif 0 < n < 1000:
        notes.append(
            f"Only {n} videos per perturbation: flip probabilities this small carry large relative sampling errors "
            "(compare models on the same videos only)."
        )
    if r.on_the_fly:
        notes.append(
            f"Sequences generated on the fly (seed {r.seed}, edition {r.edition}); published ImageNet-P numbers come "
            "from the released H.264 videos, whose compression changes the frames slightly."
        )
    notes.append(
        "FP: flip probability (%): noise sequences compare every frame with the clean frame 0, the others "
        "neighbouring frames (difficulty d: frames d apart; noise difficulties 2, 3: stronger noise). uT5D: mean "
        "top-5 distance (0..15). FR = FP / FP of the baseline, T5D = uT5D / uT5D of the baseline; mFR and mT5D "
        "average them over the 10 test perturbations (the validation ones are shown apart)."
    )
    if r.baseline:
        notes.append(f"Baseline: {r.baseline} ({r.baseline_source})." if r.baseline_source else f"Baseline: {r.baseline}.")
    elif not any("not normalised" in n for n in r.notes):
        notes.append("Baseline: none (FR, T5D, mFR and mT5D need one).")
    notes += r.notes
    notes.append(f"Stored as evaluation {r.evaluation_id} in {r.store_path} (`shiftbench results` lists all).")
    return notes


def _score_fields(r: PEvaluationResult, name: str, d: int, sc: SequenceScores) -> dict[str, Any]:
    """The scores of one (perturbation, difficulty) as the CSV records and the JSON give them."""
    return {
        "split": get_perturbation(name).split,
        "videos": int(sc.top5.shape[0]),
        "skipped": r.skipped.get((name, d), 0),
        "fp": sc.fp,
        "ut5d": sc.ut5d,
        "fr": sc.fr,
        "t5d": sc.t5d,
        "frame_accuracy": sc.frame_accuracy,
    }


def result_records(r: PEvaluationResult) -> list[dict[str, Any]]:
    """One flat record per (difficulty, perturbation), plus one ``mean (test)`` record per difficulty."""
    out: list[dict[str, Any]] = []
    base = {
        "model": r.model,
        "model_checksum": r.model_checksum,
        "evaluation": r.evaluation_id,
        "benchmark": BENCHMARK,
        "data": r.data,
        "edition": r.edition,
        "seed": r.seed,
        "baseline": r.baseline or None,
    }
    for d in r.difficulties:
        for name in r.perturbations:
            sc = r.scores.get((name, d))
            if sc is None:
                continue
            out.append(
                {**base, "difficulty": d, "perturbation": name, **_score_fields(r, name, d, sc)}
            )
        s = r.summaries.get(d)
        if s is not None and s.perturbations:
            out.append(
                {
                    **base,
                    "difficulty": d,
                    "perturbation": "mean (test)",
                    "split": "test",
                    "videos": None,
                    "skipped": None,
                    "fp": s.mean_fp,
                    "ut5d": None,
                    "fr": s.mfr,
                    "t5d": s.mt5d,
                    "frame_accuracy": None,
                }
            )
    return out


def result_json(r: PEvaluationResult, notes: list[str]) -> str:
    """The evaluation as JSON text: settings, scores per difficulty and perturbation, runs and notes."""
    doc = {
        "units": UNITS,
        "benchmark": BENCHMARK,
        "model": r.model,
        "model_checksum": r.model_checksum,
        "evaluation": r.evaluation_id,
        "store": str(r.store_path),
        "data": r.data,
        "settings": {
            "edition": r.edition,
            "seed": r.seed,
            "perturbations": r.perturbations,
            "difficulties": r.difficulties,
            "label_space": r.label_space,
            "on_the_fly": r.on_the_fly,
        },
        "baseline": r.baseline or None,
        "baseline_source": r.baseline_source or None,
        "n_videos": r.n_videos,
        "difficulties": {
            str(d): {
                "mfr": r.summaries[d].mfr,
                "mt5d": r.summaries[d].mt5d,
                "mean_fp": r.summaries[d].mean_fp,
                "test_perturbations_scored": list(r.summaries[d].perturbations),
                "perturbations": {
                    name: _score_fields(r, name, d, sc)
                    for name in r.perturbations
                    if (sc := r.scores.get((name, d))) is not None
                },
            }
            for d in r.difficulties
        },
        "runs": [
            {
                "run": x.id,
                "perturbation": x.condition,
                "level": x.level,
                "frames": x.frames,
                "status": x.status,
                "n_expected": x.n_expected,
                "n_scored": x.n_predicted,
                "n_skipped": x.n_skipped,
            }
            for x in r.runs
        ],
        "notes": notes,
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def render_result(r: PEvaluationResult, console: Console, *, details: bool = True) -> None:
    """One table per difficulty: FR, T5D (with mFR / mT5D), FP, uT5D, frame accuracy; validation columns apart."""
    cols = [n for n in r.perturbations if n in TEST_PERTURBATIONS] + [
        n for n in r.perturbations if n not in TEST_PERTURBATIONS
    ]
    alex = alexnet_p_baseline()
    for d in r.difficulties:
        s = r.summaries[d]
        t = Table(
            title=f"ImageNet-P (edition {r.edition}), difficulty {d}: {r.model}, {r.n_videos} videos per perturbation",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            header_style="bold",
        )
        t.add_column("")
        t.add_column("mean", justify="right", style="bold")
        for n in cols:
            split = "" if n in TEST_PERTURBATIONS else "\n(val.)"
            t.add_column(SHORT_NAMES.get(n, n) + split, justify="right")

        def row(label: str, mean: str, cell: Any) -> None:
            t.add_row(label, mean, *[cell(r.scores.get((n, d))) for n in cols])  # noqa: B023 (used within this iteration)

        row("FR (%)", _pct(s.mfr), lambda sc: "–" if sc is None else _pct(sc.fr))
        row("T5D (%)", _pct(s.mt5d), lambda sc: "–" if sc is None else _pct(sc.t5d))
        row("FP (%)", _pct(s.mean_fp, 2), lambda sc: "–" if sc is None else _pct(sc.fp, 2))
        ut_test = [r.scores[(n, d)].ut5d for n in s.perturbations if (n, d) in r.scores]
        row("uT5D", _num(sum(ut_test) / len(ut_test)) if ut_test else "–", lambda sc: "–" if sc is None else _num(sc.ut5d))
        if any(sc.frame_accuracy is not None for (n, dd), sc in r.scores.items() if dd == d):
            row("frame acc. (%)", "", lambda sc: "–" if sc is None or sc.frame_accuracy is None else _pct(sc.frame_accuracy))
        if details and r.baseline == "AlexNet" and d == alex.difficulty and r.edition == alex.edition:
            t.add_row(
                "AlexNet FP (%)", "", *[_num(100 * alex.fp[n]) if n in alex.fp else "–" for n in cols], style="dim"
            )
            t.add_row("AlexNet uT5D", "", *[_num(alex.ut5d[n]) if n in alex.ut5d else "–" for n in cols], style="dim")
        console.print(t)
        if s.mfr is None and s.perturbations:
            missing = [n for n in TEST_PERTURBATIONS if n not in s.perturbations]
            why = (
                f"missing {', '.join(missing)}"
                if missing
                else "no baseline for this edition and difficulty"
            )
            console.print(f"  mFR / mT5D undefined at difficulty {d}: {why}; 'mean' of FP is over the test perturbations scored.", highlight=False)


# -- shiftbench results ------------------------------------------------------------------------------


def results_section(db: ResultsStore, evaluations: list[Any], baseline: str) -> list[dict[str, Any]]:
    """Leaderboard records of stored ImageNet-P evaluations (difficulty 1; mFR / mT5D where defined)."""
    out: list[dict[str, Any]] = []
    for e in evaluations:
        norm: Any = False
        why = ""
        b = baseline.strip().lower()
        if b == "alexnet":
            a = alexnet_p_baseline()
            norm = {a.difficulty: a} if e.edition == a.edition else False
            why = "" if norm else f"no AlexNet numbers for edition {e.edition}"
        elif b != "none":
            try:
                norm = stored_p_baseline(db, baseline, edition=e.edition)
            except Exception as exc:  # noqa: BLE001 - reported per row, the leaderboard still prints
                norm, why = False, str(exc)
        levels = sorted({r.level for r in db.p_runs(e.id)}) or [1]
        scores, summaries, _ = scores_from_store(db, e.id, levels, edition=e.edition, baseline=norm)
        runs = db.p_runs(e.id)
        s = summaries.get(1)
        rec: dict[str, Any] = {
            "label": f"{e.model} #{e.id}",
            "evaluation": e.id,
            "model": e.model,
            "benchmark": e.benchmark,
            "edition": e.edition,
            "data": f"{e.source_kind} {e.source}",
            "seed": e.seed if e.seed >= 0 else None,
            "videos": max((r.n_predicted for r in runs), default=0),
            "complete_runs": sum(r.status == "complete" for r in runs),
            "runs": len(runs),
            "mfr": None if s is None else s.mfr,
            "mt5d": None if s is None else s.mt5d,
            "mean_fp": None if s is None else s.mean_fp,
            "test_perturbations": 0 if s is None else len(s.perturbations),
            "no_baseline_reason": why or None,
        }
        for name in TEST_PERTURBATIONS:
            sc = scores.get((name, 1))
            rec[f"fr_{name}"] = None if sc is None else sc.fr
            rec[f"fp_{name}"] = None if sc is None else sc.fp
        out.append(rec)
    return out


def render_results_section(records: list[dict[str, Any]], console: Console) -> None:
    """Print ImageNet-P leaderboards (by mFR), one per edition and data."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in records:
        groups.setdefault((rec["edition"], rec["data"]), []).append(rec)
    for (edition, data), recs in groups.items():
        recs.sort(key=lambda x: (x["mfr"] is None, x["mfr"] or 0.0, x["mean_fp"] or 0.0))
        t = Table(
            title=f"Leaderboard by mFR: imagenet-p, edition {edition}, {data} (difficulty 1)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            header_style="bold",
        )
        for c in ("Model", "Videos", "mFR", "mT5D", "mean FP (%)", *[SHORT_NAMES[n] for n in TEST_PERTURBATIONS]):
            t.add_column(c, justify="left" if c == "Model" else "right")
        for rec in recs:
            t.add_row(
                rec["label"],
                str(rec["videos"]),
                _pct(rec["mfr"]),
                _pct(rec["mt5d"]),
                _pct(rec["mean_fp"], 2),
                *[_pct(rec[f"fr_{n}"]) if rec[f"fr_{n}"] is not None else "–" for n in TEST_PERTURBATIONS],
            )
        console.print(t)
        console.print(
            "• Columns per perturbation: FR (%) at difficulty 1; mFR / mT5D need all 10 test perturbations and a "
            "baseline.",
            highlight=False,
        )
        for rec in recs:
            bits = []
            if rec["complete_runs"] < rec["runs"]:
                bits.append(f"{rec['runs'] - rec['complete_runs']} incomplete run(s) left out")
            if rec["no_baseline_reason"]:
                bits.append(f"baseline: {rec['no_baseline_reason']}")
            if bits:
                console.print(f"• {rec['label']}: " + "; ".join(bits), highlight=False)

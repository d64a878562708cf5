"""The shared evaluation loop (run_conditions): every pending image once per condition, checked logits, finish/fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.evaluation.data import CLEAN, Condition, ImageFolderSource, WorkBatch
from shiftbench.evaluation.errors import ModelOutputError
from shiftbench.evaluation.models import Classifier, imagenet_wnids, resolve_label_space
from shiftbench.evaluation.runner import Work, run_conditions

from ._eval_toys import RAW, image_folder, toy_classifier, truncated_jpeg


class RecordingSink:
    def __init__(self) -> None:
        self.rows: list[tuple[Condition, str, int, int | None]] = []
        self.skipped: list[tuple[Condition, str]] = []
        self.finished: list[Condition] = []
        self.failed: list[tuple[Condition, str]] = []

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> int:
        top1 = None if logits is None else logits.argmax(1).tolist()
        for j, key in enumerate(batch.keys):
            self.rows.append((condition, key, int(labels[j]), None if top1 is None else top1[j]))
        self.skipped += [(condition, k) for k, _ in batch.skipped]
        return len(batch.keys)

    def finish(self, conditions: list[Condition]) -> None:
        self.finished += conditions

    def fail(self, conditions: list[Condition], reason: str) -> None:
        self.failed += [(c, reason) for c in conditions]


class Progress:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.labels: set[str] = set()

    def start(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, n: int, description: str) -> None:
        self.done += n
        self.labels.add(description)

    def stop(self) -> None:
        pass


@pytest.mark.parametrize("prefetch", [False, True])
def test_each_pending_image_is_scored_once_per_condition(tmp_path: Path, prefetch: bool) -> None:
    data = image_folder(tmp_path / "data", n_per_class=3)
    wnid = sorted(p.name for p in data.iterdir())[0]
    truncated_jpeg(data / wnid / "zz_truncated.JPEG")
    src = ImageFolderSource(data)
    clf = toy_classifier()
    space = resolve_label_space(clf.classes, src.classes, "auto", default="model")
    lmap = np.array([space.classes.index(c) for c in src.classes])
    keys = {it.key for it in src.items(CLEAN)}
    done_already = sorted(keys)[:2]
    pending = {CLEAN: keys - set(done_already), ("contrast", 2): set(keys), ("gaussian_noise", 1): set()}
    sink, progress = RecordingSink(), Progress()
    n = run_conditions(
        clf, space, [Work(src, lmap, pending)], sink, batch_size=2, seed=3, progress=progress, prefetch=prefetch
    )
    bad = f"{wnid}/zz_truncated.JPEG"
    assert n == len(sink.rows) == (len(keys) - 2 - 1) + (len(keys) - 1)
    for cond in (CLEAN, ("contrast", 2)):
        written = sorted(k for c, k, _, _ in sink.rows if c == cond)
        assert written == sorted(pending[cond] - {bad})  # each once
    assert sorted(sink.skipped) == sorted([(CLEAN, bad), (("contrast", 2), bad)])
    assert sink.finished == [CLEAN, ("contrast", 2)] and not sink.failed
    assert progress.total == progress.done == len(pending[CLEAN]) + len(pending[("contrast", 2)])
    assert progress.labels == {"clean", "contrast s2"}
    # labels are mapped into the label space; the prediction is the model's own on the corrupted batch
    label_of = {it.key: int(lmap[it.label]) for it in src.items(CLEAN)}
    assert all(lab == label_of[k] for _, k, lab, _ in sink.rows)
    again = RecordingSink()
    run_conditions(clf, space, [Work(src, lmap, {("contrast", 2): set(keys)})], again, batch_size=5, seed=3)
    assert sorted(again.rows) == sorted(r for r in sink.rows if r[0] == ("contrast", 2))


class NaNNet(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], 1000)
        out[-1, 0] = float("nan")
        return out


def test_bad_logits_fail_every_condition_and_raise(tmp_path: Path) -> None:
    src = ImageFolderSource(image_folder(tmp_path / "data"))
    clf = Classifier(NaNNet(), name="nan", transform=RAW, classes=imagenet_wnids())
    space = resolve_label_space(clf.classes, src.classes, "auto", default="model")
    lmap = np.array([space.classes.index(c) for c in src.classes])
    keys = {it.key for it in src.items(CLEAN)}
    sink = RecordingSink()
    with pytest.raises(ModelOutputError, match="nan"):
        run_conditions(clf, space, [Work(src, lmap, {CLEAN: keys, ("contrast", 1): keys})], sink, batch_size=8, seed=0)
    assert not sink.rows and not sink.finished
    assert [c for c, _ in sink.failed] == [CLEAN, ("contrast", 1)]

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


class FrameSource(ImageFolderSource):
    """Each photo as an item of ``t`` frames (the photo, brightened a little more each frame); -1 labels: unknown."""

    def __init__(self, root: Path, t: int, known_labels: bool) -> None:
        super().__init__(root, edition="224")
        self.t, self.known = t, known_labels

    def batches(self, pending, *, batch_size, seed, release, stop=None):  # type: ignore[no-untyped-def]
        for cond, keys in pending.items():
            rows: list[tuple[str, int, int, torch.Tensor]] = []
            for wb in super().batches({CLEAN: keys}, batch_size=64, seed=seed, release=release, stop=stop):
                for k, lab, x in zip(wb.keys, wb.labels.tolist(), wb.images, strict=True):
                    rows += [(k, lab if self.known else -1, f, (x.int() + 20 * f).clamp(0, 255).to(torch.uint8))
                             for f in range(self.t)]  # fmt: skip
            for a in range(0, len(rows), batch_size):
                part = rows[a : a + batch_size]
                yield WorkBatch(cond, [r[0] for r in part], torch.tensor([r[1] for r in part]),
                                torch.stack([r[3] for r in part]), frames=[r[2] for r in part])  # fmt: skip


@pytest.mark.parametrize("known_labels", [True, False])
def test_items_of_several_frames_go_through_the_same_loop(tmp_path: Path, known_labels: bool) -> None:
    """Frames of several items share a batch; each row names its item and frame; unknown labels stay -1."""
    data = image_folder(tmp_path / "data", n_per_class=2)
    src = FrameSource(data, t=3, known_labels=known_labels)
    clf = toy_classifier()
    space = resolve_label_space(clf.classes, src.classes)
    lmap = np.array([space.classes.index(c) for c in src.classes])
    keys = {it.key for it in src.items(CLEAN)}
    frames: list[tuple[str, int]] = []

    class FrameSink(RecordingSink):
        def write(self, condition, batch, labels, logits):  # type: ignore[no-untyped-def]
            assert batch.frames is not None and len(batch.frames) == len(batch.keys) <= 5
            frames.extend(zip(batch.keys, batch.frames, strict=True))
            return super().write(condition, batch, labels, logits)

    sink, progress = FrameSink(), Progress()
    cond = ("brighter", 1)
    run_conditions(clf, space, [Work(src, lmap, {cond: keys}, {cond: 3})], sink, batch_size=5, seed=0,
                   progress=progress)  # fmt: skip
    assert sorted(frames) == sorted((k, f) for k in keys for f in range(3))  # every frame once
    assert progress.total == progress.done == 3 * len(keys)  # progress in frames
    by_key = {k: lab for _, k, lab, _ in sink.rows}
    want = {it.key: int(lmap[it.label]) if known_labels else -1 for it in src.items(CLEAN)}
    assert by_key == want and sink.finished == [cond]
    # the same frames scored one by one give the same top-1 (the loop adds nothing to the logits)
    x = next(iter(FrameSource(data, 3, known_labels).batches({cond: keys}, batch_size=1, seed=0, release=False)))
    assert sink.rows[0][3] == int(space.restrict(clf.logits(x.images)).argmax(1)[0])

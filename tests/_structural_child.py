"""Child process of the kill -9 resume test: trains one recipe for two epochs on tiny data.

Usage: python _structural_child.py RECIPE OUTPUT [--pause]
With --pause it stops in the middle of epoch 2 (after epoch 1's checkpoint), writes
OUTPUT/paused and sleeps, for the parent to kill it with SIGKILL.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

from shiftbench.structural import LabelledImages
from shiftbench.training.models import SmallCNN
from shiftbench.training.recipes import finetune_classifier, get_recipe, train_classifier


def tiny() -> LabelledImages:
    rng = np.random.default_rng(0)
    y = np.arange(40) % 4
    x = rng.integers(0, 120, (40, 32, 32, 3), dtype=np.uint8)
    for c in range(4):
        x[y == c, 8 * c : 8 * c + 8, :, c % 3] = 250
    return LabelledImages("tiny", x, y.astype(np.int64), ("a", "b", "c", "d"), np.array([f"s{i % 8}" for i in range(40)]))


def main() -> None:
    torch.set_num_threads(1)
    name, out = sys.argv[1], Path(sys.argv[2])
    pause = "--pause" in sys.argv

    def on_step(epoch: int, step: int, steps: int) -> None:
        if pause and epoch == 1 and step == 2:
            (out / "paused").write_text("mid-epoch 2")
            time.sleep(600)

    crop = {"crop_size": 24} if get_recipe(name).recipe.crop_size else {}  # random crops of the 32 px stand-ins
    spec = get_recipe(name, epochs=2, batch_size=8, image_size=32, **crop)
    if spec.finetune:
        torch.manual_seed(123)
        net = SmallCNN(3, 10, width=8)  # stands in for a pretrained ImageNet classifier
        finetune_classifier(net, tiny(), spec, out, head="head", on_step=on_step, run_name="run")
    else:
        train_classifier(tiny(), spec, out, on_step=on_step, run_name="run")
    (out / "done").write_text("ok")


if __name__ == "__main__":
    main()

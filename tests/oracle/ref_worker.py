"""Runs inside the peers environment (reference imagenet-c 0.0.3 and its old stack).

Usage: python ref_worker.py IN.npz OUT.npz

IN holds ``images`` (N x H x W x 3 uint8), ``seeds`` (N), ``severities`` (N) and
``name``. For every image the global NumPy RNG is seeded with its seed and the
reference ``imagenet_c.corrupt`` is called, so the random draws are those of
``np.random.RandomState(seed)`` in the reference's call order.

scikit-image >= 0.19 draws impulse noise from ``np.random.default_rng(None)``
(OS entropy); it is pointed at the global RandomState so that it is seeded too.
"""

import sys
import time
import warnings

import numpy as np

warnings.simplefilter("ignore")
np.random.default_rng = lambda seed=None: np.random.mtrand._rand  # noqa: E731

from imagenet_c import corrupt  # noqa: E402


def main() -> None:
    data = np.load(sys.argv[1])
    images, seeds, sevs = data["images"], data["seeds"], data["severities"]
    name = str(data["name"])
    out = np.empty_like(images)
    t0 = time.perf_counter()
    for i in range(len(images)):
        np.random.seed(int(seeds[i]))
        out[i] = corrupt(images[i], severity=int(sevs[i]), corruption_name=name)
    np.savez(sys.argv[2], out=out, seconds=time.perf_counter() - t0)


if __name__ == "__main__":
    main()

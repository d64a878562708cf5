"""Reference-oracle harness: the reference ImageNet-C code, run with known seeds.

The reference (PyPI ``imagenet-c`` 0.0.3) needs an old stack (NumPy < 2,
scikit-image 0.19, Wand/ImageMagick); it lives in a separate virtual environment
built by ``tools/reference-env.sh`` (see README, "Fidelity"). Its location is
``$SHIFTBENCH_PEERS_VENV`` or ``~/.cache/peers-venv``. Outputs are cached on disk
(``$SHIFTBENCH_ORACLE_CACHE`` or ``~/.cache/shiftbench-oracle``) keyed by the
input bytes, so repeated runs are fast.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared"
SAMPLE_DIR = Path(os.environ.get("SHIFTBENCH_SAMPLE_DIR", SHARED / "data" / "imagenet-sample-100"))


def peers_python() -> Path | None:
    venv = Path(os.environ.get("SHIFTBENCH_PEERS_VENV", Path.home() / ".cache" / "peers-venv"))
    py = venv / "bin" / "python"
    if not py.exists():
        return None
    ok = subprocess.run([str(py), "-c", "import imagenet_c, wand.image"], capture_output=True)
    return py if ok.returncode == 0 else None


def cache_dir() -> Path:
    d = Path(os.environ.get("SHIFTBENCH_ORACLE_CACHE", Path.home() / ".cache" / "shiftbench-oracle"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def sample_paths() -> list[Path]:
    return sorted(SAMPLE_DIR.glob("*.JPEG"))


def load_sample_224(limit: int | None = None) -> np.ndarray:
    """The real sample photos, preprocessed for the 224 edition (N x 224 x 224 x 3 uint8)."""
    from shiftbench.editions import preprocess

    paths = sample_paths()[:limit]
    return np.stack([np.asarray(preprocess(Image.open(p), "224")) for p in paths])


def seed_for(i: int, severity: int) -> int:
    return 7919 * i + 104729 * severity + 17


def _item_path(name: str, image: np.ndarray, seed: int, severity: int) -> Path:
    """Cache file of one reference output: keyed by corruption, pixels, seed and severity."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(image).tobytes())
    h.update(f"{name}:{int(seed)}:{int(severity)}".encode())
    return cache_dir() / name / f"{h.hexdigest()[:32]}.npy"


def _run_chunk(py: Path, name: str, images: np.ndarray, seeds: np.ndarray, sevs: np.ndarray) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inp, images=images, seeds=seeds, severities=sevs, name=name)
        r = subprocess.run([str(py), str(HERE / "ref_worker.py"), str(inp), str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"reference worker failed for {name}:\n{r.stderr[-4000:]}")
        return np.load(out)["out"]


def reference_outputs(name: str, images: np.ndarray, seeds: np.ndarray, severities: np.ndarray, jobs: int = 2) -> np.ndarray:
    """Reference outputs for each (image, seed, severity), computed in ``jobs`` processes.

    Each output is cached on its own, so any subset or ordering of the same
    (image, seed, severity) items reuses earlier results.
    """
    py = peers_python()
    if py is None:
        raise RuntimeError("the peers environment with the reference imagenet-c is not available")
    paths = [_item_path(name, images[i], int(seeds[i]), int(severities[i])) for i in range(len(images))]
    missing = np.array([i for i, p in enumerate(paths) if not p.exists()], dtype=np.int64)
    if len(missing):
        chunk = max(1, -(-len(missing) // (jobs * 2)))
        parts = [missing[i : i + chunk] for i in range(0, len(missing), chunk)]

        def run(idx: np.ndarray) -> None:
            res = _run_chunk(py, name, images[idx], seeds[idx], severities[idx])
            for j, out in zip(idx, res):
                path = paths[int(j)]
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.stem + f".{os.getpid()}.tmp.npy")
                np.save(tmp, out)
                os.replace(tmp, path)

        with ThreadPoolExecutor(jobs) as ex:
            list(ex.map(run, parts))
    return np.stack([np.load(p) for p in paths])


def ours_with_reference_draws(name: str, images: np.ndarray, seeds: np.ndarray, severities: np.ndarray) -> np.ndarray:
    """shiftbench's output when fed the reference's random draws (legacy RandomState(seed))."""
    import shiftbench
    from shiftbench.rng.seeding import LegacyDraws

    out = np.empty_like(images)
    for i in range(len(images)):
        s = int(severities[i])
        d = shiftbench.sample_draws(images[i], name, s, source=LegacyDraws(int(seeds[i])), edition="224")
        out[i] = shiftbench.corrupt(images[i], name, s, draws=[d], edition="224")
    return out


@dataclass
class Agreement:
    frac_within_1: float
    mean_abs: float
    max_abs: int
    n_values: int

    def __str__(self) -> str:
        return f"within1={self.frac_within_1:.6f} mean={self.mean_abs:.5f} max={self.max_abs} (n={self.n_values})"


def agreement(ours: np.ndarray, ref: np.ndarray) -> Agreement:
    d = np.abs(ours.astype(np.int16) - ref.astype(np.int16))
    return Agreement(float((d <= 1).mean()), float(d.mean()), int(d.max()), int(d.size))

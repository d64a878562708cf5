#!/usr/bin/env bash
# Creates the "peers" virtual environment that holds the public
# ImageNet-C corruption implementations (imagecorruptions, imagenet-c, corrupt-tta,
# optionally albumentations) on this machine (Debian 12, CPython 3.11, x86_64).
#
#   bash reference-env.sh                 # -> $PEERS_VENV
#   VENV=/some/where bash reference-env.sh
#   WITH_ALBUMENTATIONS=0 bash reference-env.sh   # skip albumentations
#
# Why the pins (each found by an install/import failure, found by trying):
#  * numpy 1.26.4        imagecorruptions 1.1.2 and imagenet-c 0.0.3 use np.float_ (fog),
#                        removed in NumPy 2.0; imagenet-c uses np.fromstring (binary mode).
#  * scikit-image 0.19.3 both call skimage.filters.gaussian(..., multichannel=True); the
#                        keyword was removed in 0.20.0 (TypeError). 0.19.3 has no CPython 3.11
#                        wheel on PyPI, so it is built here from the sdist (~7 min on 2 cores)
#                        with numpy 1.26.4 / Cython 0.29.37 / setuptools 59.4.0, no build isolation.
#                        corrupt-tta uses channel_axis=, which 0.19 already has.
#  * opencv-python 4.11.0.86  newest OpenCV whose wheels still run on NumPy 1.x (4.12+ need
#                        NumPy 2). imagenet-c declares opencv-python~=3.4; it is installed with
#                        --no-deps and works with 4.11 (pip check reports that one conflict).
#  * setuptools 65.5.0   (the venv's own) keeps pkg_resources, imported by imagecorruptions
#                        and imagenet-c.
#  * imagenet-c 0.0.3 from PyPI ships without its frost/*.png|jpg textures (frost raises
#                        AttributeError: 'NoneType' object has no attribute 'shape'); they are
#                        copied from imagecorruptions, whose six files are byte-identical to
#                        ImageNet-C/imagenet_c/imagenet_c/frost/ in github.com/hendrycks/robustness.
#  * Wand 0.7.2 needs ImageMagick's MagickWand library (Debian libmagickwand-dev, IM 6.9.11).
set -euo pipefail

PY=${PYTHON:-python3}
VENV=${VENV:-${PEERS_VENV:-$HOME/.cache/peers-venv}}
BUILD_VENV=${BUILD_VENV:-$HOME/.cache/peers-build-venv}
WHEELS=${WHEELS:-$HOME/.cache/peers-wheels}
WITH_ALBUMENTATIONS=${WITH_ALBUMENTATIONS:-1}

if ! ldconfig -p | grep -q libMagickWand; then
  apt-get update
  apt-get install -y libmagickwand-dev
fi

# 1. scikit-image 0.19.3 wheel for this Python (built once, cached in $WHEELS)
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/scikit_image-0.19.3-*.whl >/dev/null 2>&1; then
  rm -rf "$BUILD_VENV"
  "$PY" -m venv "$BUILD_VENV"
  "$BUILD_VENV/bin/pip" install "numpy==1.26.4" "Cython==0.29.37" "setuptools==59.4.0" \
      "wheel==0.48.0" "packaging==26.3" "pythran==0.19.0" "gast==0.7.0" "beniget==0.5.0" "ply==3.11"
  NPY_NUM_BUILD_JOBS=$(nproc) "$BUILD_VENV/bin/pip" wheel --no-build-isolation --no-deps \
      --no-binary scikit-image -w "$WHEELS" "scikit-image==0.19.3"
fi
SKIMAGE_WHEEL=$(ls "$WHEELS"/scikit_image-0.19.3-*.whl | head -1)

# 2. the benchmark venv
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install "pip==26.3"
"$PIP" install "setuptools==65.5.0" "numpy==1.26.4" "scipy==1.17.1" "$SKIMAGE_WHEEL" \
    "opencv-python==4.11.0.86" "pillow==13.0.0" "Wand==0.7.2" \
    "imageio==2.38.1" "networkx==3.6.1" "PyWavelets==1.9.0" "tifffile==2026.3.3" "packaging==26.3"
"$PIP" install "imagecorruptions==1.1.2" "corrupt-tta==0.1.7"
"$PIP" install --no-deps "imagenet-c==0.0.3"

# imagenet-c's missing frost textures
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$SITE/imagenet_c/frost"
cp "$SITE"/imagecorruptions/frost/frost[1-6].* "$SITE/imagenet_c/frost/"

# 3. optional: albumentations (no ImageNet-C severities; peers_bench.py maps them).
#    --no-deps keeps opencv-python-headless out (it would overwrite opencv-python's cv2/).
if [ "$WITH_ALBUMENTATIONS" = 1 ]; then
  "$PIP" install --no-deps "albumentations==2.0.8" "albucore==0.0.24"
  "$PIP" install "pydantic==2.14.3" "pydantic-core==2.50.4" "annotated-types==0.8.0" "typing-inspection==0.4.5" \
      "typing-extensions==4.16.0" "PyYAML==6.0.3" "stringzilla==5.3.2" "simsimd==6.5.16"
fi

WITH_ALBUMENTATIONS=$WITH_ALBUMENTATIONS "$VENV/bin/python" - <<'PY'
import importlib
import os
mods = ["numpy", "scipy", "skimage", "cv2", "PIL", "wand.version", "imagecorruptions", "imagenet_c", "corrupt_tta"]
if os.environ.get("WITH_ALBUMENTATIONS", "1") == "1":
    mods.append("albumentations")
for m in mods:
    mod = importlib.import_module(m)
    print(m, getattr(mod, "__version__", getattr(mod, "MAGICK_VERSION", "")))
PY
"$PIP" check || true   # expected: imagenet-c 0.0.3 has requirement opencv-python~=3.4

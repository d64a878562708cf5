"""Stand-ins for torchvision and timm with the parts of their APIs that shiftbench's model sources call.

torchvision and timm need a CUDA build of torch (several GB) beside which the test environment's torch cannot
stay, so the model-source tests install these small packages on ``sys.path`` instead. Their entry points have
the real libraries' names and signatures (``torchvision.models.list_models(module=...)``, ``get_model_weights``,
``get_model(name, weights=..., **kwargs)`` loading through ``torch.hub.load_state_dict_from_url``;
``timm.list_models``, ``list_pretrained``, ``create_model(name, pretrained, pretrained_cfg,
pretrained_cfg_overlay, **kwargs)`` reading the ``file`` of its pretrained config,
``timm.models.get_pretrained_cfg``, ``timm.data.resolve_data_config``); tests/test_model_sources_real.py runs
the same model names against the real libraries where they are installed. Every model is a tiny network
with 1000 outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

TINY = '''
import torch


class Tiny(torch.nn.Module):
    """3 channels -> pooled -> 1000 logits (plus an unused width to tell argument sets apart)."""

    def __init__(self, num_classes=1000, width=4, drop_rate=0.0):
        super().__init__()
        self.num_classes = num_classes
        self.conv = torch.nn.Conv2d(3, width, 3)
        self.fc = torch.nn.Linear(width, num_classes)
        self.drop_rate = drop_rate

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))
'''

TORCHVISION = {
    "torchvision/__init__.py": '__version__ = "0.0.fake"\nfrom . import models\n',
    "torchvision/models/__init__.py": TINY + '''
import enum
import torch.hub

BASE = "{base}"
ARCHS = ["resnet18", "resnet50", "resnet101", "densenet161", "resnext50_32x4d"]
DETECTION = ["fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn"]


class Preset:
    crop_size = [224]
    resize_size = [232]
    mean = [0.485, 0.456, 0.406]
    std = [0.229, 0.224, 0.225]
    interpolation = "InterpolationMode.BILINEAR"


def _weights(arch):
    members = {{"IMAGENET1K_V1": f"{{BASE}}/{{arch}}-v1.pth", "IMAGENET1K_V2": f"{{BASE}}/{{arch}}-v2.pth"}}

    class W(enum.Enum):
        IMAGENET1K_V1 = 1
        IMAGENET1K_V2 = 2

        @property
        def url(self):
            return members[self.name]

        @property
        def meta(self):
            return {{"categories": ["c"] * 1000}}

        def transforms(self):
            return Preset()

        def get_state_dict(self, progress=True, check_hash=False):
            return torch.hub.load_state_dict_from_url(self.url, progress=progress, check_hash=check_hash)

    W.__name__ = arch.capitalize() + "_Weights"
    W.DEFAULT = W.IMAGENET1K_V2
    return W


_ENUMS = {{a: _weights(a) for a in ARCHS}}


def list_models(module=None, include=None, exclude=None):
    return sorted(ARCHS) if module is not None else sorted(ARCHS + DETECTION)


def get_model_weights(name):
    return _ENUMS[name]


def get_model(name, weights=None, **kwargs):
    if name not in ARCHS:
        raise ValueError(f"Unknown model {{name}}")
    model = Tiny(**kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=False, check_hash=True))
    return model
''',
}

TIMM = {
    "timm/__init__.py": '''__version__ = "0.0.fake"
from . import data, models
from .models import create_model, list_models, list_pretrained
''',
    "timm/data.py": '''
def resolve_data_config(args=None, pretrained_cfg=None, model=None, use_test_size=False, verbose=False):
    cfg = dict(getattr(model, "pretrained_cfg", {}) or {})
    return {"input_size": cfg.get("input_size", (3, 224, 224)), "interpolation": cfg.get("interpolation", "bicubic"),
            "mean": cfg.get("mean", (0.485, 0.456, 0.406)), "std": cfg.get("std", (0.229, 0.224, 0.225)),
            "crop_pct": cfg.get("crop_pct", 0.875), "crop_mode": "center"}
''',
    "timm/models.py": TINY + '''
import fnmatch

BASE = "{base}"
ARCHS = ["resnet18", "resnet50", "vit_tiny_patch16_224", "convnext_atto"]
TAGS = {{"resnet18": ["a1_in1k", "tv_in1k"], "resnet50": ["a1_in1k"], "convnext_atto": ["d2_in1k"]}}


class PretrainedCfg(dict):
    def to_dict(self):
        return dict(self)


def _cfg(full):
    arch, _, tag = full.partition(".")
    cfg = PretrainedCfg(architecture=arch, tag=tag, input_size=(3, 160, 160), interpolation="bicubic",
                        crop_pct=0.95, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), num_classes=1000)
    if tag == "tv_in1k":  # an older entry: a URL, no Hub repository
        cfg["url"] = f"{{BASE}}/{{arch}}-tv.pth"
    else:
        cfg["hf_hub_id"] = f"timm/{{full}}"
    return cfg


def list_models(filter="", module="", pretrained=False, exclude_filters="", name_matches_cfg=False, include_tags=None):
    names = sorted(f"{{a}}.{{t}}" for a in TAGS for t in TAGS[a]) if pretrained else sorted(ARCHS)
    return [n for n in names if not filter or fnmatch.fnmatch(n, filter)]


def list_pretrained(filter="", exclude_filters=""):
    return list_models(filter, pretrained=True)


def get_pretrained_cfg(model_name, allow_unregistered=True):
    arch, _, tag = model_name.partition(".")
    if arch not in TAGS:
        return None
    return _cfg(model_name if tag else f"{{arch}}.{{TAGS[arch][0]}}")


def create_model(model_name, pretrained=False, pretrained_cfg=None, pretrained_cfg_overlay=None, checkpoint_path=None,
                 **kwargs):
    arch, _, tag = model_name.partition(".")
    if arch not in ARCHS:
        raise RuntimeError(f"Unknown model ({{model_name}})")
    model = Tiny(**kwargs)
    cfg = dict(pretrained_cfg) if isinstance(pretrained_cfg, dict) else dict(get_pretrained_cfg(model_name) or {{}})
    cfg.update(pretrained_cfg_overlay or {{}})
    model.pretrained_cfg = cfg
    if pretrained:
        if cfg.get("source") == "hf-hub" or not cfg.get("file"):
            raise RuntimeError("the stand-in only loads pretrained weights from a file")
        model.load_state_dict(torch.load(cfg["file"], map_location="cpu", weights_only=True))
    return model
''',
}


def install(root: Path, files: dict[str, str], base: str) -> Path:
    """Write a stand-in package under ``root`` (its URLs under ``base``) and return ``root`` for ``sys.path``."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text.format(base=base) if "{base}" in text else text, encoding="utf-8")
    return root


def tiny_state(seed: int, width: int = 4) -> dict[str, torch.Tensor]:
    """A state_dict of the stand-ins' network with seeded weights."""
    g = torch.Generator().manual_seed(seed)
    return {
        "conv.weight": torch.randn(width, 3, 3, 3, generator=g),
        "conv.bias": torch.randn(width, generator=g),
        "fc.weight": torch.randn(1000, width, generator=g),
        "fc.bias": torch.randn(1000, generator=g),
    }


def drop(names: tuple[str, ...]) -> None:
    """Forget imported copies of ``names`` (and their submodules)."""
    for mod in list(sys.modules):
        if mod.split(".")[0] in names:
            del sys.modules[mod]

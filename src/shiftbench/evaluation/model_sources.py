"""Where a named model's code and weights come from, checked before any work.

:func:`~shiftbench.evaluation.models.load_model` resolves a model name with these sources:

* ``torchvision:<arch>[:<WEIGHTS>]``: torchvision's classification models; ``WEIGHTS`` is one of the
  architecture's weights enum members (``IMAGENET1K_V1``, ``IMAGENET1K_V2``, ``DEFAULT``).
* ``timm:<name>[.<tag>]``: timm's models with a pretrained tag (``timm:resnet50.a1_in1k``); no tag: timm's
  default tag of the architecture.
* ``hf-hub:<org>/<name>``: a timm model published on the Hugging Face Hub (its ``config.json`` names the
  architecture).
* ``<module.path>:<factory>`` and ``<path/to/file.py>:<factory>``: any Python function returning an
  ``nn.Module``, a callable returning logits, or a :class:`~shiftbench.evaluation.models.Classifier`.

Model arguments (``--model-args key=value,...``) go to the factory (``torchvision.models.get_model``,
``timm.create_model`` or yours); a model name carries them as ``NAME?key=value,...``
(:func:`format_model_spec`), so the store tells two argument sets apart.

Offline safety: the weights of a torchvision or timm model are looked up in the caches first
(torch hub's ``checkpoints`` folder; the Hugging Face cache; shiftbench's own model cache) and fetched
into shiftbench's cache with the zoo's verified download only when missing. A machine without network
gets one :class:`~shiftbench.evaluation.errors.WeightsUnavailableError` naming the URL and the path to
place a copy at, before any image is read.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import json
import os
import re
import socket
import sys
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import (
    InvalidArgumentError,
    MissingDependencyError,
    ShiftbenchError,
    UnknownNameError,
)
from ..registry import close_matches
from .errors import WeightsUnavailableError

__all__ = [
    "Built",
    "check_weights_only",
    "factory_source",
    "family_suggest",
    "fetch_weights",
    "format_model_spec",
    "hf_hub_source",
    "is_factory_spec",
    "models_cache_dir",
    "parse_model_args",
    "register_weights_fetcher",
    "split_model_spec",
    "timm_source",
    "torchvision_classifiers",
    "torchvision_source",
]

WeightsFetcher = Callable[[str, Path, "str | None"], Path]
"""``fetcher(url, dest, sha256_prefix) -> dest``: download ``url`` to ``dest`` (verified), or raise a
:class:`~shiftbench.errors.ShiftbenchError` naming the URL and ``dest`` (the zoo registers its download)."""

_FETCHERS: list[WeightsFetcher] = []


@dataclass
class Built:
    """What a source built: the model and the facts :func:`load_model` wraps it with.

    Attributes:
        model: an ``nn.Module``, a callable returning logits, or a ready ``Classifier``.
        name: the name stored with results.
        transform: ``InputTransform`` fields (size, mean, std, scale, interpolation, crop_fraction) or None
            for the default.
        imagenet: the outputs are the 1000 ImageNet-1k classes in their usual order.
        details: provenance (library, weights, URL, file) stored with the model.
    """

    model: Any
    name: str
    transform: dict[str, Any] | None = None
    imagenet: bool = True
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- arguments

_SPLIT = re.compile(r",(?![^\[\](){}]*[\])}])")


def _value(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(t)
    except (ValueError, SyntaxError):
        return t


def parse_model_args(text: str | Mapping[str, Any] | None, argument: str = "model_args") -> dict[str, Any]:
    """``"depth=18,pretrained=false,name=x"`` -> ``{"depth": 18, "pretrained": False, "name": "x"}``.

    Values are Python literals (numbers, ``true``/``false``, ``none``, quoted strings, lists in brackets);
    anything else is a string. A mapping is returned as a dict.

    Raises:
        InvalidArgumentError: an item without ``=``, an empty or repeated key.
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    out: dict[str, Any] = {}
    for item in _SPLIT.split(str(text).strip()):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise InvalidArgumentError(
                argument, str(text), "key=value pairs separated by commas, keys being Python names (e.g. depth=18,drop_rate=0.1)"
            )
        if key in out:
            raise InvalidArgumentError(argument, str(text), "each key once", f"{key!r} is given twice.")
        out[key] = _value(value)
    return out


def _show(v: Any) -> str:
    return v if isinstance(v, str) and _value(v) == v and "," not in v else repr(v)


def format_model_spec(name: str, args: Mapping[str, Any] | None) -> str:
    """A model name with its arguments: ``NAME?key=value,...`` (keys sorted; just ``NAME`` without any)."""
    if not args:
        return name
    return name + "?" + ",".join(f"{k}={_show(args[k])}" for k in sorted(args))


def split_model_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"timm:resnet18?drop_rate=0.1"`` -> ``("timm:resnet18", {"drop_rate": 0.1})``."""
    name, sep, rest = spec.partition("?")
    return name.strip(), (parse_model_args(rest) if sep else {})


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def is_factory_spec(spec: str) -> bool:
    """``module.path:factory`` or ``path/to/file.py:factory``."""
    target, sep, fn = spec.rpartition(":")
    if not sep or not target or not _DOTTED.match(fn):
        return False
    return target.endswith(".py") or bool(_DOTTED.match(target))


def family_suggest(name: str, choices: Sequence[str], n: int = 3) -> list[str]:
    """Close names from the same family first (``resnet5`` -> ``resnet50``, not a detection model).

    The family is the name's leading letters (``resnet``, ``efficientnet``); names of that family are
    ranked by similarity, then the closest of all the others.
    """
    low = name.lower()
    stem = re.match(r"[a-z_]*", low)
    family = [c for c in choices if stem and stem.group(0) and c.lower().startswith(stem.group(0))]
    ranked = sorted(family, key=lambda c: (-difflib.SequenceMatcher(None, low, c.lower()).ratio(), len(c), c))
    prefixed = [c for c in ranked if c.lower().startswith(low)]
    out = list(dict.fromkeys(prefixed[:n] + ranked[:n]))[:n]
    if len(out) < n:
        for c in close_matches(low, choices, n=n, cutoff=0.6, substrings=False):
            if c not in out:
                out.append(c)
    return out[:n]


# ------------------------------------------------------------------------------------------ weights


def models_cache_dir() -> Path:
    """shiftbench's cache of library weights: ``$SHIFTBENCH_CACHE/models`` or ``~/.cache/shiftbench/models``."""
    root = os.environ.get("SHIFTBENCH_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "shiftbench"
    return base / "models"


def register_weights_fetcher(fetcher: WeightsFetcher) -> None:
    """Use ``fetcher(url, dest, sha256_prefix)`` to download missing weights (:mod:`shiftbench.zoo` registers its
    verified, resumable download when imported)."""
    _FETCHERS[:] = [fetcher]


def fetch_weights(model: str, url: str, dest: Path, sha256: str | None = None) -> Path:
    """``dest`` when it is there, else ``url`` downloaded to it.

    Raises:
        WeightsUnavailableError: nothing at ``dest`` and no download available (the message names
            ``url`` and ``dest``); the registered fetcher's own errors name them too.
    """
    if dest.is_file():
        return dest
    if not _FETCHERS:
        raise WeightsUnavailableError(model, url, str(dest), "no downloader is set up: import shiftbench.zoo")
    return _FETCHERS[0](url, dest, sha256)


_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,64})\.")


def _hub_checkpoint(url: str) -> Path:
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints" / Path(urlparse(url).path).name


def check_weights_only(path: Path, model: str) -> None:
    """Refuse a cached file that ``torch.load(weights_only=True)`` cannot read (a pickle naming code):
    libraries that load it afterwards (torchvision's hub loader) would run that code."""
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise InvalidArgumentError(
            "weights", str(path), f"a plain state_dict for {model}, loadable with torch.load(weights_only=True)",
            f"Refused, nothing in it was run: {str(e).splitlines()[0][:200]}. Delete the file to fetch it again.",
        ) from e


# ------------------------------------------------------------------------------------------ torchvision


def _library(module: str, package: str, what: str, extra: str) -> Any:
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(package, what, extra)
    try:
        return importlib.import_module(module)
    except (ImportError, RuntimeError) as e:  # e.g. torchvision built for another torch
        raise MissingDependencyError(
            package, f"{what} (it is installed but does not import: {str(e).splitlines()[0][:160]})", extra
        ) from e


def torchvision_classifiers(tvm: Any) -> list[str]:
    """torchvision's classification architectures (not detection, segmentation or video models)."""
    try:
        return sorted(tvm.list_models(module=tvm))
    except TypeError:  # older torchvision: no module filter
        return sorted(tvm.list_models())


def torchvision_source(spec: str, args: Mapping[str, Any], weights: str | None) -> Built:
    """``torchvision:<arch>[:<WEIGHTS>]``; ``weights`` given (a file or ``"none"``): built without pretrained weights."""
    arch, _, enum_name = spec.partition(":")
    tv = _library("torchvision", "torchvision", f"the model torchvision:{spec}", "torchvision")
    tvm = importlib.import_module(f"{tv.__name__}.models")
    names = torchvision_classifiers(tvm)
    if arch not in names:
        raise UnknownNameError(
            "model", f"torchvision:{arch}", [f"torchvision:{n}" for n in names],
            [f"torchvision:{s}" for s in family_suggest(arch, names)],
        )
    details: dict[str, Any] = {"library": f"torchvision {getattr(tv, '__version__', '')}".strip()}
    if weights is not None:
        if enum_name:
            raise InvalidArgumentError(
                "weights", weights, f"no --weights with torchvision:{arch}:{enum_name} (the name already picks the weights)"
            )
        module = tvm.get_model(arch, weights=None, **args)
        return Built(module, f"torchvision:{arch}", None, _has_1000_outputs(module), details)
    enum = tvm.get_model_weights(arch)
    members = [m.name for m in enum]
    chosen = (enum_name or "DEFAULT").split(".")[-1]
    if chosen == "DEFAULT":
        w = enum.DEFAULT
    elif chosen in members:
        w = enum[chosen]
    else:
        raise UnknownNameError(
            "model", f"torchvision:{arch}:{enum_name}", [f"torchvision:{arch}:{m}" for m in ["DEFAULT", *members]],
            [f"torchvision:{arch}:{s}" for s in close_matches(chosen, members, n=3, cutoff=0.4, substrings=False)],
        )
    url = w.url
    cached = _hub_checkpoint(url)
    m = _HASH_IN_NAME.search(cached.name)
    fetch_weights(f"torchvision:{spec}", url, cached, m.group(1) if m else None)
    check_weights_only(cached, f"torchvision:{spec}")
    module = tvm.get_model(arch, weights=w, **args)  # torchvision finds the checked file in torch hub's cache
    details.update(weights=f"torchvision {type(w).__name__}.{w.name}", weights_url=url, weights_file=cached.name)
    preset = w.transforms()
    size = int(next(iter(getattr(preset, "crop_size", [224]))))
    resize = int(next(iter(getattr(preset, "resize_size", [256]))))
    interp = str(getattr(preset, "interpolation", "bilinear")).lower()
    transform = {
        "size": size,
        "mean": tuple(float(v) for v in getattr(preset, "mean", (0.485, 0.456, 0.406))),
        "std": tuple(float(v) for v in getattr(preset, "std", (0.229, 0.224, 0.225))),
        "scale": 255.0,
        "interpolation": "bicubic" if "bicubic" in interp else "bilinear",
        "crop_fraction": size / resize,
    }
    classes = len((getattr(w, "meta", {}) or {}).get("categories") or range(1000))
    name = f"torchvision:{arch}" + (f":{w.name}" if enum_name else "")
    return Built(module, name, transform, classes == 1000 and _has_1000_outputs(module), details)


# ------------------------------------------------------------------------------------------------ timm


def _timm_transform(timm: Any, module: Any) -> dict[str, Any]:
    cfg: Mapping[str, Any]
    try:
        cfg = timm.data.resolve_data_config({}, model=module)
    except Exception:  # noqa: BLE001 - older timm or a model without a config
        cfg = getattr(module, "pretrained_cfg", {}) or {}
    size = int(tuple(cfg.get("input_size", (3, 224, 224)))[-1])
    return {
        "size": size,
        "mean": tuple(float(v) for v in cfg.get("mean", (0.485, 0.456, 0.406))),
        "std": tuple(float(v) for v in cfg.get("std", (0.229, 0.224, 0.225))),
        "scale": 255.0,
        "interpolation": "bicubic" if cfg.get("interpolation", "bicubic") == "bicubic" else "bilinear",
        "crop_fraction": float(cfg.get("crop_pct", 0.875)),
    }


def _hf_url(repo: str, filename: str) -> str:
    repo, _, rev = repo.partition("@")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")  # huggingface_hub's own setting
    return f"{endpoint}/{repo}/resolve/{rev or 'main'}/{filename}"


def _hf_cached(repo: str, filename: str) -> Path | None:
    """The file in the Hugging Face cache, if huggingface_hub is installed and has it."""
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        repo_id, _, rev = repo.partition("@")
        found = try_to_load_from_cache(repo_id, filename, revision=rev or None)
    except Exception:  # noqa: BLE001 - any cache problem means "not cached"
        return None
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def _hf_file(model: str, repo: str, filenames: Sequence[str]) -> Path:
    """The first of ``filenames`` of a Hub repository: from the Hugging Face cache, shiftbench's cache, or fetched."""
    folder = models_cache_dir() / "hf-hub" / repo.replace("/", "--").replace("@", "--")
    for fn in filenames:
        for found in (_hf_cached(repo, fn), folder / fn):
            if found is not None and found.is_file():
                return found
    last: ShiftbenchError | None = None
    for fn in filenames:
        try:
            return fetch_weights(model, _hf_url(repo, fn), folder / fn)
        except ShiftbenchError as e:  # a 404 for one file name: try the next; offline: fail at once
            last = e
            if "HTTP 404" not in str(e):
                raise
    assert last is not None
    raise last


def _timm_weights_file(timm: Any, full: str, model: str) -> tuple[Path, str]:
    """The pretrained file of timm's ``arch.tag`` (cached or fetched) and its URL."""
    cfg = timm.models.get_pretrained_cfg(full)
    if cfg is None:
        raise InvalidArgumentError("model", model, "a timm model with pretrained weights", "Pass --weights FILE or --weights none.")
    cfg_d = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
    hub = cfg_d.get("hf_hub_id")
    if hub:
        names = [cfg_d["hf_hub_filename"]] if cfg_d.get("hf_hub_filename") else ["model.safetensors", "pytorch_model.bin"]
        path = _hf_file(model, hub, names)
        return path, _hf_url(hub, path.name)
    url = cfg_d.get("url")
    if url:
        dest = _hub_checkpoint(url)
        alt = models_cache_dir() / "timm" / dest.name
        if not dest.is_file() and alt.is_file():
            return alt, url
        return fetch_weights(model, url, dest), url
    raise InvalidArgumentError("model", model, "a timm model whose pretrained weights have a URL",
                               "Pass --weights FILE or --weights none.")


def _timm_names(timm: Any, arch: str, model: str) -> None:
    names = list(timm.list_models())
    if arch not in names:
        raise UnknownNameError("model", model, [f"timm:{n}" for n in names],
                               [f"timm:{s}" for s in family_suggest(arch, names)])


def timm_source(spec: str, args: Mapping[str, Any], weights: str | None) -> Built:
    """``timm:<name>[.<tag>]``; ``weights`` given (a file or ``"none"``): built without pretrained weights."""
    timm = _library("timm", "timm", f"the model timm:{spec}", "timm")
    arch, _, tag = spec.partition(".")
    model = f"timm:{spec}"
    _timm_names(timm, arch, model)
    details: dict[str, Any] = {"library": f"timm {getattr(timm, '__version__', '')}".strip()}
    if weights is not None:
        module = timm.create_model(spec, pretrained=False, **args)
        return Built(module, model, _timm_transform(timm, module), getattr(module, "num_classes", 0) == 1000, details)
    tags = list(timm.list_pretrained(f"{arch}.*"))
    full = spec if tag else (tags[0] if tags else arch)
    if tag and full not in tags:
        raise UnknownNameError("model", model, [f"timm:{t}" for t in tags] or [f"timm:{arch} (no pretrained tags)"],
                               [f"timm:{s}" for s in close_matches(spec, tags, n=3, cutoff=0.5, substrings=False)])
    path, url = _timm_weights_file(timm, full, model)
    module = timm.create_model(full, pretrained=True, pretrained_cfg_overlay={"file": str(path), "source": "file"}, **args)
    details.update(weights=f"timm {full}", weights_url=url, weights_file=path.name)
    return Built(module, model, _timm_transform(timm, module), getattr(module, "num_classes", 0) == 1000, details)


def hf_hub_source(repo: str, args: Mapping[str, Any], weights: str | None) -> Built:
    """``hf-hub:<org>/<name>``: a timm model on the Hugging Face Hub (config.json + weights, cached or fetched)."""
    model = f"hf-hub:{repo}"
    if not re.fullmatch(r"[\w.-]+/[\w.-]+(@[\w.-]+)?", repo):
        raise InvalidArgumentError("model", model, "hf-hub:ORG/NAME (a timm model on the Hugging Face Hub)")
    timm = _library("timm", "timm", f"the model {model}", "timm")
    config_path = _hf_file(model, repo, ["config.json"])
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        arch = str(config["architecture"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidArgumentError("model", model, "a Hub repository with a timm config.json naming its architecture",
                                   f"{config_path} could not be used: {e}") from e
    _timm_names(timm, arch, f"{model} (architecture {arch})")
    margs = {**dict(config.get("model_args") or {}), **dict(args)}
    pcfg = dict(config.get("pretrained_cfg") or {})
    if "num_classes" in config:
        pcfg["num_classes"] = config["num_classes"]
    details: dict[str, Any] = {"library": f"timm {getattr(timm, '__version__', '')}".strip(), "hub": repo}
    if weights is not None:
        module = timm.create_model(arch, pretrained=False, **margs)
    else:
        path = _hf_file(model, repo, ["model.safetensors", "pytorch_model.bin"])
        pcfg.update(file=str(path), source="file", hf_hub_id=repo)
        module = timm.create_model(arch, pretrained=True, pretrained_cfg=pcfg, **margs)
        details.update(weights=model, weights_url=_hf_url(repo, path.name), weights_file=path.name)
    return Built(module, model, _timm_transform(timm, module), getattr(module, "num_classes", 0) == 1000, details)


# ------------------------------------------------------------------------------------- your factories

_NETWORK_ERRORS: tuple[type[BaseException], ...] = (urllib.error.URLError, socket.timeout, ConnectionError)


def _offline_error(exc: BaseException) -> bool:
    """A download failure (urllib, sockets, or huggingface_hub's offline errors, matched by name)."""
    for e in (exc, exc.__cause__, exc.__context__):
        if e is None:
            continue
        if isinstance(e, _NETWORK_ERRORS):
            return True
        if type(e).__name__ in ("LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectError", "ConnectTimeout"):
            return True
    return False


def _import_target(target: str, model: str) -> Any:
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise InvalidArgumentError("model", model, "path/to/file.py:factory with an existing Python file")
        mod_name = "shiftbench_user_model_" + re.sub(r"\W", "_", str(path.resolve()))
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise InvalidArgumentError("model", model, "path/to/file.py:factory with a Python source file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and (target == e.name or target.startswith(e.name + ".")):
            raise InvalidArgumentError(
                "model", model, "module.path:factory with an importable module (on PYTHONPATH) or path/to/file.py:factory",
                f"No module named {e.name!r}.",
            ) from e
        raise


def factory_source(spec: str, args: Mapping[str, Any], weights: str | None) -> Built:
    """``module.path:factory`` or ``path/to/file.py:factory``, called with ``args``."""
    target, _, attr = spec.rpartition(":")
    mod = _import_target(target, spec)
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(mod) if not n.startswith("_") and callable(getattr(mod, n, None)))
            raise UnknownNameError("model", spec, [f"{target}:{n}" for n in public],
                                   [f"{target}:{s}" for s in family_suggest(attr, public)])
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvalidArgumentError("model", spec, "a callable factory (a function or class returning a model)")
    try:
        built = obj(**args)
    except (TypeError, ValueError) as e:
        if args:
            raise InvalidArgumentError("model_args", format_model_spec("", args).lstrip("?"),
                                       f"arguments that {spec} accepts", f"{type(e).__name__}: "
                                       f"{str(e).splitlines()[0][:200] if str(e) else ''}") from e
        raise
    except Exception as e:
        if _offline_error(e):
            raise WeightsUnavailableError(spec, "", None, f"the factory tried to download and failed: "
                                          f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from e
        raise
    if not callable(built):
        raise InvalidArgumentError("model", spec, "a factory returning an nn.Module, a callable or a Classifier",
                                   f"It returned {type(built).__name__}.")
    return Built(built, format_model_spec(spec, args), None, _has_1000_outputs(built), {"factory": spec})


def _has_1000_outputs(model: Any) -> bool:
    """The last linear layer of a module (or its ``num_classes``) has 1000 outputs."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return False
    n = getattr(model, "num_classes", None)
    if isinstance(n, int):
        return n == 1000
    last = None
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            last = m
    return last is not None and last.out_features == 1000

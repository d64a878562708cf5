"""``shiftbench evaluate``: every registered benchmark through one command.

The common options (model, data, inference, store, output) apply to every
benchmark; the others apply to the benchmarks that list them in
``Benchmark.options``. An option given on the command line that the chosen
benchmark does not accept is refused with one message shape:
``--severities does not apply to imagenet-d: ...``.
"""

from __future__ import annotations

from typing import Any

import click

from ..benchmarks import get_benchmark
from ..evaluation.model_sources import (
    format_model_spec,
    parse_model_args,
    split_model_spec,
)
from ..evaluation.models import DEFAULT_MODEL
from ..evaluation.protocol import BENCHMARK_OPTIONS, accepted_list
from ..evaluation.store import DEFAULT_STORE, check_store_path
from ..evaluation.threads import model_threads
from ._output import FORMATS, UserError, check_results_file, emit, progress

__all__ = ["evaluate_cmd", "given_options", "refuse_given", "refuse_inapplicable", "model_with_args"]

_FLAG_NAMES = {"release": "--release/--no-release", "clean": "--clean/--no-clean", "progress": "--progress/--no-progress"}


def _option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def given_options(ctx: click.Context) -> set[str]:
    """The parameter names given on the command line (or through the environment), not left at their defaults."""
    out = set()
    for name in ctx.params:
        src = ctx.get_parameter_source(name)
        if src is not None and src.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(name)
    return out


def model_with_args(model: Any, model_args: str | None) -> Any:
    """``--model`` with ``--model-args`` folded in (``NAME?key=value,...``, what load_model reads)."""
    if not model_args or not isinstance(model, str):
        return model
    name, args = split_model_spec(model)
    return format_model_spec(name, {**args, **parse_model_args(model_args, "--model-args")})


def refuse_given(bench: Any, given: set[str] | frozenset[str]) -> None:
    """Refuse every benchmark option among ``given`` (parameter names) that ``bench`` does not accept."""
    for name in BENCHMARK_OPTIONS:
        if name in given and not bench.accepts(name):
            why = bench.refusals.get(name) or f"it accepts {accepted_list(bench, BENCHMARK_OPTIONS)}"
            raise UserError(f"{_option_name(name)} does not apply to {bench.name}: {why}")


def refuse_inapplicable(ctx: click.Context, bench: Any, kw: dict[str, Any]) -> None:
    """Refuse every benchmark option given on the command line that ``bench`` does not accept."""
    refuse_given(bench, given_options(ctx))


@click.command("evaluate")
@click.option("--benchmark", default="imagenet-c", show_default=True,
              help="A registered benchmark (`shiftbench list benchmarks`): imagenet-c, imagenet-p, imagenet-noc, "
              "imagenet-d, ...")
@click.option("--model", default=DEFAULT_MODEL, show_default=True,
              help="Model: efficientnet-lite0 (built in), zoo:<name> (published weights, `shiftbench zoo list`), "
              "torchvision:<arch>[:<WEIGHTS>], timm:<name>[.<tag>], hf-hub:<org>/<name>, module.path:factory or "
              "path/to/file.py:factory. Weights missing offline: one line naming the URL and where to place a copy.")
@click.option("--model-args", default=None, metavar="KEY=VALUE,...",
              help="Arguments for the model's factory (torchvision.models.get_model, timm.create_model or yours), "
              "e.g. drop_rate=0.1,num_classes=10; stored with the model's name.")
@click.option("--weights", type=click.Path(dir_okay=False), default=None,
              help="Local checkpoint (state_dict), loaded with torch.load(weights_only=True); 'none' = random weights.")
@click.option("--data", type=click.Path(), default=None,
              help="Clean images (ImageFolder: <data>/<wnid>/<image>), corrupted on the fly; imagenet-d: the "
              "DomainNet folder. With --released: the clean images for the clean error.")
@click.option("--released", type=click.Path(), default=None,
              help="Released dataset: ImageNet-C / Tiny-ImageNet-C tree, CIFAR-10-C/100-C folder, ImageNet-P videos.")
@click.option("--edition", default=None, help="224 (default), 299, 64 (Tiny), 32 (CIFAR); released data: detected.")
@click.option("--corruptions", default=None,
              help="Comma-separated names, wildcards or groups (benchmark, extra, noise, blur...). Default: all.")
@click.option("--severities", default="1-5", show_default=True, help="e.g. 1-5 or 1,3,5.")
@click.option("--perturbations", default=None,
              help="imagenet-p: comma-separated perturbation names, wildcards or groups (test, validation). "
              "Default: test.")
@click.option("--difficulties", default=None,
              help="imagenet-p: difficulties, e.g. 1-3 or 1,2 (default: 1, the level of the published AlexNet numbers).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the on-the-fly corruptions.")
@click.option("--mapping", default=None,
              help="imagenet-d: class mapping, paper (as published, the default) or wordnet (curated variant).")
@click.option("--styles", type=click.Path(), default=None,
              help="imagenet-c-style: folder of style images (default: SHIFTBENCH_STYLE_DIR).")
@click.option("--style-backend", default=None,
              help="imagenet-c-style: adain (the paper's method) or magenta-lite (default: SHIFTBENCH_STYLE_BACKEND).")
@click.option("--holdout", default=None,
              help="Structural benchmarks: the held-out part: a style (icons-50-style; 'all' = leave each out), "
              "k 1..3 (cifar-100-subclass) or the subclass lists (imagenet-22k-subclass: authors, the default, or wordnet).")
@click.option("--tta", default=None,
              help="imagenet-c: test-time augmentation, ten-crop (Hendrycks & Dietterich, 2019, Appendix D: the mean "
              "softmax of the 4 corner and centre crops and their mirrors).")
@click.option("--preprocess", default=None,
              help="imagenet-c: preprocessing of every input, clahe (contrast limited adaptive histogram equalization) "
              "or nlm-denoise (non-local means at the estimated noise level), as Hendrycks & Dietterich, 2019, "
              "Sections 3.4-3.5.")
@click.option("--seen-data", type=click.Path(), default=None,
              help="imagenet-22k-subclass: ImageNet-1K validation images of the seen subclasses (<wnid>/ folders) for "
              "the seen accuracy, as the authors' script; without it, 10 %% of the seen images of --data.")
@click.option("--recipe", default=None,
              help="Structural benchmarks without a --model checkpoint: the training recipe, NAME or "
              "NAME:key=value,... (e.g. icons50-wrn-16-4:arch=small_cnn,epochs=1); default: the paper's.")
@click.option("--ray", "ray", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Run the model on a Ray cluster (pip install 'shiftbench[ray]'): ADDRESS of a running cluster "
              "(HOST:PORT, ray://HOST:PORT, or 'auto' for one started on this machine); alone: RAY_ADDRESS, else Ray "
              "on this machine. One model copy per worker; this process alone writes the store, with the same "
              "predictions as without --ray. --data must be on storage every node sees at the same path.")
@click.option("--ray-cpus-per-worker", type=float, default=None,
              help="With --ray: CPUs (threads) each model worker declares (default 1).")
@click.option("--ray-gpus-per-worker", type=float, default=None,
              help="With --ray: GPUs each model worker declares (default 1 with --device cuda, else 0).")
@click.option("--release/--no-release", default=False, show_default=True,
              help="Store-and-reload each corrupted image as JPEG q85, like the released datasets.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--threads", default="auto", show_default=True, metavar="N|auto",
              help="Threads for the model on the CPU. auto: the cores the one-minute load average leaves free (all "
              "on an idle machine, 1 on a busy one; torch's own default, one per core, ran 3-4x slower on a loaded "
              "machine: docs/performance.md).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda, cuda:N or mps.")
@click.option("--store", type=click.Path(dir_okay=False), default=str(DEFAULT_STORE), show_default=True,
              help="Results store (SQLite); interrupted runs resume from it.")
@click.option("--baseline", default="alexnet", show_default=True,
              help="CE baseline: alexnet (published), none, a model name in the store, eval:<id>, or a .json file.")
@click.option("--classes", default="auto", show_default=True,
              help="Label space: auto, model (all model outputs), data (restrict logits to the data's classes), "
              "or a file of class ids (wnids) to restrict to.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="At most N images per condition, spread over the classes.")
@click.option("--bad-images", type=click.Choice(["skip", "fail"]), default="skip", show_default=True,
              help="Unreadable or truncated images: skip and count them, or stop.")
@click.option("--clean/--no-clean", default=True, show_default=True, help="Also evaluate the clean images.")
@click.option("--rerun", is_flag=True, help="Discard stored runs of the requested conditions and start over.")
@click.option("--results-format", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--results-file", type=click.Path(dir_okay=False), default=None,
              help="Write the results there instead of stdout (checked before the evaluation starts).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress with rate and ETA on stderr.")
@click.option("--details/--no-details", default=True, show_default=True, help="Also print errors per severity.")
@click.pass_context
def evaluate_cmd(ctx: click.Context, **kw: Any) -> None:
    """Evaluate a classifier on a benchmark; every prediction goes to the results store.

    With no arguments: ImageNet-C with EfficientNet-Lite0 on the 20 ImageNet
    images inside the foolbox wheel, all registered corruptions x 5
    severities, on the fly (a demonstration of the pipeline, not a
    benchmark). An interrupted evaluation resumes when run again.

    \b
    Typical use:
      shiftbench evaluate --model torchvision:resnet50 --data /data/imagenet/val
      shiftbench evaluate --released /data/ImageNet-C --data /data/imagenet/val
      shiftbench evaluate --benchmark imagenet-d --data /data/DomainNet
      shiftbench list benchmarks
    """  # noqa: D301 - click reads the backspace as "keep this paragraph as is"
    bench = get_benchmark(kw.pop("benchmark"))
    refuse_inapplicable(ctx, bench, kw)
    check_results_file(kw["results_file"])
    check_store_path(kw["store"])
    fmt, results_file, store = kw["results_format"], kw["results_file"], kw["store"]
    kw["model"] = model_with_args(kw["model"], kw.pop("model_args", None))
    threads = kw.pop("threads", "auto")
    settings = {k: v for k, v in kw.items() if bench.accepts(k)}
    shown = progress(*bench.items) if kw["progress"] else None
    try:
        with model_threads(threads):
            report = bench.evaluate(settings, shown)
    except KeyboardInterrupt:
        click.echo(
            f"\nInterrupted. Everything finished so far is stored in {store}; run the same command again to resume.",
            err=True,
        )
        raise  # the root command turns it into exit code 130
    emit(report, fmt, results_file)

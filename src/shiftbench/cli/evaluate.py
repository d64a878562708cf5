"""``shiftbench evaluate``: every registered benchmark through one command.

The common options (model, data, inference, store, output) apply to every
benchmark; every other option is generated from a benchmark's ``Settings``
dataclass (its fields: name, type, default, help), so a benchmark installed
through the entry-point group adds options of its own. An option given on the
command line that the chosen benchmark does not declare is refused with one
message shape: ``--severities does not apply to imagenet-d: ...``.
``shiftbench evaluate --benchmark NAME --help`` lists NAME's options only.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from ..benchmarks import get_benchmark, list_benchmarks
from ..benchmarks.front import DRIVER_OPTIONS, run
from ..errors import UnknownNameError
from ..evaluation.model_sources import (
    format_model_spec,
    parse_model_args,
    split_model_spec,
)
from ..evaluation.models import DEFAULT_MODEL
from ..evaluation.protocol import COMMON_OPTIONS, OptionSpec
from ..evaluation.store import DEFAULT_STORE, check_store_path
from ..evaluation.threads import model_threads
from ._output import FORMATS, UserError, check_results_file, emit, progress, trust_cache_option

__all__ = ["evaluate_cmd", "given_options", "refuse_given", "declared_options", "accepted_list", "model_with_args"]


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


def declared_options() -> dict[str, tuple[OptionSpec, list[str]]]:
    """Every option some registered benchmark declares: name -> (its first declaration, the benchmarks declaring it)."""
    out: dict[str, tuple[OptionSpec, list[str]]] = {}
    for name in list_benchmarks():
        for spec in get_benchmark(name).Settings.specs():
            out.setdefault(spec.name, (spec, []))[1].append(name)
    return out


def accepted_list(bench: Any) -> str:
    """The benchmark's own options as ``--a, --b`` (for refusal messages)."""
    return ", ".join(s.flag for s in bench.Settings.own_specs()) or "none beyond the common ones"


def refuse_given(bench: Any, given: Iterable[str]) -> None:
    """Refuse every benchmark option among ``given`` (parameter names) that ``bench`` does not declare."""
    given = set(given)
    for name in declared_options():
        if name in given and not bench.accepts(name):
            why = bench.refusals.get(name) or f"it accepts {accepted_list(bench)}"
            raise UserError(f"{_option_name(name)} does not apply to {bench.name}: {why}")


def _click_option(spec: OptionSpec, *, hidden: bool, owners: list[str] | None, show_default: bool) -> click.Option:
    """A click option for a declared option; its default stays None (the Settings dataclass holds the default)."""
    help_text = spec.help
    if owners is not None:
        help_text += f" [{', '.join(owners)}]"
    if show_default and spec.default is not None and spec.cli_type is not bool:
        help_text += f"  [default: {spec.default}]"
    if spec.cli_type is bool:
        dflt = f"  [default: {'--' if spec.default else '--no-'}{spec.name.replace('_', '-')}]" if show_default else ""
        return click.Option([f"{spec.flag}/--no-{spec.name.replace('_', '-')}"], default=None, hidden=hidden,
                            help=help_text + dflt)
    kind: Any = {int: int, float: float, Path: click.Path()}.get(spec.cli_type, str)
    if spec.choices:
        kind = click.Choice(list(spec.choices))
    return click.Option([spec.flag], type=kind, default=None, hidden=hidden, help=help_text, metavar=spec.metavar)


def _head_params() -> list[click.Parameter]:
    return [
        click.Option(["--benchmark"], default="imagenet-c", show_default=True,
                     help="A registered benchmark (`shiftbench list benchmarks`): imagenet-c, imagenet-p, "
                     "imagenet-noc, imagenet-d, ...; with --help: its options only."),
        click.Option(["--model"], default=DEFAULT_MODEL, show_default=True,
                     help="Model: efficientnet-lite0 (built in), zoo:<name> (published weights, `shiftbench zoo "
                     "list`), torchvision:<arch>[:<WEIGHTS>], timm:<name>[.<tag>], hf-hub:<org>/<name>, "
                     "module.path:factory or path/to/file.py:factory. Weights missing offline: one line naming the URL "
                     "and where to place a copy."),
        click.Option(["--model-args"], default=None, metavar="KEY=VALUE,...",
                     help="Arguments for the model's factory (torchvision.models.get_model, timm.create_model or "
                     "yours), e.g. drop_rate=0.1,num_classes=10; stored with the model's name."),
        click.Option(["--weights"], type=click.Path(dir_okay=False), default=None,
                     help="Local checkpoint (state_dict), loaded with torch.load(weights_only=True); 'none' = random "
                     "weights."),
    ]


def _tail_params() -> list[click.Parameter]:
    return [
        click.Option(["--ray", "ray"], is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
                     help="Run the model on a Ray cluster (pip install 'shiftbench[ray]'): ADDRESS of a running "
                     "cluster (HOST:PORT, ray://HOST:PORT, or 'auto' for one started on this machine); alone: "
                     "RAY_ADDRESS, else Ray on this machine. One model copy per worker; this process alone writes "
                     "the store, with the same predictions as without --ray. --data must be on storage every node "
                     "sees at the same path."),
        click.Option(["--ray-cpus-per-worker"], type=float, default=None,
                     help="With --ray: CPUs (threads) each model worker declares (default 1)."),
        click.Option(["--ray-gpus-per-worker"], type=float, default=None,
                     help="With --ray: GPUs each model worker declares (default 1 with --device cuda, else 0)."),
        click.Option(["--batch-size"], type=click.IntRange(min=1), default=8, show_default=True),
        click.Option(["--threads"], default="auto", show_default=True, metavar="N|auto",
                     help="Threads for the model on the CPU. auto: the cores the one-minute load average leaves free "
                     "(all on an idle machine, 1 on a busy one; torch's own default, one per core, ran 3-4x slower on "
                     "a loaded machine: docs/performance.md)."),
        click.Option(["--device"], default="cpu", show_default=True, help="cpu, cuda, cuda:N or mps."),
        click.Option(["--store"], type=click.Path(dir_okay=False), default=str(DEFAULT_STORE), show_default=True,
                     help="Results store (SQLite); interrupted runs resume from it."),
        click.Option(["--rerun"], is_flag=True, help="Discard stored runs of the requested conditions and start over."),
        click.Option(["--results-format"], type=click.Choice(FORMATS), default="table", show_default=True),
        click.Option(["--results-file"], type=click.Path(dir_okay=False), default=None,
                     help="Write the results there instead of stdout (checked before the evaluation starts)."),
        click.Option(["--progress/--no-progress"], default=True, show_default=True,
                     help="Progress with rate and ETA on stderr."),
        click.Option(["--details/--no-details"], default=True, show_default=True,
                     help="Also print the per-condition details (errors per severity, ...)."),
        trust_cache_option(),
    ]


def evaluate_params(benchmark: str | None = None) -> list[click.Parameter]:
    """The parameters of ``evaluate``: the common ones and every declared option (with ``benchmark``: the others
    hidden, still parsed so that they are refused with one message)."""
    chosen = None
    if benchmark is not None:
        try:
            chosen = get_benchmark(benchmark)
        except UnknownNameError:
            chosen = None  # the command reports the unknown name
    declared = declared_options()
    if chosen is not None:  # its own declarations (help, default) first
        declared = {s.name: (s, [chosen.name]) for s in chosen.Settings.specs()} | {
            k: v for k, v in declared.items() if k not in chosen.Settings.names()}
    everyone = set(list_benchmarks())
    generated = [
        _click_option(spec, hidden=chosen is not None and not chosen.accepts(name),
                      owners=None if chosen is not None or set(owners) >= everyone else owners,
                      show_default=chosen is not None)
        for name, (spec, owners) in declared.items() if name not in DRIVER_OPTIONS
    ]
    return [*_head_params(), *generated, *_tail_params()]


def _benchmark_in(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "--benchmark" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--benchmark="):
            return a.split("=", 1)[1]
    return None


class EvaluateCommand(click.Command):
    """``evaluate``, whose options come from the registered benchmarks (built when first needed).

    :attr:`params` holds every declared option (``sweep`` and ``reproduce`` copy them); an invocation
    naming ``--benchmark`` parses and documents that benchmark's own options (the others hidden).
    """

    _META = "shiftbench.evaluate.params"

    @property  # type: ignore[override]
    def params(self) -> list[click.Parameter]:
        if self._built is None:
            self._built = evaluate_params()
        return self._built

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._built = value or None

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        own = ctx.meta.get(self._META)
        if own is None:
            return super().get_params(ctx)
        help_option = self.get_help_option(ctx)
        return [*own, help_option] if help_option is not None else list(own)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[self._META] = evaluate_params(_benchmark_in(args))  # benchmarks registered since the first use too
        return super().parse_args(ctx, args)


def _evaluate(ctx: click.Context, **kw: Any) -> None:
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
      shiftbench evaluate --benchmark imagenet-p --help
      shiftbench list benchmarks
    """  # noqa: D301 - click reads the backspace as "keep this paragraph as is"
    bench = get_benchmark(kw.pop("benchmark"))
    given = given_options(ctx)
    refuse_given(bench, given)
    check_results_file(kw["results_file"])
    check_store_path(kw["store"])
    store = kw["store"]
    kw["model"] = model_with_args(kw["model"], kw.pop("model_args", None))
    threads = kw.pop("threads", "auto")
    options = {k: v for k, v in kw.items() if k in COMMON_OPTIONS and k not in bench.Settings.names()}
    options |= {k: kw[k] for k in given if k in bench.Settings.names()}
    shown = progress(*bench.items) if kw["progress"] else None
    try:
        with model_threads(threads):
            result = run(bench, options, shown)
    except KeyboardInterrupt:
        click.echo(
            f"\nInterrupted. Everything finished so far is stored in {store}; run the same command again to resume.",
            err=True,
        )
        raise  # the root command turns it into exit code 130
    emit(result.report, kw["results_format"], kw["results_file"])


evaluate_cmd = EvaluateCommand("evaluate", callback=click.pass_context(_evaluate), help=_evaluate.__doc__)

"""A pytest plugin: the Python and shell examples of README.md and docs/*.md, collected as tests by Sybil.

Loaded by the repository's root ``conftest.py``.

One test per fenced ``python`` or ``bash`` block, named by file and line. The blocks of one file
share a namespace (Python) and a working directory (shell and Python), in order.

* Data a user must download is named in the block's first comments (``# needs: ...``) and lives
  at the paths the docs use; those paths are replaced by small stand-ins of the same layout built
  from ``../shared/data`` (:data:`STAND_INS`). A block naming any other ``/data/...`` path, or
  naming stand-in data without a ``# needs:`` comment, fails.
* ``<!-- skip: next "why" -->`` before a block skips it with that reason (shown by ``-ra``);
  ``<!-- example: slow -->`` marks it ``slow`` (run with ``pytest -m slow``).
* The run ends with the list of the examples it ran (pytest's terminal summary).

See docs/contributing.md.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DIR = Path(os.environ.get("SHIFTBENCH_SAMPLE_DIR", REPO.parent / "shared" / "data" / "imagenet-sample-100"))
SHELL_TIMEOUT_S = 600

try:
    from sybil import Example, Sybil
    from sybil.parsers.markdown import CodeBlockParser, SkipParser
except ImportError:  # sybil comes with the test extra; without it the docs are simply not collected
    Sybil = None  # type: ignore[assignment,misc]

# ImageNet validation photos of the shared sample (one per class) that make the ImageFolder stand-in
IMAGENET_VAL = ["n01440764_tench", "n01530575_brambling"]
# (domain, DomainNet class, sample photo): one image per domain, as mDE needs all six
DOMAINNET = [
    ("clipart", "bird", "n01530575_brambling"),
    ("infograph", "dog", "n02110185_Siberian_husky"),
    ("painting", "mountain", "n09193705_alp"),
    ("quickdraw", "fish", "n01440764_tench"),
    ("real", "zebra", "n02391049_zebra"),
    ("sketch", "bird", "n01820546_lorikeet"),
]


@cache
def _stand_in_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="shiftbench-doc-data-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name in IMAGENET_VAL:
        dst = root / "imagenet-val" / name.split("_")[0] / f"{name}.JPEG"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DIR / f"{name}.JPEG", dst)
    for domain, cls, name in DOMAINNET:
        dst = root / "DomainNet" / domain / cls / f"{domain}_{name}.jpg"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DIR / f"{name}.JPEG", dst)
    return root


def stand_ins(workdir: Path) -> dict[str, str]:
    """Documented data path -> the stand-in used when the examples run."""
    root = _stand_in_root()
    return {
        "/data/imagenet/val": str(root / "imagenet-val"),  # ImageFolder: <wnid>/<image>
        "/data/DomainNet": str(root / "DomainNet"),  # <domain>/<class>/<image>
        "/data/ImageNet-C": str(workdir / "ImageNet-C"),  # written by `generate` in the same document
    }


STAND_INS = ("/data/imagenet/val", "/data/DomainNet", "/data/ImageNet-C", "photo.jpg")


def _prepare(example: Example) -> tuple[str, Path]:
    """The block's source with stand-ins in place of the documented data, and the document's working directory."""
    ns = example.namespace
    workdir: Path = ns["__workdir__"]
    source: str = example.parsed
    comments = "\n".join(line for line in source.splitlines() if line.lstrip().startswith("#"))
    named = [p for p in STAND_INS if p in source]
    if named and "needs:" not in comments:
        raise AssertionError(f"this example uses {named} but no '# needs: ...' comment says the user must download it")
    for documented, stand_in in stand_ins(workdir).items():
        source = source.replace(documented, stand_in)
    unknown = re.findall(r"(?<![\w.])/data/[\w./-]*", source)
    if unknown:
        raise AssertionError(f"no stand-in for {unknown}: add one to conftest.stand_ins or use a documented path")
    return source, workdir


def evaluate_bash(example: Example) -> None:
    source, workdir = _prepare(example)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", source],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip().splitlines()[-30:]
        raise AssertionError(f"shell example exited {done.returncode}:\n" + "\n".join(out))


def evaluate_python(example: Example) -> None:
    source, workdir = _prepare(example)
    code = compile("\n" * example.line + source, str(example.path), "exec")  # tracebacks name the document's lines
    before = Path.cwd()
    os.chdir(workdir)
    try:
        exec(code, example.namespace)
    finally:
        os.chdir(before)


def _setup(namespace: dict[str, Any]) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="shiftbench-doc-"))
    shutil.copyfile(SAMPLE_DIR / f"{IMAGENET_VAL[1]}.JPEG", workdir / "photo.jpg")
    for folder in ("tools", "perf"):  # for examples that run the repository's scripts (python tools/gen_docs.py)
        (workdir / folder).symlink_to(REPO / folder, target_is_directory=True)
    namespace["__workdir__"] = workdir


def _teardown(namespace: dict[str, Any]) -> None:
    shutil.rmtree(namespace["__workdir__"], ignore_errors=True)


@cache
def doc_examples(root: Path) -> Any:
    """The Sybil configuration for the Markdown files under ``root`` (the repository, or a test's temporary folder)."""
    return Sybil(
        parsers=[
            SkipParser(),
            CodeBlockParser(language="python", evaluator=evaluate_python),
            CodeBlockParser(language="bash", evaluator=evaluate_bash),
        ],
        patterns=["*.md"],
        path=str(root),
        setup=_setup,
        teardown=_teardown,
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    if Sybil is None or file_path.suffix != ".md":
        return None
    return doc_examples(parent.config.rootpath).pytest()(file_path, parent)


_SLOW = re.compile(r"<!--\s*example:\s*slow\s*-->")


def _is_doc_example(item: pytest.Item) -> bool:
    return hasattr(item, "example") and str(getattr(item, "path", "")).endswith(".md")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_doc_example(item):
            example = item.example  # type: ignore[attr-defined]
            before = example.document.text[: example.start].rstrip().splitlines()[-3:]
            if any(_SLOW.search(line) for line in before):
                item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the Markdown examples this run ran, with their outcome, in document order."""
    ran = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid = getattr(report, "nodeid", "")
            if not nodeid.split("::")[0].endswith(".md"):
                continue
            when = getattr(report, "when", None)  # stats also hold deselected items
            if when == "call" or (when == "setup" and report.outcome != "passed"):
                line = re.search(r"line:(\d+)", nodeid)
                ran.append((nodeid.split("::")[0], int(line.group(1)) if line else 0, report.outcome, nodeid))
    if ran:
        terminalreporter.section("Markdown examples")
        for _, _, outcome, nodeid in sorted(ran):
            terminalreporter.write_line(f"{outcome:8} {nodeid}")

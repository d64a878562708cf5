"""The Markdown-example collector (tests/markdown_examples.py) fails broken examples and says what it ran."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

GOOD_AND_BROKEN = '''# A page

```python
x = 6 * 7
```

```python
assert x == 42  # the blocks of one file share a namespace
```

```bash
echo hello > out.txt && grep -q hello out.txt
```

```python
assert x == 41, "a deliberately broken example"
```

```bash
false  # a deliberately broken shell example
```

<!-- skip: next "needs a GPU" -->
```bash
nvidia-smi
```

<!-- example: slow -->
```python
y = 1
```

```toml
not = "an example"
```
'''


@pytest.fixture
def run_page(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    pytester.makeconftest('pytest_plugins = ["tests.markdown_examples"]\n')

    def run(text: str, *args: str) -> pytest.RunResult:
        pytester.makefile(".md", page=text)
        return pytester.runpytest("-p", "no:cacheprovider", "-ra", *args)

    return run


def test_broken_examples_fail_and_the_run_lists_every_example(run_page) -> None:  # type: ignore[no-untyped-def]
    result = run_page(GOOD_AND_BROKEN)
    result.assert_outcomes(passed=5, failed=2, skipped=1)  # the skip directive is an item of its own (it passes)
    out = result.stdout.str()
    assert "a deliberately broken example" in out
    assert "shell example exited 1" in out
    assert "needs a GPU" in out  # a skip says why
    assert "Markdown examples" in out
    for line in (3, 7, 11, 15, 19, 24, 29):
        assert f"page.md::line:{line},column:1" in out, line


def test_slow_examples_follow_the_marker(run_page) -> None:  # type: ignore[no-untyped-def]
    result = run_page(GOOD_AND_BROKEN, "-m", "slow")
    result.assert_outcomes(passed=1)
    assert "page.md::line:29,column:1" in result.stdout.str()


def test_data_paths_need_a_stand_in_and_a_needs_comment(run_page) -> None:  # type: ignore[no-untyped-def]
    page = """
```bash
# needs: a data set nobody provides a stand-in for
ls /data/NotAStandIn
```

```bash
ls /data/imagenet/val
```

```bash
# needs: the ImageNet validation set (/data/imagenet/val)
test "$(ls /data/imagenet/val | wc -l)" -ge 2
```
"""
    result = run_page(page)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "no stand-in for ['/data/NotAStandIn']" in out
    assert "no '# needs: ...' comment" in out

"""Repository-wide pytest set-up: the examples of README.md and docs/*.md run as tests (tests/markdown_examples.py)."""

pytest_plugins = ["tests.markdown_examples"]

"""The package version (also `shiftbench.__version__`)."""

__version__ = "0.1.0"

__all__ = ["__version__"]

"""The papers the built-in benchmarks come from, as users cite them (authors, title, venue, year).

Each benchmark module names its paper (``Benchmark.paper``); ``shiftbench list benchmarks`` and the report print it.
The published tables of the model zoo cite the same papers (``shiftbench/data/zoo_tables.json``); a test keeps the two
in agreement.
"""

from __future__ import annotations

from ..evaluation.protocol import Paper

__all__ = ["HENDRYCKS2018", "HENDRYCKS2019", "LAUGROS2020", "LAUGROS2021", "RUSAK2022", "PAPERS"]

HENDRYCKS2018 = Paper(
    "Hendrycks & Dietterich", "Benchmarking the Corruption and Structural Robustness of Neural Networks",
    "draft of the ImageNet-C paper, with the full CE tables", 2018)
"""The draft with the CE tables, the style-transfer corruption and the structural hold-outs (ICONS-50, CIFAR-100,
ImageNet-22K)."""

HENDRYCKS2019 = Paper(
    "Hendrycks & Dietterich", "Benchmarking Neural Network Robustness to Common Corruptions and Perturbations", "ICLR",
    2019)
"""ImageNet-C and ImageNet-P."""

LAUGROS2020 = Paper(
    "Laugros, Caplier & Ospici",
    "Increasing the Coverage and Balance of Robustness Benchmarks by Using Non-Overlapping Corruptions",
    "arXiv:2010.13365 (ICLR 2021 submission)", 2020)
"""ImageNet-NOC and the non-overlapping selection."""

LAUGROS2021 = Paper(
    "Laugros, Caplier & Ospici", "Using the Overlapping Score to Improve Corruption Benchmarks",
    "IEEE ICIP 2021 (arXiv:2105.12357)", 2021)
"""The overlapping score, and the border and obstruction corruptions (Table 1)."""

RUSAK2022 = Paper(
    "Rusak, Schneider, Pachitariu, Gehler, Bringmann, Bethge & Brendel",
    "ImageNet-D: A new challenging robustness dataset inspired by domain adaptation", "ICML 2022 Shift Happens workshop",
    2022)
"""ImageNet-D."""

PAPERS: tuple[Paper, ...] = (HENDRYCKS2018, HENDRYCKS2019, LAUGROS2020, LAUGROS2021, RUSAK2022)

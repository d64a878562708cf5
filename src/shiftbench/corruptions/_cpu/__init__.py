"""The corruption engine's compiled CPU kernels (Numba; JPEG's DCT steps as LLVM vector IR).

Each module holds the kernels of one corruption or primitive; the corruption modules register
them as their ``"compiled"`` backend. Nothing outside :mod:`shiftbench.corruptions` imports them.
"""

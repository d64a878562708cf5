"""Run shiftbench's work on a Ray cluster (``pip install 'shiftbench[ray]'``).

:class:`RayExecutor` connects to a cluster (or starts Ray on this machine),
runs picklable work items as Ray tasks (one CPU each unless told otherwise),
reruns the items of a worker or node that dies, and hands the results back to
the driver, which alone writes journals, manifests and result stores.
:class:`RayPredictions` runs the evaluation loop's model on the cluster
(``shiftbench evaluate --ray``). See docs/ray.md.
"""

from __future__ import annotations

from .executor import ModelSpec, PredictionBatch, RayExecutor, WorkItem, require_ray, work_items
from .predictions import RayPredictions, ray_predictions

__all__ = ["RayExecutor", "ModelSpec", "PredictionBatch", "WorkItem", "require_ray", "work_items", "RayPredictions",
           "ray_predictions"]

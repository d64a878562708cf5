"""A multi-node Ray cluster on this machine: a head and worker nodes, each its own ``ray start --block``
process on 127.0.0.1. For tests, benchmarks and trying ``--ray`` before a real cluster; every process it
starts is stopped by :meth:`LocalCluster.stop` (or leaving the ``with`` block).

Example::

    with LocalCluster(nodes=2) as c:
        subprocess.run(["shiftbench", "generate", "imagenet-c", ..., "--ray", c.address])
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import ShiftbenchError
from .executor import require_ray

__all__ = ["LocalCluster", "free_port"]


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """Ray nodes on 127.0.0.1, each a separate ``ray start --block`` process in a session of its own.

    Args:
        nodes: number of nodes (the first is the head).
        cpus: CPUs each node offers.
        env: environment of the nodes (and so of their workers), e.g. a ``PYTHONPATH`` that finds shiftbench.
            Token authentication is off (``RAY_AUTH_MODE=disabled``) so that a token file in ``~/.ray``
            (written by a Ray started with no address) cannot turn it on; drivers connect with
            :attr:`driver_env`.
        root: folder for Ray's session files (default: a new short folder under /tmp; Ray's socket paths
            must stay under the Unix limit of 107 bytes); removed by :meth:`stop`.
        health_check_ms: how often the head checks on the nodes (a lost node is noticed after 5 misses).
    """

    def __init__(self, nodes: int = 2, *, cpus: int = 1, env: dict[str, str] | None = None, root: str | Path | None = None,
                 health_check_ms: int = 1000) -> None:
        require_ray()
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="sbray-", dir="/tmp") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.cpus = cpus
        self.env = dict(os.environ if env is None else env)
        self.env.pop("RAY_ADDRESS", None)
        self.env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.env["RAY_AUTH_MODE"] = "disabled"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen[bytes]] = []
        ray_bin = Path(sys.executable).parent / "ray"
        self._ray = [str(ray_bin)] if ray_bin.exists() else [sys.executable, "-m", "ray.scripts.scripts"]
        config = json.dumps({"health_check_period_ms": health_check_ms, "health_check_failure_threshold": 5})
        try:
            self._start(["--head", "--port", str(self.port), "--temp-dir", str(self.root / "r"),
                         "--include-dashboard", "false", "--system-config", config])
            for _ in range(nodes - 1):
                self.add_node()
        except BaseException:
            self.stop()
            raise

    def _start(self, args: list[str]) -> None:
        with open(self.root / f"node{len(self.nodes)}.log", "wb") as log:  # the node keeps its own copy
            p = subprocess.Popen(
                [*self._ray, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus),
                 "--disable-usage-stats", *args],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.nodes.append(p)
        self.wait_for(sum(q.poll() is None for q in self.nodes))  # nodes killed on purpose are not waited for

    @property
    def driver_env(self) -> dict[str, str]:
        """The environment for a driver process of this cluster (``RAY_AUTH_MODE=disabled``, as the nodes)."""
        return dict(self.env)

    def add_node(self) -> None:
        """Start one more worker node and wait until the head counts it."""
        self._start(["--address", self.address])

    def alive(self) -> int:
        """Number of live nodes, as the head sees them (asked from a separate process)."""
        code = (f"import ray; ray.init(address={self.address!r}, logging_level='ERROR'); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        try:
            r = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return 0
        out = r.stdout.strip().splitlines()
        return int(out[-1]) if r.returncode == 0 and out and out[-1].isdigit() else 0

    def wait_for(self, n: int, timeout: float = 180) -> None:
        """Wait until ``n`` nodes are alive."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.nodes and self.nodes[0].poll() is not None:
                raise ShiftbenchError(f"the Ray head exited; see {self.root / 'node0.log'}")
            if self.alive() >= n:
                return
            time.sleep(1)
        raise ShiftbenchError(f"fewer than {n} Ray nodes after {timeout:.0f} s; see the logs in {self.root}")

    def raylet_of(self, node: int) -> int:
        """The pid of node ``node``'s raylet (a descendant of its ``ray start`` process; Linux)."""
        kids: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
                names[int(d.name)] = (d / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d.name))
        todo = [self.nodes[node].pid]
        while todo:
            pid = todo.pop()
            if names.get(pid, "").endswith("/raylet"):
                return pid
            todo.extend(kids.get(pid, []))
        raise ShiftbenchError(f"no raylet found under node {node}")

    def stop(self) -> None:
        """Stop every node this object started (SIGTERM, then SIGKILL to what is left of each node's session)."""
        for p in self.nodes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.nodes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if p.poll() is None:
                p.wait()
        self.nodes = []
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""Env workers as Ray actors: ``GroupVectorEnv(..., worker_backend="ray")``.

Each actor holds several envs and answers the same batched commands as a worker process
(:func:`agentgym_rl.workers.run_command`: ``reset``, ``step``, ``call``, ``getattr``), so
both backends give the same results. Ray places the actors on any node of the cluster
that has the CPUs they ask for. :class:`RayWorkerHandle` offers the
:class:`~agentgym_rl.workers.WorkerHandle` surface (``send``, ``receive``, ``kill``,
``close``): an actor that dies answers with :class:`~agentgym_rl.workers.WorkerDied`,
one that gives no answer within the timeout is killed and reported as
:class:`~agentgym_rl.workers.WorkerHung`, and ``GroupVectorEnv`` restarts it or raises
just as it does for a process.

Ray is an optional extra: ``pip install "agentgym-rl[ray]"``. The actors import
``agentgym_rl`` on their node, so every node needs the package (and its env data).
"""

from __future__ import annotations

import contextlib
import functools
import os
import traceback
from collections.abc import Iterator
from typing import Any

from agentgym_rl.workers import (
    WorkerDied,
    WorkerEnvError,
    WorkerHung,
    close_envs,
    make_envs,
    run_command,
    unpack,
)

__all__ = ["RayWorkerHandle", "connect", "require_ray"]

#: Seconds an actor may take to be placed, start and make its envs (its first answer).
START_TIMEOUT = 60.0

_INSTALL = 'the Ray backend needs Ray: pip install "agentgym-rl[ray]"'


def require_ray() -> Any:
    """Import ``ray``, or raise an ImportError that names the extra to install."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(f'{_INSTALL} (or use worker_backend="process")') from error
    return ray


def connect(address: str | None) -> Any:
    """Join the Ray cluster at ``address`` unless this process is connected already.

    Args:
        address: ``None`` (``$RAY_ADDRESS`` if set, else start a local Ray instance),
            ``"auto"`` (the cluster started on this node with ``ray start``) or
            ``"ray://host:10001"`` (Ray Client).

    Returns:
        The ``ray`` module.
    """
    ray = require_ray()
    if ray.is_initialized():
        return ray
    if address in (None, "local") and not (address is None and os.environ.get("RAY_ADDRESS")):
        with _loopback_node_ip(ray):
            ray.init(address=address, _node_ip_address="127.0.0.1", include_dashboard=False)
    else:
        ray.init(address=address)
    return ray


@contextlib.contextmanager
def _loopback_node_ip(ray: Any) -> Iterator[None]:
    """Let a new local Ray instance keep 127.0.0.1 as its node IP, so it listens on loopback only.

    Ray (2.60) binds its gRPC servers (GCS, raylet's node and object managers, every worker's
    core worker) and the runtime env agent to the node IP, but on Linux it replaces a node IP
    of 127.0.0.1 with the machine's routable address (``services.resolve_ip_for_localhost``),
    so ``_node_ip_address="127.0.0.1"`` alone still listens on every interface. Only where
    ``ray_constants.ENABLE_RAY_CLUSTER`` is false (macOS and Windows; on Linux
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` before ``import ray``) does it keep the loopback IP;
    this sets that flag for the ``ray.init`` call. No dashboard: its HTTP server is not needed.
    Token authentication (``RAY_AUTH_MODE``, on by default for a new local instance) is untouched.
    Measured by ``tests/test_scaling.py::test_local_ray_listens_on_loopback_only``.
    """
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if constants is None or not hasattr(constants, "ENABLE_RAY_CLUSTER"):
        yield  # another Ray layout: the test above says whether it still binds to loopback
        return
    saved = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved


class _EnvActor:
    """The actor: a worker's envs and the command loop's body (Ray calls one method at a time)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], count: int, want_task_ids: bool) -> None:
        self.envs: list[Any] = []
        try:
            self.envs, ready = make_envs(env_id, env_kwargs, count, want_task_ids)
            self._ready: tuple = ("ok", ready)
        except BaseException:  # noqa: BLE001 - reported by ready(), as a worker process does
            self._ready = ("error", traceback.format_exc(), None)

    def ready(self) -> tuple:
        return self._ready

    def run(self, command: str, payload: Any) -> tuple:
        return run_command(self.envs, command, payload)

    def close(self) -> None:
        close_envs(self.envs)
        self.envs = []


@functools.cache
def _actor_class() -> Any:
    ray = require_ray()
    return ray.remote(max_restarts=0, max_task_retries=0)(_EnvActor)


class RayWorkerHandle:
    """The driver's end of one env actor: the actor and the global env indices it holds.

    Args:
        index: The worker's position in the vector env.
        env_indices: The global env slots it holds.
        actor: The Ray actor handle.
    """

    def __init__(self, index: int, env_indices: list[int], actor: Any) -> None:
        self.index = index
        self.env_indices = env_indices
        self.actor = actor
        self._pending: Any = actor.ready.remote()  # answered by the first receive()
        self._starting = True
        self._pid: int | None = None

    @classmethod
    def start(
        cls,
        index: int,
        env_indices: list[int],
        env_id: str,
        env_kwargs: dict[str, Any],
        want_task_ids: bool = False,
        actor_options: dict[str, Any] | None = None,
    ) -> RayWorkerHandle:
        """Create an actor holding ``len(env_indices)`` envs (placed by Ray with ``actor_options``)."""
        options = {"num_cpus": 1.0, **(actor_options or {})}
        actor = _actor_class().options(**options).remote(env_id, env_kwargs, len(env_indices), want_task_ids)
        return cls(index, env_indices, actor)

    @property
    def pid(self) -> int | None:
        """The actor's process id on its node (known once it has answered its ready message)."""
        return self._pid

    def local(self, env_index: int) -> int:
        """The worker-local index of a global env index."""
        return self.env_indices.index(env_index)

    def send(self, command: str, payload: Any) -> None:
        """Submit a command (answered by :meth:`receive`); a dead actor shows at the receive."""
        self._pending = self.actor.run.remote(command, payload)

    def receive(self, timeout: float | None) -> Any:
        """The answer to the last command; raises on death, hang or an env error."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        ref, self._pending = self._pending, None
        if self._starting and timeout is not None:  # first Ray places it (maybe after freeing CPUs)
            timeout = max(timeout, START_TIMEOUT)
        ready, _ = ray.wait([ref], timeout=timeout)
        if not ready:
            self.kill()
            raise WorkerHung(f"worker {self.index} (Ray actor {self._name()}) gave no answer in {timeout} s")
        try:
            message = ray.get(ref)
        except RayActorError as error:  # Ray's message: a first line, details, then the cause
            lines = str(error).strip().splitlines() or [type(error).__name__]
            why = lines[0] + (f" {lines[-1].strip()}" if len(lines) > 1 else "")
            raise WorkerDied(f"worker {self.index} (Ray actor {self._name()}) died: {why}") from error
        except RayTaskError as error:  # raised outside run_command's guard (e.g. unpickling)
            raise WorkerEnvError(str(error)) from error
        result = unpack(message, self.env_indices)
        if self._starting:  # the ready message
            self._starting, self._pid = False, result["pid"]
        return result

    def _name(self) -> str:
        return self.actor._actor_id.hex()[:12] + (f", pid {self._pid}" if self._pid else "")

    def kill(self) -> None:
        """End the actor now (``ray.kill``); Ray frees its CPUs."""
        import ray

        if ray.is_initialized():
            ray.kill(self.actor, no_restart=True)

    def close(self, timeout: float = 5.0) -> None:
        """Ask the actor to close its envs, then end it; safe after Ray has shut down."""
        import ray

        if not ray.is_initialized():  # the driver's Ray is gone: its actors went with it
            return
        try:
            ray.wait([self.actor.close.remote()], timeout=timeout)
        except Exception:  # noqa: BLE001 - a dead actor needs no closing
            pass
        self.kill()

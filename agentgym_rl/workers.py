"""Env worker processes for :class:`agentgym_rl.GroupVectorEnv`.

Each worker is a process that holds several envs made with ``gym.make`` and serves
batched commands over a pipe: ``reset`` and ``step`` on a list of its envs, ``call``
of an unwrapped env's method (``snapshot``, ``restore``, ...), ``close``. An env that
raises answers with the worker's traceback; the worker keeps serving. The parent side
(:class:`WorkerHandle`) sends to every worker first and then collects, so all workers
step at once, and it detects a worker that died (EOF) or hangs (no answer within the
timeout).
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["WorkerDied", "WorkerEnvError", "WorkerHandle", "WorkerHung"]


class WorkerDied(RuntimeError):
    """The worker process ended (crash, kill, out of memory) without answering."""


class WorkerHung(RuntimeError):
    """The worker did not answer within the timeout; it has been killed."""


class WorkerEnvError(RuntimeError):
    """An env raised inside a worker; the message carries the worker's traceback."""


def _sync_time_limit(env: Any) -> None:
    """After ``restore``, set the ``TimeLimit`` wrapper's step count to the restored episode's."""
    import gymnasium as gym

    steps = getattr(env.unwrapped, "num_steps", None)
    wrapper = env
    while steps is not None and isinstance(wrapper, gym.Wrapper):
        if isinstance(wrapper, gym.wrappers.TimeLimit):
            wrapper._elapsed_steps = steps
        wrapper = wrapper.env


def make_envs(
    env_id: str, env_kwargs: dict[str, Any], count: int, want_task_ids: bool
) -> tuple[list[Any], dict]:
    """Make a worker's envs; returns them and its ready message (pid, the split's task ids)."""
    import gymnasium as gym

    import agentgym_rl  # noqa: F401 - registers the envs in this process

    envs = [gym.make(env_id, **env_kwargs) for _ in range(count)]
    task_ids = list(getattr(envs[0].unwrapped, "task_ids", [])) if want_task_ids and envs else []
    return envs, {"pid": os.getpid(), "task_ids": task_ids}


def run_command(envs: list[Any], command: str, payload: Any) -> tuple:
    """Run one batched command on a worker's envs: ``("ok", results)`` or ``("error", traceback, index)``.

    Shared by the process workers (:func:`_serve`) and the Ray actors
    (:mod:`agentgym_rl.ray_workers`), so both backends answer alike.
    """
    index = None
    try:
        if command == "reset":
            results = []
            for index, seed, options in payload:
                results.append((index, *envs[index].reset(seed=seed, options=options)))
        elif command == "step":
            results = []
            for index, action in payload:
                results.append((index, *envs[index].step(action)))
        elif command == "call":
            index, name, args = payload
            results = getattr(envs[index].unwrapped, name)(*args)
            if name == "restore":
                _sync_time_limit(envs[index])
        elif command == "getattr":
            index, name = payload
            results = getattr(envs[index].unwrapped, name)
        else:
            raise ValueError(f"unknown worker command {command!r}")
        return ("ok", results)
    except Exception:  # noqa: BLE001 - the env's error goes back with its traceback
        return ("error", traceback.format_exc(), index)


def close_envs(envs: list[Any]) -> None:
    """Close every env, best effort (at shutdown)."""
    for env in envs:
        try:
            env.close()
        except Exception:  # noqa: BLE001 - closing is best effort at shutdown
            pass


def unpack(message: tuple, env_indices: list[int]) -> Any:
    """The result of a worker's answer; an env error raises :class:`WorkerEnvError`."""
    if message[0] == "error":
        _, trace, local_index = message
        raise WorkerEnvError(trace if local_index is None else f"env {env_indices[local_index]}: {trace}")
    return message[1]


def _serve(
    conn: Connection, env_id: str, env_kwargs: dict[str, Any], count: int, want_task_ids: bool
) -> None:
    """The worker's main loop (runs in the child process)."""
    envs: list[Any] = []
    try:
        envs, ready = make_envs(env_id, env_kwargs, count, want_task_ids)
        conn.send(("ok", ready))
    except BaseException:  # noqa: BLE001 - report anything to the parent, then stop
        conn.send(("error", traceback.format_exc(), None))
        return
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):  # the parent is gone: exit instead of lingering as an orphan
            break
        if command == "close":
            break
        conn.send(run_command(envs, command, payload))
    close_envs(envs)
    conn.close()


@dataclass
class WorkerHandle:
    """The parent's end of one worker: its process, pipe and the global env indices it holds."""

    index: int
    env_indices: list[int]
    process: multiprocessing.process.BaseProcess
    conn: Connection

    @classmethod
    def start(
        cls,
        index: int,
        env_indices: list[int],
        env_id: str,
        env_kwargs: dict[str, Any],
        context: str,
        want_task_ids: bool = False,
    ) -> WorkerHandle:
        """Start a worker process holding ``len(env_indices)`` envs."""
        ctx = multiprocessing.get_context(context)
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=_serve,
            args=(child, env_id, env_kwargs, len(env_indices), want_task_ids),
            name=f"agentgym-rl-worker-{index}",
            daemon=True,
        )
        process.start()
        child.close()  # only the worker holds this end: its death gives us EOF
        return cls(index=index, env_indices=env_indices, process=process, conn=parent)

    @property
    def pid(self) -> int | None:
        """The worker process's id."""
        return self.process.pid

    def local(self, env_index: int) -> int:
        """The worker-local index of a global env index."""
        return self.env_indices.index(env_index)

    def send(self, command: str, payload: Any) -> None:
        """Send a command (answered by :meth:`receive`)."""
        try:
            self.conn.send((command, payload))
        except (BrokenPipeError, OSError) as error:
            raise WorkerDied(f"worker {self.index} (pid {self.process.pid}) is gone: {error}") from error

    def receive(self, timeout: float | None) -> Any:
        """The answer to the last command; raises on death, hang or an env error."""
        try:
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerHung(
                    f"worker {self.index} (pid {self.process.pid}) gave no answer in {timeout} s"
                )
            message = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError) as error:
            code = self.process.exitcode
            raise WorkerDied(
                f"worker {self.index} (pid {self.process.pid}) died (exit code {code})"
            ) from error
        return unpack(message, self.env_indices)

    def kill(self) -> None:
        """End the process now (terminate, then kill) and reap it."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
        self.process.join(2)
        self.conn.close()

    def close(self, timeout: float = 5.0) -> None:
        """Ask the worker to close its envs and exit; kill it if it does not."""
        if self.process.is_alive():
            try:
                self.conn.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
            self.process.join(timeout)
        self.kill()

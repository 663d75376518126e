"""Past one machine, on one machine: GroupVectorEnv on Ray actors, WebShop under gunicorn (127.0.0.1 only)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from process_tree import descendants

from agentgym_rl import GroupVectorEnv
from agentgym_rl.vector import WorkerFailure

ENV_ID = "AgentGymRL/ALFWorld-v0"
KW = dict(split="valid_unseen", data_dir="generated")
REPO = Path(__file__).resolve().parents[1]


def _new_processes(before: set[int]) -> list[str]:
    """Command lines of descendants not in ``before`` (bar multiprocessing's resource tracker, which
    the process backend starts once and which lives as long as this process, by design)."""
    lines = []
    for pid in sorted(descendants() - before):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "multiprocessing.resource_tracker" not in line:
            lines.append(f"{pid}: {line}")
    return lines


def _wait_gone(before: set[int], seconds: float = 20.0) -> list[str]:
    """The new descendants still alive after at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := _new_processes(before)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


# ---------------------------------------------------------------------------------------- Ray backend
def test_ray_backend_without_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=re.escape('pip install "agentgym-rl[ray]"')):
        GroupVectorEnv(ENV_ID, num_tasks=1, group_size=1, worker_backend="ray", **KW)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs on 127.0.0.1, shut down (every process gone) after the module."""
    ray = pytest.importorskip("ray")
    from agentgym_rl.ray_workers import _loopback_node_ip

    before = descendants()
    with _loopback_node_ip(ray):  # else Ray on Linux swaps 127.0.0.1 for the host's address
        ray.init(
            address="local",  # a new cluster, never one named by $RAY_ADDRESS
            num_cpus=2,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
    yield ray
    ray.shutdown()
    assert _wait_gone(before) == [], "Ray left processes behind"


def _rollout(backend: str, steps: int = 6) -> list:
    """Same tasks, seed and seeded random admissible actions; everything the env returns."""
    envs = GroupVectorEnv(
        ENV_ID, num_tasks=2, group_size=2, workers=2, worker_backend=backend, timeout=60, **KW
    )
    try:
        obs, info = envs.reset(seed=5, options={"tasks": [envs.task_ids[1], envs.task_ids[4]]})
        trace = [obs.tolist(), sorted(info), info["state_key"].tolist(), info["history_keys"].tolist()]
        rng = np.random.default_rng(0)
        for _ in range(steps):
            actions = [str(rng.choice(a)) for a in info["admissible_actions"]]
            obs, rewards, terminated, truncated, info = envs.step(actions)
            trace.append(
                (obs.tolist(), rewards.tolist(), terminated.tolist(), truncated.tolist(), sorted(info))
            )
            trace.append(
                [info[k].tolist() for k in ("state_key", "prefix_key", "history_keys", "first_visit")]
            )
            trace.append([list(a) for a in info["admissible_actions"]] + info["task_id"].tolist())
        return trace
    finally:
        envs.close()


def test_ray_backend_gives_the_process_backends_results(ray_cluster):
    assert _rollout("ray") == _rollout("process")


def test_ray_workers_are_actors_placed_by_ray(ray_cluster):
    envs = GroupVectorEnv(
        ENV_ID, num_tasks=1, group_size=2, worker_backend="ray", **KW
    )  # workers: cluster CPUs
    try:
        actors = envs.worker_actors()
        assert len(actors) == 2 and all(pid and pid != os.getpid() for pid in envs.worker_pids())
        assert envs.worker_slots() == [[0], [1]]
    finally:
        envs.close()


def test_killed_actor_is_restarted_and_its_envs_truncated(ray_cluster):
    envs = GroupVectorEnv(
        ENV_ID, num_tasks=2, group_size=2, workers=2, worker_backend="ray", timeout=60, **KW
    )
    try:
        envs.reset(seed=0)
        envs.step(["look"] * 4)
        victim, lost, kept = envs.worker_actors()[1], envs.worker_slots()[1], envs.worker_slots()[0]
        ray_cluster.kill(victim)
        obs, rewards, terminated, truncated, info = envs.step(["look"] * 4)
        assert truncated[lost].all() and not truncated[kept].any() and info["stepped"].all()
        assert all(info["worker_failed"][i] is True for i in lost) and not info["active"][lost].any()
        assert info["active"][kept].all()
        assert envs.worker_actors()[1]._actor_id != victim._actor_id
        envs.reset(seed=0)  # the fresh actor plays again
        assert envs.step(["look"] * 4)[4]["stepped"].all()
    finally:
        envs.close()


def test_killed_actor_raises_worker_failure_naming_envs_and_tasks(ray_cluster):
    envs = GroupVectorEnv(
        ENV_ID,
        num_tasks=2,
        group_size=2,
        workers=2,
        worker_backend="ray",
        on_worker_failure="raise",
        timeout=60,
        **KW,
    )
    try:
        envs.reset(seed=0)
        ray_cluster.kill(envs.worker_actors()[0])
        start = time.monotonic()
        with pytest.raises(WorkerFailure, match=r"died.*envs \[0, 2\] playing \['") as caught:
            envs.step(["look"] * 4)
        assert time.monotonic() - start < 30  # no hang
        assert all(task in str(caught.value) for task in envs.tasks)
        assert not envs.active[[0, 2]].any() and envs.active[[1, 3]].all()
        envs.reset(seed=0)  # replaced all the same
        assert envs.step(["look"] * 4)[4]["stepped"].all()
    finally:
        envs.close()


def test_hung_actor_is_killed_after_the_timeout_and_reported(ray_cluster):
    envs = GroupVectorEnv(
        ENV_ID,
        num_tasks=2,
        group_size=1,
        workers=2,
        worker_backend="ray",
        on_worker_failure="raise",
        timeout=60,
        **KW,
    )
    try:
        envs.reset(seed=0)
        envs.timeout = 3  # after start-up and the first reset, which may be slow on a busy machine
        os.kill(envs.worker_pids()[0], signal.SIGSTOP)  # the actor runs on this machine
        start = time.monotonic()
        with pytest.raises(WorkerFailure, match=r"no answer in 3 s.*envs \[0\] playing \['"):
            envs.step(["look", "look"])
        assert time.monotonic() - start < 3 + 30  # the timeout, then Ray frees the CPU for the replacement
        envs.reset(seed=0)
        assert envs.step(["look", "look"])[4]["stepped"].all()
    finally:
        envs.close()


# ---------------------------------------------------------------------------------------- gunicorn
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def gunicorn_server():
    """``gunicorn -c python:webshop_server.gunicorn_conf -w 2`` on a free loopback port; yields (url, log)."""
    pytest.importorskip("gunicorn")
    requests = pytest.importorskip("requests")
    port, before = _free_port(), descendants()
    env = {**os.environ, "WEBSHOP_SERVER_CONFIG": json.dumps({"num_products": 80, "seed": 0})}
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webshop_server.gunicorn_conf"]
    command += ["-w", "2", "--threads", "4", "-b", f"127.0.0.1:{port}", "--access-logfile", "-"]
    command += ["--access-logformat", "%(p)s %(m)s %(U)s %(s)s"]  # worker pid, method, path, status
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "".join(log)
            assert time.monotonic() < deadline, "gunicorn did not start in 60 s:\n" + "".join(log)
            try:
                if requests.get(f"{url}/health", timeout=1).ok:
                    break
            except requests.RequestException:  # not listening yet, or the master still loading
                time.sleep(0.2)
        yield url, log, process.pid
    finally:
        process.terminate()
        process.wait(30)
        reader.join(5)
        assert _wait_gone(before) == [], "gunicorn left processes behind"
        assert not list(
            Path("/dev/shm").glob(f"webshop-sessions-{process.pid}.sqlite3*")
        )  # on_exit removed it


def test_gunicorn_two_workers_serve_concurrent_sessions_without_errors(gunicorn_server):
    import requests

    from webshop_server.engine import WebShopEngine

    url, log, _ = gunicorn_server
    engine = WebShopEngine.generated(num_products=80, seed=0)  # the server's shop, to check every page

    def play(goal: int) -> list[str]:
        """20 steps on one session; every request on a new connection, so either worker may take it."""
        errors, local = [], engine.new_session(goal)
        created = requests.post(f"{url}/api/sessions", json={"goal": goal}, timeout=10)
        if created.status_code != 201:
            return [f"create: {created.status_code}"]
        session_id, target = created.json()["id"], local.goal
        cycle = [f"search[{target['name']}]", f"click[{target['asin'].lower()}]", "click[description]"]
        cycle += ["click[< prev]", "click[back to search]"]
        for action in cycle * 4:
            answer = requests.post(
                f"{url}/api/sessions/{session_id}/step", json={"action": action}, timeout=10
            )
            expected = engine.step(local, action)
            if answer.status_code != 200 or answer.json()["observation"] != expected.observation:
                errors.append(f"goal {goal} {action}: {answer.status_code} {answer.text[:200]}")
        return errors

    with ThreadPoolExecutor(8) as pool:
        errors = [e for found in pool.map(play, range(0, 80, 10)) for e in found]
    assert errors == []

    def logged_steps() -> list[list[str]]:
        return [
            line.split() for line in log if " POST /api/sessions/" in line and line.rstrip().endswith("200")
        ]

    # A worker writes its access line after the reply, and the reader thread copies it later still:
    # under load the last lines land after the last response (seen: 159 of 160), so wait for them.
    deadline = time.monotonic() + 10
    while len(steps := logged_steps()) < 8 * 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(steps) == 8 * 20
    assert len({fields[0] for fields in steps}) == 2  # both workers stepped, sessions crossed between them


def test_gunicorn_keeps_sessions_in_one_file(gunicorn_server):
    import requests

    url, _, master = gunicorn_server
    path = Path(f"/dev/shm/webshop-sessions-{master}.sqlite3")
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm here")
    assert path.exists()
    created = requests.post(f"{url}/api/sessions", json={"goal": 3}, timeout=10).json()
    state = requests.get(f"{url}/api/sessions/{created['id']}", timeout=10).json()["state"]
    assert state["goal_index"] == 3 and requests.get(f"{url}/health", timeout=10).json()["sessions"] >= 1


def test_webshop_group_envs_share_one_gunicorn_url(gunicorn_server):
    """Envs in worker processes, each on its own keep-alive connection, win through the 2-worker server."""
    from agentgym_rl.webshop import WebShopEnv, expert_actions

    url = gunicorn_server[0]
    local = WebShopEnv(split="all", num_products=80)  # the server's shop, in-process
    tasks = [3, 11]
    envs = GroupVectorEnv(
        "AgentGymRL/WebShop-v0", num_tasks=2, group_size=2, workers=2, split="all", backend="http", url=url
    )
    try:
        obs, info = envs.reset(seed=0, options={"tasks": tasks})
        scripts = []
        for task in tasks:
            local.reset(options={"task": task})
            scripts += [expert_actions(local)] * 2
        final = np.zeros(4)
        for t in range(max(map(len, scripts))):
            actions = [script[t] if envs.active[i] else None for i, script in enumerate(scripts)]
            _, rewards, terminated, _, info = envs.step(actions)
            final[terminated] = rewards[terminated]
        assert (final == 1.0).all() and not envs.active.any()
    finally:
        envs.close()


def test_http_backend_retries_idempotent_calls_only():
    pytest.importorskip("requests")
    from werkzeug.serving import make_server

    from agentgym_rl.webshop.backends import HttpBackend

    calls: list[str] = []

    def flaky(environ, start_response):  # every first call of a path fails with 503
        path = environ["PATH_INFO"]
        calls.append(f"{environ['REQUEST_METHOD']} {path}")
        if calls.count(calls[-1]) == 1:
            start_response("503 Service Unavailable", [("Content-Type", "application/json")])
            return [b'{"error": "busy"}']
        body = {"num_goals": 3, "splits": {"test": [0, 1]}} if path == "/api/splits" else {"error": "x"}
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    httpd = make_server("127.0.0.1", 0, flaky, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        backend = HttpBackend(f"http://127.0.0.1:{httpd.server_port}", timeout=5)
        assert backend.num_goals == 3 and calls == ["GET /api/splits"] * 2  # GET retried after the 503
        backend.session_id = "s"
        with pytest.raises(RuntimeError, match="503"):
            backend.step("search[x]")
        assert calls[2:] == ["POST /api/sessions/s/step"]  # a step is never sent twice
        assert len(backend._http.adapters["http://"].poolmanager.pools) == 1  # one kept-alive pool
    finally:
        httpd.shutdown()
        thread.join(5)

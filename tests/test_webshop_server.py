"""The WebShop Flask app over real HTTP on 127.0.0.1 (webshop_server.app)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

requests = pytest.importorskip("requests")
from werkzeug.serving import make_server  # noqa: E402

from webshop_server import create_app  # noqa: E402
from webshop_server.actions import MAX_ACTION_CHARS  # noqa: E402
from webshop_server.engine import WebShopEngine  # noqa: E402

NUM_PRODUCTS = 80
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def engine() -> WebShopEngine:
    return WebShopEngine.generated(num_products=NUM_PRODUCTS, seed=0)


@pytest.fixture(scope="module")
def server(engine):
    """A real threaded server on a free loopback port; yields its base URL."""
    app = create_app(engine=engine, max_sessions=50, max_content_length=4096)
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    thread.join(5)


def test_health_and_splits(server, engine):
    health = requests.get(f"{server}/health", timeout=5).json()
    assert (
        health["status"] == "ok"
        and health["products"] == NUM_PRODUCTS
        and health["goals"] == len(engine.goals)
    )
    splits = requests.get(f"{server}/api/splits", timeout=5).json()
    n = len(engine.goals)
    assert splits["splits"]["test"] == [0, min(500, n)] and splits["num_goals"] == n
    assert requests.get(f"{server}/api/goals/3", timeout=5).json() == json.loads(json.dumps(engine.goals[3]))


def test_session_round_trip(server, engine):
    http = requests.Session()
    created = http.post(f"{server}/api/sessions", json={"goal": 7}, timeout=5)
    assert created.status_code == 201
    data = created.json()
    assert data["goal"] == 7 and data["observation"] == engine.new_session(7).page.text
    assert data["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    step = http.post(
        f"{server}/api/sessions/{data['id']}/step", json={"action": "search[shoes]"}, timeout=5
    ).json()
    assert step["observation"].split(" [SEP] ")[3].startswith("Page 1 (Total results: ")
    assert step["reward"] == 0 and step["done"] is False and step["info"] == {"valid": True, "goal": 7}
    state = http.get(f"{server}/api/sessions/{data['id']}", timeout=5).json()
    assert state["state"]["page"] == "results" and state["observation"] == step["observation"]
    assert http.delete(f"{server}/api/sessions/{data['id']}", timeout=5).status_code == 200
    assert http.get(f"{server}/api/sessions/{data['id']}", timeout=5).status_code == 404


def test_split_and_seed_pick_a_goal(server):
    first = requests.post(f"{server}/api/sessions", json={"split": "test", "seed": 5}, timeout=5).json()
    second = requests.post(f"{server}/api/sessions", json={"split": "test", "seed": 5}, timeout=5).json()
    assert first["goal"] == second["goal"] and 0 <= first["goal"] < 500 and first["id"] != second["id"]
    assert requests.post(f"{server}/api/sessions", timeout=5).status_code == 201  # empty body: any goal


def play(url: str, engine: WebShopEngine, goal: int) -> float:
    """Play the goal's product over HTTP and check each page against the in-process engine."""
    http = requests.Session()
    local = engine.new_session(goal)
    data = http.post(f"{url}/api/sessions", json={"goal": goal}, timeout=10).json()
    target = local.goal
    actions = [f"search[{target['name']}]", f"click[{target['asin'].lower()}]"]
    actions += [f"click[{v}]" for v in target["goal_options"].values()] + ["click[buy now]"]
    for action in actions:
        step = http.post(f"{url}/api/sessions/{data['id']}/step", json={"action": action}, timeout=10).json()
        expected = engine.step(local, action)
        assert step["observation"] == expected.observation
    return step["reward"]


def test_concurrent_sessions_are_isolated(server, engine):
    goals = list(range(0, 160, 10))
    with ThreadPoolExecutor(8) as pool:
        rewards = list(pool.map(lambda g: play(server, engine, g), goals))
    assert rewards == [1.0] * len(goals)


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/sessions", b"{not json", 400),
        ("POST", "/api/sessions", b"[1, 2]", 400),
        ("POST", "/api/sessions", b'{"goal": "three"}', 400),
        ("POST", "/api/sessions", b'{"goal": 99999999}', 400),
        ("POST", "/api/sessions", b'{"goal": true}', 400),
        ("POST", "/api/sessions", b'{"split": "nope"}', 400),
        ("POST", "/api/sessions", b'{"goal": 1, "observation_mode": "html"}', 400),
        ("POST", "/api/sessions", b'{"state": {"goal_index": "x", "bogus": 1}}', 400),
        ("POST", "/api/sessions/SESSION/step", b"{oops", 400),
        ("POST", "/api/sessions/SESSION/step", b'{"act": "search[x]"}', 400),
        ("POST", "/api/sessions/SESSION/step", b'{"action": 5}', 400),
        ("POST", "/api/sessions/SESSION/step", b'{"action": "dance[now]"}', 400),
        ("POST", "/api/sessions/SESSION/step", b'{"action": "click[not a button]"}', 400),
        ("PUT", "/api/sessions/SESSION", b'{"nostate": 1}', 400),
        ("POST", "/api/sessions/deadbeef/step", b'{"action": "search[x]"}', 404),
        ("GET", "/api/sessions/deadbeef", b"", 404),
        ("DELETE", "/api/sessions/deadbeef", b"", 404),
        ("GET", "/api/goals/99999999", b"", 404),
        ("GET", "/no/such/route", b"", 404),
        ("POST", "/api/sessions", b'{"pad": "' + b"x" * 8000 + b'"}', 413),
    ],
)
def test_bad_input(server, method, path, body, status):
    session_id = requests.post(f"{server}/api/sessions", json={"goal": 1}, timeout=5).json()["id"]
    response = requests.request(
        method, server + path.replace("SESSION", session_id), data=body, timeout=5,
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == status
    assert "error" in response.json()
    assert requests.get(f"{server}/health", timeout=5).status_code == 200  # still serving


@pytest.mark.parametrize("action", ["dance[now]", "click[not a button]", "click[search]", "search"])
def test_invalid_action_keeps_the_page(server, action):
    created = requests.post(f"{server}/api/sessions", json={"goal": 2}, timeout=5).json()
    response = requests.post(
        f"{server}/api/sessions/{created['id']}/step", json={"action": action}, timeout=5
    )
    payload = response.json()
    assert response.status_code == 400 and payload["info"]["valid"] is False
    assert payload["observation"] == created["observation"] and payload["reward"] == 0 and not payload["done"]


def test_over_long_action_is_a_400_not_a_413(engine):
    # A body limit far above the action cap: the cap, not the body limit, answers.
    client = create_app(engine=engine, max_content_length=4 * 2**20, preload_nlp=False).test_client()
    created = client.post("/api/sessions", json={"goal": 2}).get_json()
    step = f"/api/sessions/{created['id']}/step"
    longest = "search[" + "x" * (MAX_ACTION_CHARS - 8) + "]"
    for action in (longest + " ", "[" * 2**20):
        start = time.perf_counter()
        response = client.post(step, json={"action": action})
        assert time.perf_counter() - start < 1.0
        payload = response.get_json()
        assert response.status_code == 400 and payload["info"]["valid"] is False
        assert f"{len(action):,} characters is over the limit of {MAX_ACTION_CHARS:,}" in payload["error"]
        assert payload["observation"] == created["observation"] and not payload["done"]
    assert client.post(step, json={"action": longest}).status_code == 200  # at the cap: read


def test_sessions_are_bounded(server):
    ids = [
        requests.post(f"{server}/api/sessions", json={"goal": 0}, timeout=5).json()["id"] for _ in range(60)
    ]
    assert requests.get(f"{server}/health", timeout=5).json()["sessions"] <= 50
    assert requests.get(f"{server}/api/sessions/{ids[0]}", timeout=5).status_code == 404  # evicted
    assert requests.get(f"{server}/api/sessions/{ids[-1]}", timeout=5).status_code == 200


def test_html_shop(server):
    http = requests.Session()
    page = http.get(f"{server}/?goal=4", timeout=5)
    assert page.status_code == 200 and "<form" in page.text and "Instruction:" in page.text
    results = http.post(page.url + "/act", data={"q": "shoes"}, timeout=5)
    assert "Page 1 (Total results:" in results.text and "Back to Search" in results.text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("server", ["werkzeug", "granian"])
def test_python_m_webshop_server(server):
    if server == "granian":
        pytest.importorskip("granian")
    port = free_port()
    command = [sys.executable, "-m", "webshop_server", "--port", str(port), "--num-products", "50", "--quiet"]
    command += ["--server", server]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"http://127.0.0.1:{port}/health", timeout=1).json()
                break
            except requests.ConnectionError:
                assert process.poll() is None, process.stderr.read().decode()
                time.sleep(0.1)
        else:
            pytest.fail("the server did not start in 30 s")
        assert health["products"] == 50
        http = requests.Session()
        created = http.post(f"http://127.0.0.1:{port}/api/sessions", json={"goal": 1}, timeout=5).json()
        step = http.post(
            f"http://127.0.0.1:{port}/api/sessions/{created['id']}/step",
            json={"action": "search[hat]"},
            timeout=5,
        )
        assert step.status_code == 200 and step.json()["info"]["valid"]
    finally:
        process.terminate()
        process.wait(10)


def test_idle_sessions_expire():
    from webshop_server.sessions import SessionStore

    now = [0.0]
    store = SessionStore(max_sessions=10, ttl=60.0, clock=lambda: now[0])
    old, kept = store.add("old"), store.add("kept")
    now[0] = 50.0
    assert store.get(kept).value == "kept"  # touching it renews it
    now[0] = 100.0
    assert store.get(old) is None and store.get(kept).value == "kept" and len(store) == 1
    assert store.remove(kept) and not store.remove(kept) and len(store) == 0


def test_serve_webshop_command(monkeypatch):
    from agentgym_cli.commands import serve_webshop
    from webshop_server import app as app_module

    calls = []
    monkeypatch.setattr(app_module, "serve", lambda *args, **kwargs: calls.append((args, kwargs)))
    assert serve_webshop.main(["--port", "4321", "--num-products", "30", "--quiet"]) == 0
    ((args, kwargs),) = calls
    assert args == ("127.0.0.1", 4321) and kwargs["num_products"] == 30 and kwargs["quiet"] is True
    assert "--session-ttl" in serve_webshop.make_parser().format_help()

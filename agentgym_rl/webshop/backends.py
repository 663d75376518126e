"""The two ways :class:`~agentgym_rl.webshop.env.WebShopEnv` reaches a shop.

- :class:`LocalBackend`: the :mod:`webshop_server` engine in this process (shared by
  every env of the process with the same catalogue arguments).
- :class:`HttpBackend`: a running ``webshop_server`` over its JSON API.

Both return :class:`Transition`\\ s with the same observation text and actions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HttpBackend", "LocalBackend", "Transition", "shared_engine"]


@dataclass
class Transition:
    """A page reached by reset or step."""

    observation: str
    reward: float
    done: bool
    valid: bool
    available_actions: dict[str, Any]


@functools.lru_cache(maxsize=4)
def shared_engine(catalog: str, num_products: int | None, seed: int, human_goals: bool) -> Any:
    """One engine per catalogue configuration and process (it is read-only)."""
    from webshop_server.engine import WebShopEngine

    if catalog == "generated":
        return WebShopEngine.generated(num_products=num_products, seed=seed)
    return WebShopEngine.from_data_dir(catalog, num_products=num_products, human_goals=human_goals, seed=seed)


class LocalBackend:
    """The engine in-process."""

    def __init__(self, catalog: str | Path, num_products: int | None, seed: int, human_goals: bool) -> None:
        self.engine = shared_engine(str(catalog), num_products, seed, human_goals)
        self.session: Any = None

    @property
    def num_goals(self) -> int:
        return len(self.engine.goals)

    def split(self, name: str) -> range:
        return self.engine.goals.split(name)

    def goal(self, index: int) -> dict[str, Any]:
        return self.engine.goals[index]

    def _view(self, valid: bool = True) -> Transition:
        page = self.session.page
        return Transition(
            self.session.observation, 0.0, self.session.state.done, valid, page.available_actions()
        )

    def reset(self, goal_index: int, observation_mode: str = "text") -> Transition:
        self.session = self.engine.new_session(goal_index, observation_mode)
        return self._view()

    def step(self, action: str) -> Transition:
        result = self.engine.step(self.session, action)
        return Transition(
            result.observation, result.reward, result.done, result.valid, result.available_actions
        )

    def get_state(self) -> dict[str, Any]:
        return self.session.state.to_dict()

    def set_state(self, state: dict[str, Any]) -> Transition:
        self.session = self.engine.restore(state)
        return self._view()

    def close(self) -> None:
        self.session = None


#: HTTP methods that are retried on a read error or a 502/503/504 (repeating them is harmless).
#: POSTs (new session, step) are retried only when the connection was never made.
IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE"})


class HttpBackend:
    """A running server, through ``requests`` with a keep-alive connection.

    Args:
        url: The server's base URL.
        timeout: Seconds to wait for each answer.
        retries: Retries of a call that failed to connect (any method) or, for the
            idempotent ``GET``/``PUT``/``DELETE``, that lost its answer or met a 502/503/504
            (a server restarting behind gunicorn or a proxy), with exponential back-off.
    """

    def __init__(self, url: str, timeout: float = 30.0, retries: int = 3) -> None:
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._http = requests.Session()  # one pooled keep-alive connection per env
        retry = Retry(
            total=retries,
            backoff_factor=0.1,
            status_forcelist=(502, 503, 504),
            allowed_methods=IDEMPOTENT_METHODS,
            raise_on_status=False,
        )
        self._http.mount("http://", HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=1))
        self._http.mount("https://", HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=1))
        self.session_id: str | None = None
        info = self._call("GET", "/api/splits")
        self.num_goals = int(info["num_goals"])
        self._splits = {k: range(*v) for k, v in info["splits"].items()}
        self._goals: dict[int, dict[str, Any]] = {}

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None, ok=(200, 201)) -> dict:
        response = self._http.request(method, self.url + path, json=payload, timeout=self.timeout)
        data = response.json() if response.content else {}
        if response.status_code not in ok:
            raise RuntimeError(
                f"WebShop server {self.url} answered {response.status_code} to {method} {path}: {data}"
            )
        return data

    def split(self, name: str) -> range:
        if name == "all":
            return range(self.num_goals)
        if name not in self._splits:
            raise ValueError(f"unknown split {name!r}; choose one of {[*self._splits, 'all']}")
        return self._splits[name]

    def goal(self, index: int) -> dict[str, Any]:
        if index not in self._goals:
            self._goals[index] = self._call("GET", f"/api/goals/{index}")
        return self._goals[index]

    @staticmethod
    def _view(data: dict[str, Any], valid: bool = True) -> Transition:
        done = bool(data.get("done", data.get("state", {}).get("done", False)))
        return Transition(
            data["observation"], float(data.get("reward", 0.0)), done, valid, data["available_actions"]
        )

    def reset(self, goal_index: int, observation_mode: str = "text") -> Transition:
        self.close()
        data = self._call(
            "POST", "/api/sessions", {"goal": int(goal_index), "observation_mode": observation_mode}
        )
        self.session_id = data["id"]
        return self._view(data)

    def step(self, action: str) -> Transition:
        from webshop_server.actions import MAX_ACTION_CHARS

        # The server answers every action over the cap alike (invalid, page unchanged), so
        # sending its first cap + 1 characters gets that answer, as the local backend does,
        # where the whole action could exceed the server's max_content_length (a 413).
        action = action[: MAX_ACTION_CHARS + 1]
        # 400 with an observation is the server's "invalid action, page unchanged".
        data = self._call("POST", f"/api/sessions/{self.session_id}/step", {"action": action}, ok=(200, 400))
        if "observation" not in data:
            raise RuntimeError(f"WebShop server {self.url} rejected the request: {data}")
        return self._view(data, valid=bool(data["info"]["valid"]))

    def get_state(self) -> dict[str, Any]:
        return self._call("GET", f"/api/sessions/{self.session_id}")["state"]

    def set_state(self, state: dict[str, Any]) -> Transition:
        if self.session_id is None:
            data = self._call("POST", "/api/sessions", {"state": state})
            self.session_id = data["id"]
        else:
            data = self._call("PUT", f"/api/sessions/{self.session_id}", {"state": state})
        return self._view(data)

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self._call("DELETE", f"/api/sessions/{self.session_id}", ok=(200, 404))
            except Exception:  # the server may be gone already; the session will expire
                pass
            self.session_id = None

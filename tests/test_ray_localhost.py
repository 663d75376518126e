"""The local Ray instance (no ``ray_address``) listens on loopback only: every TCP socket that Ray's
processes listen on, read from /proc (no ``ss`` needed), is bound to 127.0.0.1 or ::1."""

from __future__ import annotations

import ipaddress
import os
import time

import pytest
from process_tree import descendants

from agentgym_rl import GroupVectorEnv

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/net"), reason="reads /proc/net/tcp (Linux)")

ENV_ID = "AgentGymRL/TextBandit-v0"


def _address(hex_ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_ip)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw)


def _listening() -> dict[int, tuple[str, int]]:
    """Listening TCP sockets of this network namespace: inode -> (address, port)."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                hex_ip, hex_port = fields[1].split(":")
                sockets[int(fields[9])] = (str(_address(hex_ip)), int(hex_port, 16))
    return sockets


def _listening_by(pids: set[int]) -> list[tuple[str, int, int, str]]:
    """(address, port, pid, process name) of every listening socket that one of ``pids`` holds."""
    listening, found = _listening(), []
    for pid in sorted(pids):
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in listening:
                found.append((*listening[int(target[8:-1])], pid, name))
    return found


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)  # [::ffff:127.0.0.1]: an IPv6 socket on IPv4 loopback
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def test_local_ray_listens_on_loopback_only(monkeypatch):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # the local case: a new instance
    before = _listening_by(descendants())
    envs = GroupVectorEnv(ENV_ID, num_tasks=1, group_size=2, workers=2, worker_backend="ray")
    try:
        envs.reset(seed=0)  # the actors answer: Ray's daemons and workers are all up
        assert ray.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"
        time.sleep(2)  # agents that open their ports after start-up
        sockets = sorted(set(_listening_by(descendants())) - set(before))
    finally:
        envs.close()
        ray.shutdown()
    names = {name for _, _, _, name in sockets}
    assert {"gcs_server", "raylet"} <= names, sockets  # the measurement sees Ray's servers
    wide = [s for s in sockets if not _loopback(s[0])]
    assert wide == [], f"Ray listens beyond loopback: {wide} (all: {sockets})"

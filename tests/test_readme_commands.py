"""Smoke test of every command README.md tells a user to run, on the embedded default data.

The commands are read from the README's ```bash blocks (continuation lines joined,
comments dropped, ``&&`` split), so a new or changed command fails
:func:`test_every_readme_command_is_run_or_skipped` until it is listed below. Each run
takes the README's own words and appends the smallest sizes (argparse keeps the last
value of a flag), in a scratch folder (the commands' relative outputs land there), and
checks exit code 0 and a known line of output. ALFWorld commands get ``--data_dir
generated``: the embedded games, which a machine without ``../shared/data`` plays by
default (this checkout may have the data beside it, which the default lookup would
find); WebShop plays its generated catalogue, its default. The four learning commands
run in README order in one folder: each reads what the one before wrote.

README commands not run here, and why:

- ``python3 -m pip install -e ".[all]" -c constraints/cpu.txt``: installs packages; the
  suite runs inside that install.
- ``python3 -m benchmarks.bench_learning --config configs/main_job.yaml``: the main long
  job (about 7 minutes on 2 cores). Its config is parsed here
  (:func:`test_main_job_config_parses`); the same pipeline at smoke size is
  ``tests/test_bench_learning.py``.
- ``python3 -m pytest`` and ``python3 -m pytest tests/test_alfworld_env.py -s``: the test
  command itself (and a part of it).
- ``agentgym-rl bench``: every benchmark at full size (hours); ``agentgym-rl bench
  --quick`` runs here, limited to ``--only advantages`` (each script has its own smoke
  test: ``tests/test_bench.py``, ``test_webshop_env.py``, ``test_alfworld_engine.py``,
  ``test_bench_learning.py``).
- ``python3 -m benchmarks.bench_engine_equality``: needs the official ALFWorld games
  (no ``../shared/data`` here); ``tests/test_alfworld_engine.py::test_equality_benchmark_smoke``
  runs it on 2 games where the data is.

Commands named in the README's prose (inside single backticks) are not parsed: most
quote a benchmark's measurement or need the official data, a network or a GPU.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


@dataclass(frozen=True)
class Run:
    """How one README command is run: its words, with placeholders replaced and sizes shrunk."""

    expect: tuple[str, ...]
    """Regexes that must each match a line of the output (stdout and stderr)."""
    extra: tuple[str, ...] = ()
    """Flags appended (the smallest sizes; a later flag overrides the README's)."""
    replace: dict[str, str] = field(default_factory=dict)
    """README words replaced before running (placeholders such as ``PATH``)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the command must write (relative to its folder), each with a regex its text must match."""
    chain: str | None = None
    """Commands of one chain run in README order in one shared folder."""
    xfail: str | None = None
    """Reason for an expected, non-strict failure (work in progress elsewhere)."""


_TINY_TRAIN = (
    "--num_tasks", "1", "--group_size", "2", "--max_steps", "1", "--max_env_steps", "2",
    "--max_completion_length", "8", "--eval_tasks", "1", "--report_to", "none",
)  # fmt: skip

#: README command (as parsed: words joined by one space) -> how it is run here.
RUNS: dict[str, Run] = {
    "agentgym-rl play --agents expert random": Run(
        expect=(r"^expert\s+yes\s", r"^random\s+(yes|no)\s"), extra=("--data_dir", "generated")
    ),
    "agentgym-rl play --env webshop --agents expert": Run(expect=(r"^expert\s+yes\s",)),
    "agentgym-rl train --model PATH --env alfworld --estimator gigpo --num_tasks 16 --group_size 8 "
    "--learning_rate 1e-6 --beta 0.01 --output_dir runs/gigpo": Run(
        expect=(r"^evaluation on valid_unseen",),
        replace={"PATH": "tiny"},
        extra=("--data_dir", "generated", *_TINY_TRAIN),
        files={"runs/gigpo/env_eval.json": "env/success_rate"},
    ),
    # The trained checkpoint is played by the learning chain below; here the expert plays both envs.
    "agentgym-rl leaderboard --env all --agent checkpoint:runs/gigpo": Run(
        expect=(r"^## WebShop", r"^\| this run \| expert \| mean@1 \| 100\.0 \|"),
        replace={"checkpoint:runs/gigpo": "expert"},
        extra=("--data_dir", "generated", "--episodes", "2"),
    ),
    "agentgym-rl bench --quick": Run(
        expect=(r"^=== bench_advantages:", r"^Report: "),
        extra=("--only", "advantages"),
        files={"results/bench/bench.md": r"\| bench_advantages \| ok \|"},
    ),
    "agentgym-rl data info": Run(expect=(r"^shared data folder: ", r"^ALFWorld(:| games: )")),
    "agentgym-rl trajectories --env alfworld --data_dir generated --split train --episodes all "
    "--epsilon 0.15 --output runs/traj": Run(
        expect=(r"^\d+ examples from 2 episodes",), extra=("--episodes", "2"), chain="learning"
    ),
    "agentgym-rl sft --model tiny --dataset runs/traj --output_dir runs/sft --num_train_epochs 3 "
    "--learning_rate 5e-3": Run(
        expect=(r"^SFT: \d+ examples",), extra=("--max_steps", "1", "--report_to", "none"), chain="learning"
    ),
    "agentgym-rl train --model runs/sft --env alfworld --data_dir generated --estimator gigpo "
    "--output_dir runs/rl": Run(
        expect=(r"^evaluation on valid_unseen",), extra=_TINY_TRAIN, chain="learning"
    ),
    "agentgym-rl leaderboard --env alfworld --data_dir generated --agent checkpoint:runs/rl": Run(
        expect=(r"^\| this run \| ",),
        extra=("--episodes", "1", "--max_new_tokens", "8", "--max_steps", "2"),
        chain="learning",
    ),
    "ruff check .": Run(expect=(r"All checks passed",)),
    "ruff format --check .": Run(expect=(r"files? already formatted",)),
}

#: README commands not run, with the reason (the module docstring says more).
SKIPPED: dict[str, str] = {
    "python3 -m pip install -e .[all] -c constraints/cpu.txt": "installs packages; the suite runs inside it",
    "python3 -m benchmarks.bench_learning --config configs/main_job.yaml": (
        "the main long job (about 9 min); its config is parsed by test_main_job_config_parses"
    ),
    "python3 -m pytest": "the test command itself",
    "python3 -m pytest tests/test_alfworld_env.py -s": "a part of the test command",
    "agentgym-rl bench": "every benchmark at full size (hours); bench --quick runs here",
    "python3 -m benchmarks.bench_engine_equality": (
        "needs the official ALFWorld games; test_alfworld_engine.py::test_equality_benchmark_smoke"
    ),
}

#: The special case: a server that runs until stopped.
SERVER = "agentgym-rl serve-webshop --port 3000"


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of the README's ```bash blocks, in order, each as its words joined by one space.

    >>> readme_commands("```bash\\nfoo --a 1 \\\\\\n    --b 2   # note\\n# only a comment\\nx && y z\\n```")
    ['foo --a 1 --b 2', 'x', 'y z']
    """
    text = README.read_text() if text is None else text
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words: list[str] = []
            for word in [*shlex.split(line, comments=True), "&&"]:
                if word == "&&":
                    if words:
                        commands.append(" ".join(words))
                    words = []
                else:
                    words.append(word)
    return commands


def _argv(command: str, run: Run) -> list[str]:
    """The command line to run: the README's words, replacements made, the extra flags appended."""
    words = command.split(" ")
    missing = [old for old in run.replace if old not in words]
    assert not missing, f"README command {command!r} no longer has {missing}: update RUNS"
    words = [run.replace.get(word, word) for word in words] + list(run.extra)
    if words[0] == "agentgym-rl":
        script = Path(sys.executable).with_name("agentgym-rl")  # the console script pip installed
        head = [str(script)] if script.exists() else [sys.executable, "-m", "agentgym_cli"]
        return head + words[1:]
    if words[0] in ("python", "python3"):
        return [sys.executable, *words[1:]]
    return words


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _check(command: str, run: Run, folder: Path) -> None:
    """Run one README command in ``folder``; exit code 0, each expected line, each expected file."""
    argv = _argv(command, run)
    if argv[0] == "ruff" and shutil.which("ruff") is None:
        pytest.skip("ruff is not installed (the [dev] extra)")
    cwd = REPO if argv[0] == "ruff" else folder
    done = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    where = f"`{shlex.join(argv)}` (README: `{command}`) in {cwd}:\n{output[-4000:]}"
    assert done.returncode == 0, f"exit code {done.returncode} from {where}"
    for pattern in run.expect:
        assert re.search(pattern, output, flags=re.M), (
            f"no line matching {pattern!r} in the output of {where}"
        )
    for path, pattern in run.files.items():
        target = cwd / path
        assert target.is_file(), f"{path} not written by {where}"
        assert re.search(pattern, target.read_text()), f"{path} lacks {pattern!r}: {where}"


def _param(command: str) -> object:
    run = RUNS[command]
    marks = [pytest.mark.xfail(reason=run.xfail, strict=False)] if run.xfail else []
    return pytest.param(command, marks=marks, id=command[:60])


def test_every_readme_command_is_run_or_skipped() -> None:
    commands = set(readme_commands())
    known = set(RUNS) | set(SKIPPED) | {SERVER}
    assert not commands - known, (
        f"README commands with no smoke test: {sorted(commands - known)}; add each to RUNS in "
        f"{Path(__file__).name} (or to SKIPPED with the reason)"
    )
    assert not known - commands, f"listed here but no longer in the README: {sorted(known - commands)}"


def test_main_job_config_parses() -> None:
    from agentgym_rl.cli_args import make_command_parser, parse_command_args
    from benchmarks.bench_learning import Args

    command = next(c for c in readme_commands() if c.startswith("python3 -m benchmarks.bench_learning"))
    words = command.split(" ")[3:]
    config = REPO / words[words.index("--config") + 1]
    assert config.is_file(), f"{config} (README: `{command}`) does not exist"
    parser = make_command_parser(Args, name="bench_learning", description="")
    args = parse_command_args(parser, Args, ["--config", str(config)])
    assert args.output, args


@pytest.mark.parametrize(
    "command", [_param(c) for c in readme_commands() if c in RUNS and RUNS[c].chain is None]
)
def test_readme_command(command: str, tmp_path: Path) -> None:
    _check(command, RUNS[command], tmp_path)


def test_learning_commands_in_order(tmp_path: Path) -> None:
    chain = [c for c in readme_commands() if c in RUNS and RUNS[c].chain == "learning"]
    assert len(chain) == 4, chain  # trajectories, sft, train, leaderboard
    for command in chain:
        _check(command, RUNS[command], tmp_path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_webshop_answers(tmp_path: Path) -> None:
    assert SERVER in readme_commands()
    port = str(_free_port())  # the README's 3000 may be taken
    argv = _argv(SERVER, Run(expect=(), replace={"3000": port}))
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline, health = time.monotonic() + 120, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    health = json.loads(response.read())
                    break
            except OSError:
                time.sleep(0.2)
        assert health is not None, f"no /health answer from `{shlex.join(argv)}`:\n{log.read_text()[-3000:]}"
        assert health["status"] == "ok" and health["products"] > 0, health
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            page = response.read().decode()  # redirected to a new session's search page
        assert response.status == 200 and "search" in page.lower(), page[:500]
    finally:
        server.terminate()
        server.wait(30)

"""Imports go downward only: webshop_server <- agentgym_rl <- trainers <- benchmarks <- agentgym_cli.

Each package is imported with every one of its submodules in a fresh interpreter, which
must then hold none of the packages above it: the env package knows nothing of the
trainer, the harness or the command line, and the WebShop server nothing of the envs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Top-level modules of the optional extras (pyproject.toml): a submodule that needs one
#: that is not installed is skipped, not failed; any other import error fails the test.
OPTIONAL_EXTRAS = (
    "ray",
    "alfworld",
    "textworld",
    "flask",
    "bm25s",
    "Stemmer",
    "requests",
    "thefuzz",
    "spacy",
    "en_core_web_sm",
    "granian",
    "gunicorn",
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "datasets",
    "vllm",
)

_IMPORT_ALL = """
import importlib, json, pkgutil, sys

package_name, optional, forbidden = sys.argv[1], set(sys.argv[2].split(",")), sys.argv[3].split(",")
package = importlib.import_module(package_name)
imported, skipped = [package_name], []
for info in pkgutil.walk_packages(package.__path__, package_name + "."):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue  # `python -m` entry points run the program on import
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as error:
        # Only a missing optional extra (e.g. `ray` without `pip install agentgym-rl[ray]`) is a skip.
        if (error.name or "").split(".")[0] not in optional:
            raise
        skipped.append(f"{info.name} (needs {error.name})")
    else:
        imported.append(info.name)
above = sorted(
    name for name in sys.modules if any(name == top or name.startswith(top + ".") for top in forbidden)
)
print(json.dumps({"imported": imported, "skipped": skipped, "above": above}))
"""


def _import_everything(package: str, forbidden: list[str]) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, package, ",".join(OPTIONAL_EXTRAS), ",".join(forbidden)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("agentgym_rl", ["trainers", "benchmarks", "agentgym_cli"]),
        ("webshop_server", ["agentgym_rl", "trainers", "benchmarks", "agentgym_cli"]),
    ],
)
def test_a_package_imports_nothing_above_it(package, forbidden):
    result = _import_everything(package, forbidden)
    assert len(result["imported"]) > 1, result  # the walk found the submodules
    assert result["above"] == [], (
        f"importing {package} and its submodules imported {result['above']} "
        f"(skipped for a missing extra: {result['skipped']})"
    )

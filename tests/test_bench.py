"""The benchmark scripts' shared contract and ``agentgym-rl bench``.

Every ``benchmarks/bench_*.py`` has ``main(args) -> dict`` ending in
:func:`benchmarks.report.write_result` (commit, machine and command added in one place);
``agentgym-rl bench`` runs each in a fresh process and reads back the dict it returned
(``result.json``), ratios under ``"ratios"``, with no scraping of printed text. The
scripts' own smoke tests live beside their subjects (``test_webshop_env.py``,
``test_alfworld_engine.py``, ``test_bench_learning.py``).
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_records_through_the_one_report_function(path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert ast.unparse(main.returns) in ("dict", "dict[str, Any]"), "main(args) must return its measurements"
    assert "write_result(args" in source, "save the result with benchmarks.report.write_result(args, ...)"
    # One path to the commit: no script runs git itself.
    assert '"git"' not in source and "'git'" not in source


@pytest.mark.parametrize(
    "path", sorted(BENCHMARKS.rglob("*.py")), ids=lambda p: str(p.relative_to(BENCHMARKS))
)
def test_benchmarks_do_not_import_tests(path: Path) -> None:
    assert not any(name == "tests" or name.startswith("tests.") for name in _imports(path))


def test_command_names_the_flags_off_their_defaults() -> None:
    from benchmarks.report import command

    @dataclass
    class Args:
        sizes: list[int] = field(default_factory=lambda: [1, 2])
        quick: bool = False
        max_games: int | None = None
        label: str = "a"

    Args.__module__ = "benchmarks.bench_example"
    assert command(Args()) == "python -m benchmarks.bench_example"
    assert command(Args(sizes=[3], quick=True, label="two words")) == (
        "python -m benchmarks.bench_example --sizes 3 --quick true --label 'two words'"
    )


def test_write_result_adds_commit_machine_and_command(tmp_path: Path, capsys) -> None:
    from benchmarks.report import write_result

    @dataclass
    class Args:
        output: str = str(tmp_path)

    returned = write_result(Args(), {"ratios": {"a / b": 2.0}}, "# Report")
    assert set(returned) == {"args", "ratios", "commit", "machine", "command"}
    assert json.loads((tmp_path / "result.json").read_text()) == returned  # the dict main returns, saved
    markdown = (tmp_path / "result.md").read_text()
    assert markdown.startswith("# Report\n") and f"commit {returned['commit']}" in markdown
    assert "cores" in returned["machine"] and returned["command"] in capsys.readouterr().out


def test_advantages_script_returns_its_measurements(tmp_path: Path) -> None:
    from benchmarks.bench_advantages import Args, main

    args = Args(sizes=[500], estimators=["grpo"], reference_max_rows=500, repeats=2, output=str(tmp_path))
    result = main(args)
    (row,) = result["results"]
    assert row["max_abs_diff"] < 1e-5  # ours matches the plain-Python reference
    assert result["ratios"] == {"grpo at 500 rows, reference / cpu": row["ratio"]}
    assert json.loads((tmp_path / "result.json").read_text())["ratios"] == result["ratios"]


def test_bench_collects_returned_results_and_failures(tmp_path: Path, monkeypatch) -> None:
    from agentgym_cli.commands import bench

    package = tmp_path / "fakebench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bench_fast.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            from benchmarks.report import run_cli, write_result


            @dataclass
            class Args:
                output: str = "unused"


            def main(args: Args) -> dict:
                print("progress: 1.83x so far")  # printed text is never scraped
                result = {"steps_per_second": 120.0, "ratios": {"GroupVectorEnv W=2 / loop": 1.5}}
                return write_result(args, result, "| GroupVectorEnv W=2 | 120.0 | 1.50x |")


            if __name__ == "__main__":
                run_cli(Args, main, "bench_fast", None)
            """
        )
    )
    (package / "bench_broken.py").write_text("raise RuntimeError('no data here')\n")
    (package / "bench_silent.py").write_text("print('done, 2.0x faster')\n")  # exits 0, returns nothing
    monkeypatch.setattr(bench, "_benchmarks_dir", lambda: package)
    code = bench.main(["--output", str(tmp_path / "out")])
    assert code == 1  # two benchmarks failed, the other still ran
    report = json.loads((tmp_path / "out" / "bench.json").read_text())
    runs = {run["name"]: run for run in report["benchmarks"]}
    assert (
        runs["bench_broken"]["status"] == "failed" and "no data here" in runs["bench_broken"]["stderr_tail"]
    )
    assert (
        runs["bench_silent"]["status"] == "failed" and "write_result" in runs["bench_silent"]["stderr_tail"]
    )
    fast = runs["bench_fast"]
    assert fast["status"] == "ok" and fast["ratios"] == {"GroupVectorEnv W=2 / loop": 1.5}
    assert (
        fast["result"]["steps_per_second"] == 120.0 and "-m fakebench.bench_fast" in fast["result"]["command"]
    )
    markdown = (tmp_path / "out" / "bench.md").read_text()
    assert "| bench_fast | ok |" in markdown and "GroupVectorEnv W=2 / loop: 1.5x" in markdown
    assert report["machine"]["cores"]


def test_quick_flags_shrink_known_sizes() -> None:
    from agentgym_cli.commands.bench import quick_flags

    @dataclass
    class Args:
        steps: int = 3  # already below the quick value: kept
        games: int = 12
        sizes: list[int] = field(default_factory=lambda: [10, 10_000_000])
        unrelated: int = 7

    assert quick_flags(Args) == ["--steps", "3", "--games", "3", "--sizes", "10000"]


def test_quick_gives_a_smoke_mode_script_its_own_sizes() -> None:
    """bench_learning's smoke mode keeps the 500-product shop: QUICK_VALUES' 200 would leave WebShop no train goals."""
    from agentgym_cli.commands.bench import quick_flags
    from benchmarks.bench_learning import Args

    assert quick_flags(Args) == ["--smoke", "true"]

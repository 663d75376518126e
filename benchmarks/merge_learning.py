"""Merge learning-benchmark runs made apart into one report: one table and one plot.

On a small machine the RL runs of ``bench_learning`` go fastest side by side, one process a core,
each with its own estimators or seeds and all from one SFT checkpoint:

    python -m benchmarks.bench_learning --env alfworld --estimators grpo --seeds 0 --output results/grpo-s0
    python -m benchmarks.bench_learning --env alfworld --estimators grpo --seeds 1 \\
        --sft_checkpoint results/grpo-s0/work/alfworld/sft --output results/grpo-s1
    python -m benchmarks.merge_learning --runs results/grpo-s0 results/grpo-s1 --output results/merged

The runs must measure the same thing: one SFT checkpoint (the same ``sft_summary.json``), the same
evaluation of it, and the same RL and evaluation settings; only the estimators, seeds, output
folders and worker counts may differ. A seed of one estimator given twice is an error. The merged
``result.json`` has ``bench_learning``'s layout, with the merged runs' folders under ``merged_from``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from benchmarks.bench_learning import SFT_RECIPE, learning_report
from benchmarks.bench_learning import Args as LearningArgs
from benchmarks.report import run_cli, write_result

#: ``bench_learning`` settings that runs may differ in and still be merged: which runs, where, and how
#: the SFT checkpoint was made (a run given ``--sft_checkpoint`` leaves those flags unset; the checkpoint's
#: own ``sft_summary.json`` is compared instead). The game set's sizes are part of what is measured.
#: ``eval_every`` may differ between estimators (each point carries its step), not between one estimator's seeds.
MAY_DIFFER = {"estimators", "seeds", "output", "sft_checkpoint", "env_workers", "eval_every"} | (
    set(SFT_RECIPE) - {"train_games", "heldout_games", "num_products"}
)


@dataclass
class Args:
    runs: list[str] = field(default_factory=list, metadata={"help": "bench_learning output folders."})
    """``bench_learning`` output folders (or their ``result.json`` files) to merge."""
    output: str = field(default="results/bench_learning_merged", metadata={"help": "Merged report folder."})
    """Folder for the merged JSON, Markdown and PNG."""


def load_run(path: str) -> dict[str, Any]:
    """One run's ``result.json``, from its folder or the file itself."""
    file = Path(path)
    if file.is_dir():
        file = file / "result.json"
    if not file.is_file():
        raise FileNotFoundError(
            f"{path}: no result.json; make it with `python -m benchmarks.bench_learning --output {path}`"
        )
    result = json.loads(file.read_text())
    if "envs" not in result or "args" not in result:
        raise ValueError(f"{file} is not a bench_learning result (no 'envs' or 'args')")
    return result


def _differences(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    # A setting added after a run was made counts as its default there.
    defaults = {name: value for name, value in asdict(LearningArgs()).items() if name not in MAY_DIFFER}
    return sorted(
        k
        for k in first.keys() | other.keys()
        if first.get(k, defaults.get(k)) != other.get(k, defaults.get(k))
    )


def merge_results(results: list[dict[str, Any]], names: list[str]) -> tuple[LearningArgs, dict[str, Any]]:
    """The merged args (seeds: all seeds run) and per-env results of several runs.

    Raises:
        ValueError: when the runs measured different things, or one seed of an estimator twice.
    """
    if not results:
        raise ValueError("nothing to merge: give --runs DIR [DIR ...]")
    base = results[0]["args"]
    known = {f.name for f in fields(LearningArgs)}
    measured = {k: v for k, v in base.items() if k not in MAY_DIFFER}
    envs: dict[str, Any] = {}
    for result, name in zip(results, names, strict=True):
        differ = _differences(measured, {k: v for k, v in result["args"].items() if k not in MAY_DIFFER})
        if differ:
            raise ValueError(f"{name} was run with other settings than {names[0]}: {', '.join(differ)}")
        for env, run in result["envs"].items():
            if env not in envs:
                envs[env] = {**run, "runs": {}}
                first = name
            for key in ("sft", "sft_eval"):
                theirs = {k: v for k, v in run[key].items() if k != "seconds"}
                ours = {k: v for k, v in envs[env][key].items() if k != "seconds"}
                if theirs != ours:
                    what = "SFT checkpoint" if key == "sft" else "evaluation of the SFT checkpoint"
                    raise ValueError(
                        f"{name} and {first} start from another {what} on {env} "
                        f"({', '.join(_differences(ours, theirs))} differ); merge runs of one --sft_checkpoint"
                    )
            for estimator, runs in run["runs"].items():
                merged = envs[env]["runs"].setdefault(estimator, [])
                for index, seed_run in enumerate(runs):
                    # Older results lack the seed; their runs follow args.seeds, one list per estimator.
                    seed = seed_run.get("seed", result["args"]["seeds"][index])
                    seed_run = {**seed_run, "seed": seed}
                    if any(r["seed"] == seed for r in merged):
                        raise ValueError(f"{env} {estimator} seed {seed} is in more than one of the runs")
                    merged.append(seed_run)
    for env_name, env in envs.items():
        for estimator, runs in env["runs"].items():
            runs.sort(key=lambda r: r["seed"])
            steps = {tuple(p["step"] for p in r["points"]) for r in runs}
            if len(steps) > 1:  # a mean over seeds needs every seed at every step
                raise ValueError(
                    f"{env_name} {estimator}: its seeds were evaluated at different steps {sorted(steps)}; "
                    "merge one estimator's runs of one --eval_every"
                )
    seeds = sorted({r["seed"] for env in envs.values() for runs in env["runs"].values() for r in runs})
    estimators = list(dict.fromkeys(e for env in envs.values() for e in env["runs"]))
    args = LearningArgs(**{k: v for k, v in base.items() if k in known})
    return replace(args, seeds=seeds, estimators=estimators, env=list(envs)), envs


def main(args: Args) -> dict[str, Any]:
    results = [load_run(path) for path in args.runs]
    merged_args, envs = merge_results(results, list(args.runs))
    merged_args = replace(merged_args, output=args.output)
    seconds = sum(result["seconds"] for result in results)
    report = learning_report(
        merged_args, envs, f"Merged from {len(results)} runs ({seconds / 60:.1f} min of runs added up)."
    )
    print(report)
    record = {"args": asdict(merged_args), "seconds": seconds, "envs": envs, "merged_from": list(args.runs)}
    return write_result(args, record, report)


if __name__ == "__main__":
    run_cli(Args, main, "merge_learning", __doc__)

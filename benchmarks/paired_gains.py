"""How much RL moved held-out success, paired task by task against the SFT start, with a bootstrap CI.

``bench_learning`` reports each evaluation point as a mean over seeds, and the SD over 2–3 seeds is
wide. Every evaluation plays the *same* held-out games (each ``eval_group_size`` times), so the
change a run made can be read game by game: for each game, its success rate after RL minus its
success rate at the SFT start. This script reads the leaderboard's episode files that the runs left
behind and reports, per estimator, evaluation step and split (unseen scenes; seen scenes when
evaluated):

- the gain in points, the mean over seeds of each run's mean per-game gain, and its SD over seeds;
- a 95% percentile-bootstrap interval of that gain, resampling the games (each game's gain is first
  averaged over the seeds, so the interval is about which games were drawn, at these seeds);
- how many games got better and worse;
- the gain per task type.

    python -m benchmarks.paired_gains --runs results/grpo-s0 results/grpo-s1 --output results/gains

``--baseline ESTIMATOR`` also compares every other estimator with that one (GRPO, say) game by
game: each game's gain averaged over an estimator's seeds, minus the baseline's, where both were
evaluated at the same step. Its interval resamples the games and, within each estimator, the seeds
(the runs of two estimators are independent, so their seeds are not paired).

The runs are ``bench_learning`` output folders that kept their ``work/`` folder. The SFT start's
episodes are looked for in each run's ``work/<env>/sft-board`` and, for runs given
``--sft_checkpoint``, beside that checkpoint (``<checkpoint>/../sft-board``).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.leaderboard.tables import TYPE_COLUMNS
from benchmarks.merge_learning import load_run
from benchmarks.report import run_cli, write_result

#: The leaderboard's board folder of each split ``bench_learning`` evaluates, and its name here.
SPLITS = {"heldout": "unseen scenes", "seen": "seen scenes"}
#: The episode field that holds each measure of a game's outcome.
OUTCOME_FIELDS = {"success": "won", "score": "score"}
#: Identity fields of an evaluation that must agree between the start and a run's checkpoints.
_SAME_EVALUATION = (
    "env",
    "split",
    "group_size",
    "seed",
    "data_dir",
    "temperature",
    "max_steps",
    "max_new_tokens",
)


@dataclass
class Args:
    runs: list[str] = field(default_factory=list, metadata={"help": "bench_learning output folders."})
    """``bench_learning`` output folders (with their ``work/``) to compare with their SFT start."""
    output: str = field(default="results/paired_gains", metadata={"help": "Report folder."})
    """Folder for the JSON and Markdown report."""
    resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples of the games."})
    """Bootstrap resamples of the held-out games."""
    seed: int = field(default=0, metadata={"help": "Seed of the bootstrap."})
    """Seed of the bootstrap (the report is deterministic)."""
    baseline: str | None = field(default=None, metadata={"help": "Estimator to compare the others with."})
    """An estimator of the runs (e.g. ``grpo``): every other one's gain is also reported minus its gain."""


def measure(env: str) -> str:
    """What a game's outcome is: ALFWorld's success (won or not), every other env's score."""
    return "success" if env == "alfworld" else "score"


def split_name(env: str, split: str) -> str:
    """A split's name in the tables: ALFWorld's held-out games are in unseen scenes; WebShop has no scenes."""
    return "held-out goals" if env != "alfworld" and split == "heldout" else SPLITS[split]


def per_task_success(board: Path, env: str) -> tuple[dict[str, Any], dict[str, tuple[str, float]]]:
    """A board's evaluation identity and ``{task_id: (task_type, mean success over its rollouts)}``."""
    file = board / f"episodes_{env}.json"
    if not file.is_file():
        raise FileNotFoundError(
            f"{file}: no episodes; it is written by `python -m benchmarks.bench_learning` (leaderboard boards under work/)"
        )
    record = json.loads(file.read_text())
    outcome_field = OUTCOME_FIELDS[measure(env)]
    outcomes: dict[str, list[float]] = defaultdict(list)
    types: dict[str, str] = {}
    for episode in record["episodes"]:
        outcomes[episode["task_id"]].append(float(episode[outcome_field]))
        types[episode["task_id"]] = episode.get("task_type", "all")
    return record["identity"], {t: (types[t], statistics.fmean(v)) for t, v in outcomes.items()}


def _start_board(run_dir: Path, result: dict[str, Any], env: str) -> Path:
    candidates = [run_dir / "work" / env / "sft-board"]
    if result["args"].get("sft_checkpoint"):
        candidates.append(Path(result["args"]["sft_checkpoint"]).parent / "sft-board")
    for board in candidates:
        if (board / "heldout").is_dir():
            return board
    raise FileNotFoundError(
        f"{run_dir}: the SFT start's episodes are in none of {[str(c) for c in candidates]}; they are "
        "written by the bench_learning run that evaluated the checkpoint first"
    )


def collect_gains(args: Args) -> dict[str, Any]:
    """``{env: {estimator: {split: {step: {seed: {task_id: (task_type, gain)}}}}}}`` of all runs."""
    gains: dict[str, Any] = {}
    for path in args.runs:
        result = load_run(path)
        run_dir = Path(path) if Path(path).is_dir() else Path(path).parent
        for env, env_result in result["envs"].items():
            start = _start_board(run_dir, result, env)
            for estimator, runs in env_result["runs"].items():
                for run in runs:
                    folder = run_dir / "work" / env / f"{estimator}-seed{run['seed']}"
                    for point in run["points"]:
                        for split in SPLITS:
                            board = folder / f"eval-{point['step']}" / "board" / split
                            if not board.is_dir():
                                continue
                            before_id, before = per_task_success(start / split, env)
                            after_id, after = per_task_success(board, env)
                            differ = [k for k in _SAME_EVALUATION if before_id.get(k) != after_id.get(k)]
                            if differ or before.keys() != after.keys():
                                raise ValueError(
                                    f"{board} and the SFT start {start / split} evaluated differently: "
                                    f"{', '.join(differ) or 'the games'} differ"
                                )
                            per_seed = gains.setdefault(env, {}).setdefault(estimator, {})
                            per_step = per_seed.setdefault(split, {}).setdefault(point["step"], {})
                            if run["seed"] in per_step:
                                raise ValueError(
                                    f"{env} {estimator} seed {run['seed']} is in more than one run"
                                )
                            per_step[run["seed"]] = {
                                task: (kind, after[task][1] - success)
                                for task, (kind, success) in before.items()
                            }
    if not gains:
        raise ValueError("no runs to compare: give --runs DIR [DIR ...]")
    return gains


def _gain_matrix(per_seed: dict[int, dict[str, tuple[str, float]]]) -> tuple[list[str], np.ndarray]:
    """The games (sorted) and their gains as a seeds (sorted) x games array."""
    seeds = sorted(per_seed)
    tasks = sorted(per_seed[seeds[0]])
    return tasks, np.array([[per_seed[s][t][1] for t in tasks] for s in seeds])


def summarize(per_seed: dict[int, dict[str, tuple[str, float]]], resamples: int, seed: int) -> dict[str, Any]:
    """Gain (points) of one estimator at one step and split: seed mean and SD, bootstrap CI, per type.

    >>> s = summarize({0: {"a": ("pick", 0.5), "b": ("look", 0.0)}, 1: {"a": ("pick", 0.0), "b": ("look", 0.0)}}, 100, 0)
    >>> s["gain"], s["seed_sd"], s["better"], s["worse"], s["types"]
    (12.5, 17.7, 1, 0, {'look': 0.0, 'pick': 25.0})
    """
    seeds = sorted(per_seed)
    tasks, matrix = _gain_matrix(per_seed)
    by_seed = matrix.mean(axis=1)
    by_task = matrix.mean(axis=0)
    rng = np.random.default_rng(seed)
    draws = by_task[rng.integers(0, len(tasks), size=(resamples, len(tasks)))].mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    types: dict[str, list[float]] = defaultdict(list)
    for task, gain in zip(tasks, by_task, strict=True):
        types[per_seed[seeds[0]][task][0]].append(float(gain))
    return {
        "seeds": seeds,
        "games": len(tasks),
        "gain": round(100 * float(by_seed.mean()), 1),
        "seed_sd": round(100 * float(by_seed.std(ddof=1)), 1) if len(seeds) > 1 else 0.0,
        "per_seed": [round(100 * float(g), 1) for g in by_seed],
        "ci95": [round(100 * float(low), 1), round(100 * float(high), 1)],
        "better": int((by_task > 0).sum()),
        "worse": int((by_task < 0).sum()),
        "types": {kind: round(100 * statistics.fmean(v), 1) for kind, v in sorted(types.items())},
    }


def compare(
    runs: dict[int, dict[str, tuple[str, float]]],
    baseline: dict[int, dict[str, tuple[str, float]]],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """One estimator's per-game gain minus a baseline's (points), with a bootstrap CI over games and seeds.

    Each game's gain is averaged over each estimator's own seeds before the difference; a bootstrap
    draw resamples the games and, separately, each estimator's seeds.

    >>> a = {0: {"x": ("pick", 1.0), "y": ("pick", 0.0)}, 1: {"x": ("pick", 0.5), "y": ("pick", 0.0)}}
    >>> b = {0: {"x": ("pick", 0.0), "y": ("pick", 0.5)}}
    >>> c = compare(a, b, 100, 0)
    >>> c["difference"], c["better"], c["worse"], c["seeds"], c["baseline_seeds"]
    (12.5, 1, 1, [0, 1], [0])
    """
    tasks, ours = _gain_matrix(runs)
    baseline_tasks, theirs = _gain_matrix(baseline)
    if baseline_tasks != tasks:
        raise ValueError("the estimator and the baseline were evaluated on different games")
    by_task = ours.mean(axis=0) - theirs.mean(axis=0)
    rng = np.random.default_rng(seed)

    def seed_means(matrix: np.ndarray) -> np.ndarray:  # (resamples, games): each draw's seeds averaged
        picks = rng.integers(0, len(matrix), size=(resamples, len(matrix)))
        return matrix[picks].mean(axis=1)

    games = rng.integers(0, len(tasks), size=(resamples, len(tasks)))
    draws = np.take_along_axis(seed_means(ours) - seed_means(theirs), games, axis=1).mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return {
        "seeds": sorted(runs),
        "baseline_seeds": sorted(baseline),
        "games": len(tasks),
        "difference": round(100 * float(by_task.mean()), 1),
        "ci95": [round(100 * float(low), 1), round(100 * float(high), 1)],
        "better": int((by_task > 0).sum()),
        "worse": int((by_task < 0).sum()),
    }


def comparisons(gains: dict[str, Any], baseline: str, resamples: int, seed: int) -> dict[str, Any]:
    """``{env: {estimator: {split: {step: compare(...)}}}}`` against ``baseline`` at the steps both reached."""
    found = sorted({e for estimators in gains.values() for e in estimators})
    if not any(baseline in estimators for estimators in gains.values()):
        raise ValueError(f"--baseline {baseline!r} is in none of the runs; their estimators are {found}")
    result: dict[str, Any] = {}
    for env, estimators in gains.items():
        reference = estimators.get(baseline, {})
        for estimator, by_split in estimators.items():
            if estimator == baseline:
                continue
            for split, steps in by_split.items():
                for step, per_seed in sorted(steps.items()):
                    if step in reference.get(split, {}):
                        compared = compare(per_seed, reference[split][step], resamples, seed)
                        result.setdefault(env, {}).setdefault(estimator, {}).setdefault(split, {})[step] = (
                            compared
                        )
    return result


def comparison_report(baseline: str, compared: dict[str, Any]) -> str:
    """Markdown: one table per env and split, a row per estimator and step, minus ``baseline``."""
    lines: list[str] = []
    for env, name, rows in _tables(compared):
        lines += [
            f"## {env}, {name}: gain minus {baseline}'s gain, per game (points)",
            "",
            f"| estimator | step | seeds | {baseline} seeds | difference | 95% CI (games and seeds) | games better / worse |",
            "|---|---:|---|---|---:|---|---|",
        ]
        for estimator, step, c in rows:
            lines.append(
                f"| {estimator} | {step} | {', '.join(map(str, c['seeds']))} | "
                f"{', '.join(map(str, c['baseline_seeds']))} | {c['difference']:+.1f} | "
                f"[{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}] | {c['better']} / {c['worse']} of {c['games']} |"
            )
        lines.append("")
    return "\n".join(lines)


def _tables(by_env: dict[str, Any]) -> Iterator[tuple[str, str, list[tuple[str, int, dict[str, Any]]]]]:
    """``(env, split name, [(estimator, step, summary), ...])`` for each env and split that has rows."""
    for env, estimators in by_env.items():
        for split in SPLITS:
            name = f"{split_name(env, split)}, {measure(env)}"
            rows = [
                (e, step, s)
                for e, by_split in estimators.items()
                for step, s in by_split.get(split, {}).items()
            ]
            if rows:
                yield env, name, rows


def report(summaries: dict[str, Any]) -> str:
    """Markdown: one table per env and split, a row per estimator and step."""
    measures = " and ".join(dict.fromkeys(measure(env) for env in summaries)) or "success"
    lines = [f"# Held-out {measures} gained over the SFT start, paired game by game", ""]
    for env, name, rows in _tables(summaries):
        seen = {k for _, _, s in rows for k in s["types"]}
        kinds = [k for k in TYPE_COLUMNS if k in seen] + sorted(seen - TYPE_COLUMNS.keys())
        lines += [
            f"## {env}, {name}: gain in points (after RL − SFT start)",
            "",
            "| estimator | step | seeds | gain ± SD over seeds | per seed | 95% CI (games) | games better / worse | "
            + " | ".join(TYPE_COLUMNS.get(k, k) for k in kinds)
            + " |",
            "|---|---:|---|---:|---|---|---|" + "---:|" * len(kinds),
        ]
        for estimator, step, s in rows:
            per_type = " | ".join(f"{s['types'].get(k, float('nan')):+.1f}" for k in kinds)
            lines.append(
                f"| {estimator} | {step} | {', '.join(map(str, s['seeds']))} | {s['gain']:+.1f} ± {s['seed_sd']:.1f} | "
                f"{', '.join(f'{g:+.1f}' for g in s['per_seed'])} | [{s['ci95'][0]:+.1f}, {s['ci95'][1]:+.1f}] | "
                f"{s['better']} / {s['worse']} of {s['games']} | {per_type} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(args: Args) -> dict[str, Any]:
    if args.resamples < 1:
        raise ValueError(f"--resamples must be >= 1, got {args.resamples}")
    gains = collect_gains(args)
    summaries = {
        env: {
            estimator: {
                split: {
                    step: summarize(seeds, args.resamples, args.seed) for step, seeds in sorted(steps.items())
                }
                for split, steps in by_split.items()
            }
            for estimator, by_split in estimators.items()
        }
        for env, estimators in gains.items()
    }
    result: dict[str, Any] = {"gains": summaries}
    text = report(summaries)
    if args.baseline is not None:
        result["baseline"] = args.baseline
        result["versus_baseline"] = comparisons(gains, args.baseline, args.resamples, args.seed)
        text += "\n" + comparison_report(args.baseline, result["versus_baseline"])
    print(text)
    return write_result(args, result, text)


if __name__ == "__main__":
    run_cli(Args, main, "paired_gains", __doc__)

"""Distinct states explored and success at an equal env-step budget: 3SPO's branching rollouts vs GRPO vs GiGPO.

Run: ``python -m benchmarks.bench_spo3`` (CPU, the tiny offline model, ALFWorld
generated games). Two parts, in one run, on the same seeds and tasks:

1. Training: ``updates`` optimizer steps of :class:`trainers.StepGRPOTrainer` per method
   and seed, each update with a budget of ``num_tasks × group_size × max_env_steps`` env
   steps (GRPO/GiGPO: that many rollouts of at most ``max_env_steps``; 3SPO:
   ``branching=True`` with ``branch_budget`` = the same number). Reported: env steps
   used, distinct states seen (keys of ``o_t`` and ``o_{t+1}`` over all updates), success
   of the training rollouts and of a final evaluation on ``eval_tasks`` train tasks.
2. Rollout strategy alone: a scripted policy (uniform over admissible actions, a
   stand-in for an untrained agent that at least acts) plays ``iterations`` batches
   with the plain episode collector (GRPO's and GiGPO's rollouts are the same) and with
   3SPO's ranked DFS (its state table carried over), at the same env-step budget.

The 3SPO paper reports 2.4x more distinct states than GRPO; the ratio printed is ours.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import run_cli, write_result
from trainers.checkpoints import model_path


@dataclass
class Args:
    model: str = field(default="tiny", metadata={"help": "HF model path, or 'tiny'."})
    """HF model path, or 'tiny' for the offline tiny Qwen2."""
    methods: list[str] = field(
        default_factory=lambda: ["grpo", "gigpo", "3spo"], metadata={"help": "Methods."}
    )
    """Methods compared (3spo trains with branching rollouts)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1], metadata={"help": "Seeds."})
    """Seeds (tasks, sampling, scripted policy)."""
    num_tasks: int = field(default=2, metadata={"help": "Tasks per update."})
    """Tasks per update (N)."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task; 3SPO's slots per task."})
    """Rollouts per task (G) for GRPO/GiGPO; 3SPO's slots per task (its n(s) cap)."""
    max_env_steps: int = field(default=8, metadata={"help": "Episode step limit."})
    """Episode step limit; the budget per update is num_tasks * group_size * max_env_steps env steps."""
    updates: int = field(default=3, metadata={"help": "Optimizer steps per run (training part)."})
    """Optimizer steps per method and seed in the training part."""
    max_completion_length: int = field(default=8, metadata={"help": "Tokens per reply."})
    """Tokens per reply (a tiny random model only babbles; short replies keep steps fast)."""
    eval_tasks: int = field(default=4, metadata={"help": "Train tasks evaluated after training."})
    """Tasks of the final evaluation (one rollout each, on the train split)."""
    iterations: int = field(default=4, metadata={"help": "Batches per run (scripted part)."})
    """Batches per run in the scripted-policy part (3SPO's table carries over)."""
    greed: list[float] = field(
        default_factory=lambda: [0.0, 0.8, 0.95], metadata={"help": "Scripted policy peaks."}
    )
    """Scripted policies: probability of a fixed preferred action per state (0: uniform; 0.8: peaked like
    an LLM's sampling), else uniform over the admissible actions."""
    env_workers: int = field(default=2, metadata={"help": "Env worker processes."})
    """Env worker processes."""
    output: str = field(default="results/bench_spo3", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


def _states(records: list[dict[str, Any]]) -> set[int]:
    return {k for r in records for k in (r["state_key"], r["next_state_key"]) if k}


def _make_envs(args: Args) -> Any:
    from agentgym_rl import GroupVectorEnv

    return GroupVectorEnv(
        "AgentGymRL/ALFWorld-v0", num_tasks=args.num_tasks, group_size=args.group_size,
        workers=args.env_workers, split="train", data_dir="generated", max_episode_steps=args.max_env_steps,
    )  # fmt: skip


def train_run(args: Args, model: str, method: str, seed: int, envs: Any, scratch: Path) -> dict[str, float]:
    """``updates`` training steps of one method; what its rollouts explored and how it ends."""
    from trainers.config import StepGRPOConfig
    from trainers.trainer import StepGRPOTrainer

    budget = args.num_tasks * args.group_size * args.max_env_steps
    config = StepGRPOConfig(
        output_dir=str(scratch / f"{method}-{seed}"), env_id="alfworld", env_kwargs={"data_dir": "generated"},
        num_tasks=args.num_tasks, group_size=args.group_size, max_env_steps=args.max_env_steps,
        env_workers=args.env_workers, estimator=method, branching=method == "3spo",
        branch_budget=budget if method == "3spo" else None, action_format="plain",
        per_device_train_batch_size=16, max_completion_length=args.max_completion_length,
        learning_rate=1e-3, max_steps=args.updates, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", seed=seed,
    )  # fmt: skip
    trainer = StepGRPOTrainer(model=model, args=config, envs=envs)
    seen: set[int] = set()
    steps, wins = [0], []
    rollout_fn = trainer.rollout

    def counted_rollout() -> Any:  # every training rollout passes here: count what it explored
        rollout = rollout_fn()
        seen.update(_states(rollout.records))
        steps[0] += len(rollout.rows)
        wins.append(float(np.mean([e.won for e in rollout.episodes])) if rollout.episodes else 0.0)
        return rollout

    trainer.rollout = counted_rollout
    start = time.perf_counter()
    trainer.train()
    evaluation = trainer.evaluate_in_env(split="train", num_tasks=args.eval_tasks, seed=seed)
    return {
        "env_steps": float(steps[0]),
        "distinct_states": float(len(seen)),
        "train_success": float(np.mean(wins)),
        "eval_success": evaluation.get("env/success_rate", 0.0),
        "seconds": time.perf_counter() - start,
    }


def scripted_run(args: Args, strategy: str, seed: int, envs: Any, greed: float) -> dict[str, float]:
    """``iterations`` batches of a scripted admissible-action policy: episodes or 3SPO's ranked DFS."""
    from agentgym_rl.keys import hash_fields
    from trainers.branching import BranchingCollector
    from trainers.estimators.spo3 import SPO3State
    from trainers.prompting import PromptConfig
    from trainers.rollout import GeneratedReply, RolloutCollector
    from trainers.step_batch import StepBatch

    rng = np.random.default_rng(seed)

    def generate(conversations: list[list[dict[str, str]]]) -> list[GeneratedReply]:
        replies = []
        for conversation in conversations:
            text = conversation[-1]["content"]
            actions = text.split("admissible actions of the current situation are: [", 1)[1].split("]", 1)[0]
            admissible = [a.strip().strip("'") for a in actions.split(",\n")]
            # The preferred action of a prompt is fixed (a hash), as a peaked policy's mode would be.
            preferred = admissible[hash_fields(b"pref", [text]) % len(admissible)]
            choice = preferred if rng.random() < greed else str(rng.choice(admissible))
            replies.append(GeneratedReply([0], [0], f"<think>.</think><action>{choice}</action>"))
        return replies

    base = RolloutCollector(envs, PromptConfig(env_kind="alfworld"))
    state = SPO3State()
    branching = BranchingCollector(base, state)
    budget = args.num_tasks * args.group_size * args.max_env_steps
    task_rng = np.random.default_rng(seed)
    seen: set[int] = set()
    steps, wins = 0, []
    for it in range(args.iterations):
        tasks = [
            envs.task_ids[int(i)] for i in task_rng.choice(len(envs.task_ids), args.num_tasks, replace=False)
        ]
        if strategy == "branching":
            rollout = branching.collect(generate, tasks, budget, seed=seed * 1000 + it)
            state.update(StepBatch.from_records(rollout.records))
        else:
            rollout = base.collect(generate, tasks, seed=seed * 1000 + it)
        seen.update(_states(rollout.records))
        steps += len(rollout.rows)
        wins.append(sum(e.won for e in rollout.episodes))
    return {"env_steps": float(steps), "distinct_states": float(len(seen)), "wins": float(sum(wins))}


def _fmt(values: list[float], digits: int = 1) -> str:
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def main(args: Args) -> dict:
    """Train each method and play each scripted policy; returns the runs and the distinct-state ratios."""
    model = model_path(args.model)
    envs = _make_envs(args)
    training: dict[str, list[dict[str, float]]] = {m: [] for m in args.methods}
    scripted: dict[str, list[dict[str, float]]] = {
        f"{strategy}, greed {greed}": [] for greed in args.greed for strategy in ("episodes", "branching")
    }
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for seed in args.seeds:
                for method in args.methods:
                    training[method].append(train_run(args, model, method, seed, envs, Path(scratch)))
        for seed in args.seeds:
            for greed in args.greed:
                for strategy in ("episodes", "branching"):
                    scripted[f"{strategy}, greed {greed}"].append(
                        scripted_run(args, strategy, seed, envs, greed)
                    )
    finally:
        envs.close()

    def ratio(runs: dict, a: str, b: str) -> float:
        return statistics.fmean(r["distinct_states"] for r in runs[a]) / max(
            1e-9, statistics.fmean(r["distinct_states"] for r in runs[b])
        )

    budget = args.num_tasks * args.group_size * args.max_env_steps
    train_ratio = ratio(training, "3spo", "grpo") if {"3spo", "grpo"} <= set(training) else float("nan")
    scripted_ratio = {g: ratio(scripted, f"branching, greed {g}", f"episodes, greed {g}") for g in args.greed}
    lines = [
        f"# 3SPO rollouts vs GRPO vs GiGPO (ALFWorld generated, CPU, model {args.model})",
        "",
        f"Budget: {budget} env steps per update ({args.num_tasks} tasks x {args.group_size} x "
        f"{args.max_env_steps} steps); seeds {args.seeds}; mean ± std over seeds.",
        "",
        f"## Training, {args.updates} updates",
        "",
        "| method | env steps | distinct states | train success | eval success | seconds |",
        "|---|---:|---:|---:|---:|---:|",
        *[
            f"| {m} | {_fmt([r['env_steps'] for r in runs])} | {_fmt([r['distinct_states'] for r in runs])} | "
            f"{_fmt([r['train_success'] for r in runs], 2)} | {_fmt([r['eval_success'] for r in runs], 2)} | "
            f"{_fmt([r['seconds'] for r in runs])} |"
            for m, runs in training.items()
        ],
        "",
        f"distinct states, 3SPO / GRPO: **{train_ratio:.2f}x** (paper: 2.4x)",
        "",
        f"## Rollout strategy alone, scripted admissible-action policies, {args.iterations} batches",
        "",
        "| rollouts | env steps | distinct states | winning rollouts found |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {_fmt([r['env_steps'] for r in runs])} | {_fmt([r['distinct_states'] for r in runs])} | "
            f"{_fmt([r['wins'] for r in runs])} |"
            for name, runs in scripted.items()
        ],
        "",
        "distinct states, 3SPO branching / episodes (GRPO, GiGPO): "
        + ", ".join(f"greed {g}: **{r:.2f}x**" for g, r in scripted_ratio.items()),
    ]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "training": training,
        "scripted": scripted,
        "ratios": {
            "distinct states, training, 3SPO / GRPO": train_ratio,
            **{
                f"distinct states, scripted greed {g}, branching / episodes": r
                for g, r in scripted_ratio.items()
            },
        },
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_spo3", __doc__)

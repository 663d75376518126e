"""Where a StepGRPOTrainer step's time goes, and training curves of every estimator side by side.

Run: ``python -m benchmarks.bench_trainer`` (CPU, the tiny offline model; ``--model PATH``
for a real one). Two parts, in one run:

1. Time split of a training step on ALFWorld (generated games): generation, env,
   advantages + bookkeeping (StepBatch, estimator), loss (forward + backward). Goal
   (issue 7): advantages + bookkeeping < 5% of the step.
2. Success rate per step for each estimator on the one-step TextBandit (known best
   action; the tiny model may only say the option letters), same seeds: a real run that
   shows every estimator's signal reaching the policy.
3. Loss paths: one rollout's loss (forward + backward) and reference forward, rows in rollout
   order or sorted by length (``StepGRPOConfig.sort_by_length``, the default; chunks trimmed to
   their longest row either way), log-probabilities from TRL's fused LM head (every position
   scored off Triton devices) or from the completion positions only (the CPU default); timed
   alternately on the same rows, ratios of medians.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.report import run_cli, write_result
from trainers.checkpoints import model_path


@dataclass
class Args:
    model: str = field(default="tiny", metadata={"help": "HF model path, or 'tiny'."})
    """HF model path, or 'tiny' for the offline tiny Qwen2."""
    steps: int = field(default=4, metadata={"help": "Timed training steps (ALFWorld part)."})
    """Timed training steps of the ALFWorld part (after one warm-up step)."""
    num_tasks: int = field(default=4, metadata={"help": "Tasks per step (ALFWorld part)."})
    """Tasks per step of the ALFWorld part."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task (ALFWorld part)."})
    """Rollouts per task of the ALFWorld part."""
    max_env_steps: int = field(default=8, metadata={"help": "Episode limit (ALFWorld part)."})
    """Episode step limit of the ALFWorld part."""
    max_completion_length: int = field(default=48, metadata={"help": "Tokens per reply (ALFWorld part)."})
    """Tokens per reply in the ALFWorld part."""
    estimators: list[str] = field(
        default_factory=lambda: ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"],
        metadata={"help": "Estimators for the curves."},
    )
    """Estimators compared in the training curves."""
    curve_steps: int = field(default=10, metadata={"help": "Training steps per curve."})
    """Training steps per estimator in the curves."""
    bandit_options: int = field(default=3, metadata={"help": "Options of the bandit (chance = 1/options)."})
    """Options of the TextBandit (a uniform chooser succeeds 1/options of the time)."""
    padding_repeats: int = field(
        default=5, metadata={"help": "Timed repeats of each row order (padding part)."}
    )
    """Timed repeats of each row order in the padding part (alternating)."""
    seed: int = field(default=0, metadata={"help": "Seed."})
    """Seed of everything."""
    output: str = field(default="results/bench_trainer", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


def time_split(args: Args, model: str, scratch: Path) -> dict[str, float]:
    """Median seconds per training step by part, on ALFWorld generated games."""
    from trainers import StepGRPOConfig, StepGRPOTrainer

    config = StepGRPOConfig(
        output_dir=str(scratch / "split"),
        env_id="alfworld",
        env_kwargs={"data_dir": "generated"},
        estimator="gigpo",
        num_tasks=args.num_tasks,
        group_size=args.group_size,
        max_env_steps=args.max_env_steps,
        per_device_train_batch_size=16,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps + 1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=args.seed,
    )
    trainer = StepGRPOTrainer(model=model, args=config)
    start = time.perf_counter()
    try:
        trainer.train()
    finally:
        trainer.close()
    wall = time.perf_counter() - start
    logs = [h for h in trainer.state.log_history if "time/rollout" in h][1:]  # drop the warm-up step
    parts = {
        "generation": [h["time/generate"] for h in logs],
        "env": [h["time/env"] for h in logs],
        "advantages + bookkeeping": [
            h["time/advantages"] + h["time/rollout"] - h["time/generate"] - h["time/env"] for h in logs
        ],
        "loss (forward + backward)": [h["time/loss"] for h in logs],
    }
    result = {name: statistics.median(values) for name, values in parts.items()}
    result["rows per step"] = statistics.median(h["env/rows"] for h in logs)
    result["wall (all steps)"] = wall
    return result


#: The loss paths timed by :func:`loss_paths`: (rows sorted by length, completion positions scored only).
LOSS_PATHS = {
    "rollout order, completion scored only": (False, True),
    "sorted by length, TRL's fused head": (True, False),
    "sorted by length, completion scored only (default)": (True, True),
}


def loss_paths(args: Args, model: str, scratch: Path) -> dict[str, float]:
    """Median seconds of one rollout's loss (forward + backward) and reference forward along each of
    :data:`LOSS_PATHS`, timed alternately on the same rows."""
    import functools

    import torch
    from trl import GRPOTrainer

    from trainers import StepGRPOConfig, StepGRPOTrainer

    chunk = 16
    config = StepGRPOConfig(
        output_dir=str(scratch / "loss_paths"), env_id="alfworld", env_kwargs={"data_dir": "generated"},
        estimator="gigpo", num_tasks=args.num_tasks, group_size=args.group_size, max_env_steps=args.max_env_steps,
        per_device_train_batch_size=chunk, max_completion_length=args.max_completion_length, beta=0.04,
        sort_by_length=False, report_to="none", save_strategy="no", seed=args.seed,
    )  # fmt: skip
    trainer = StepGRPOTrainer(model=model, args=config)
    try:
        trainer.create_optimizer_and_scheduler(num_training_steps=1)
        batch = trainer._generate_and_score_completions([{"prompt": "rollout"}] * 4)
    finally:
        trainer.close()
    rows = batch["prompt_ids"].size(0)
    lengths = batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)
    order = torch.argsort(lengths, stable=True)
    by_length = {
        k: v[order] if torch.is_tensor(v) and v.dim() and v.size(0) == rows else v for k, v in batch.items()
    }
    ours = trainer._get_per_token_logps_and_entropies
    trls = functools.partial(
        GRPOTrainer._get_per_token_logps_and_entropies, trainer
    )  # every position off Triton
    seconds: dict[str, list[float]] = {name: [] for name in LOSS_PATHS}
    for _ in range(args.padding_repeats):
        for name, (sort, compact) in LOSS_PATHS.items():
            rows_batch = by_length if sort else batch
            trainer._get_per_token_logps_and_entropies = ours if compact else trls  # what compute_loss calls
            start = time.perf_counter()
            trainer.model.zero_grad()
            trainer.backward_rows(trainer.model, rows_batch, chunk)
            with torch.no_grad():
                trainer._chunked_logps(trainer.model, rows_batch, chunk)  # what the reference forward costs
            seconds[name].append(time.perf_counter() - start)
    trainer._get_per_token_logps_and_entropies = ours

    def positions(rows_batch: dict) -> float:
        chunks = (trainer._chunk(rows_batch, begin, chunk) for begin in range(0, rows, chunk))
        return float(sum(c["prompt_ids"].numel() + c["completion_ids"].numel() for c in chunks))

    result = {f"{name} (s)": statistics.median(values) for name, values in seconds.items()}
    result["rollout order (positions)"] = positions(batch)
    result["sorted by length (positions)"] = positions(by_length)
    # Before chunks were trimmed, every chunk had the whole batch's widths.
    result["untrimmed (positions)"] = float(
        rows * (batch["prompt_ids"].size(1) + batch["completion_ids"].size(1))
    )
    result["tokens"] = float(lengths.sum())
    result["rows"] = float(rows)
    return result


def curves(args: Args, model: str, scratch: Path) -> dict[str, list[float]]:
    """Success rate per step for each estimator on the TextBandit (best option "a")."""
    from transformers import AutoTokenizer

    from trainers import StepGRPOConfig, StepGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model)
    letters = "abcdefghijklmnopqrstuvwxyz"[: args.bandit_options]
    allowed = {tokenizer.convert_tokens_to_ids(c) for c in letters}
    results = {}
    for estimator in args.estimators:
        config = StepGRPOConfig(
            output_dir=str(scratch / estimator),
            env_id="bandit",
            env_kwargs={"best": "a", "num_options": args.bandit_options},
            estimator=estimator,
            action_format="plain",
            num_tasks=2,
            group_size=8,
            per_device_train_batch_size=16,
            max_completion_length=1,
            learning_rate=0.05,
            max_steps=args.curve_steps,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            seed=args.seed,
            generation_kwargs={"suppress_tokens": [i for i in range(len(tokenizer)) if i not in allowed]},
        )
        trainer = StepGRPOTrainer(model=model, args=config, processing_class=tokenizer)
        try:
            trainer.train()
        finally:
            trainer.close()
        results[estimator] = [
            h["env/success_rate"] for h in trainer.state.log_history if "env/success_rate" in h
        ]
    return results


def main(args: Args) -> dict:
    """Time a training step by part and train every estimator; returns the split, the curves and the shares."""
    model = model_path(args.model)
    with tempfile.TemporaryDirectory() as scratch:
        split = time_split(args, model, Path(scratch))
        curve = curves(args, model, Path(scratch))
        padding = loss_paths(args, model, Path(scratch))

    default = "sorted by length, completion scored only (default) (s)"

    def share(name: str) -> str:
        return f"{100 * (1 - padding['tokens'] / padding[f'{name} (positions)']):.1f}%"

    step = sum(
        v
        for k, v in split.items()
        if k in ("generation", "env", "advantages + bookkeeping", "loss (forward + backward)")
    )
    overhead = split["env"] + split["advantages + bookkeeping"]
    lines = [
        f"# StepGRPOTrainer on CPU, model {args.model}",
        "",
        f"## Time per training step (ALFWorld generated, {args.num_tasks} tasks x {args.group_size}, "
        f"<= {args.max_env_steps} env steps, {args.max_completion_length} tokens/reply; medians of {args.steps} steps)",
        "",
        "| part | seconds | share |",
        "|---|---:|---:|",
        *[
            f"| {name} | {seconds:.3f} | {100 * seconds / step:.1f}% |"
            for name, seconds in split.items()
            if name in ("generation", "env", "advantages + bookkeeping", "loss (forward + backward)")
        ],
        f"| **step** | {step:.3f} | 100% |",
        "",
        f"rows per step: {split['rows per step']:.0f}; our overhead (env + advantages + bookkeeping): "
        f"{100 * overhead / step:.1f}% of the step; advantages + bookkeeping: "
        f"{100 * split['advantages + bookkeeping'] / step:.2f}% (goal < 5%)",
        "",
        f"## Success rate per step, TextBandit ({args.bandit_options} options, chance {1 / args.bandit_options:.2f}), "
        "2 tasks x 8 rollouts, same seed",
        "",
        "| estimator | " + " | ".join(str(i + 1) for i in range(args.curve_steps)) + " |",
        "|---|" + "---:|" * args.curve_steps,
        *[f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |" for name, values in curve.items()],
        "",
        f"## Loss paths: one rollout's loss (forward + backward) and reference forward ({padding['rows']:.0f} rows, "
        f"{padding['tokens']:.0f} tokens, chunks of 16 trimmed to their longest row; medians of "
        f"{args.padding_repeats}, alternating)",
        "",
        "| path | seconds | × the default |",
        "|---|---:|---:|",
        *[
            f"| {name} | {padding[f'{name} (s)']:.3f} | {padding[f'{name} (s)'] / padding[default]:.2f} |"
            for name in LOSS_PATHS
        ],
        "",
        "Positions computed (tokens + padding): rollout order "
        f"{padding['rollout order (positions)']:.0f} ({share('rollout order')} padding), sorted by length "
        f"{padding['sorted by length (positions)']:.0f} ({share('sorted by length')}); chunks padded to the "
        f"whole batch's widths (no trimming) {padding['untrimmed (positions)']:.0f} ({share('untrimmed')}). "
        "TRL's fused head runs the LM head at every position off Triton devices; ours at the completion's only.",
    ]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "time_split": split,
        "curves": curve,
        "loss_paths": padding,
        "ratios": {
            "advantages + bookkeeping / step": split["advantages + bookkeeping"] / step,
            "env + advantages + bookkeeping / step": overhead / step,
            **{
                f"loss + reference, {name} / default": padding[f"{name} (s)"] / padding[default]
                for name in LOSS_PATHS
            },
        },
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_trainer", __doc__)

"""Time of every advantage estimator, vectorized torch vs the plain-Python reference, as ratios from one run.

Run: ``python -m benchmarks.bench_advantages`` (the reference estimators live in
``benchmarks/reference_advantages.py``; the tests check ours against them). Goals (issue 6): >= 100x the reference at
10^5 rows on CPU, < 5 ms at 10^6 rows on a GPU, cost linear in rows.

Batches are synthetic but shaped like ALFWorld training: task groups of 8 rollouts,
1-30 steps each, observations drawn from a few dozen states per task (so anchor and
depth-d groups repeat), 30% all-failed groups, an invalid-action penalty on 10% of
steps. The reference runs on the same batch (converted to Python rows outside the
timer) up to ``--reference-max-rows``; its output is checked against the vectorized one.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

import torch

from benchmarks.reference_advantages import REFERENCES, rows_of
from benchmarks.report import run_cli, write_result
from trainers.advantages import compute_advantages, list_estimators, make_config
from trainers.segment_ops import dense_ids, segment_sum
from trainers.step_batch import StepBatch


@dataclass
class Args:
    sizes: list[int] = field(
        default_factory=lambda: [10_000, 100_000, 1_000_000], metadata={"help": "Batch sizes in step rows."}
    )
    """Batch sizes in step rows."""
    estimators: list[str] = field(
        default_factory=lambda: ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"],
        metadata={"help": "Registered estimator names to time."},
    )
    """Registered estimator names to time."""
    reference_max_rows: int = field(
        default=100_000, metadata={"help": "Largest batch the Python reference is timed on (it is slow)."}
    )
    """Largest batch the Python reference is timed on (it is slow)."""
    repeats: int = field(
        default=5, metadata={"help": "Timed runs of the vectorized estimator (after one warm-up)."}
    )
    """Timed runs of the vectorized estimator (after one warm-up)."""
    devices: list[str] = field(
        default_factory=lambda: ["cpu", "cuda"],
        metadata={"help": "Devices to time the vectorized estimators on; unavailable ones are skipped."},
    )
    """Devices to time the vectorized estimators on; unavailable ones are skipped."""
    threads: int = field(
        default=1,
        metadata={
            "help": "torch CPU threads: 1 matches the single-threaded reference; 0 keeps torch's default."
        },
    )
    """torch CPU threads: 1 matches the single-threaded reference; 0 keeps torch's default."""
    seed: int = field(default=0, metadata={"help": "Seed of the synthetic batches."})
    """Seed of the synthetic batches."""
    output: str = field(default="results/bench_advantages", metadata={"help": "Folder for JSON + Markdown."})
    """Folder for the JSON and Markdown results."""


def synthetic_batch(
    rows: int, seed: int, group_size: int = 8, max_len: int = 30, states: int = 40
) -> StepBatch:
    """A CPU batch of exactly ``rows`` step rows, built with vectorized torch ops."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (rows // max(1, (max_len + 1) // 2) + 16,), generator=gen)
    ends = torch.cumsum(lengths, 0)
    num_traj = int(torch.searchsorted(ends, torch.tensor(rows)).item()) + 1
    lengths = lengths[:num_traj].clone()
    lengths[-1] -= int(ends[num_traj - 1]) - rows  # the last rollout is cut to fit
    traj = torch.repeat_interleave(torch.arange(num_traj), lengths)
    starts = torch.cumsum(lengths, 0) - lengths
    step = torch.arange(rows) - starts[traj]
    group = traj // group_size
    num_groups = int(group[-1]) + 1 if rows else 0

    # Outcomes: 30% of the groups fail everywhere, the others win 40% of their rollouts.
    failed_group = torch.rand(num_groups, generator=gen) < 0.3
    won = (torch.rand(num_traj, generator=gen) < 0.4) & ~failed_group[torch.arange(num_traj) // group_size]
    outcome = won.to(torch.float32)[traj]
    done = torch.zeros(rows, dtype=torch.bool)
    done[torch.cumsum(lengths, 0) - 1] = True
    reward = torch.where(torch.rand(rows, generator=gen) < 0.1, -0.1, 0.0) + torch.where(done, outcome, 0.0)

    # Observations: the first one is the task's; later ones repeat within a task.
    local_state = torch.where(step == 0, 0, torch.randint(1, states, (rows,), generator=gen))
    state_key = group * states + local_state + 1
    pair, num_pairs = dense_ids(traj, state_key)
    first_row = torch.full((num_pairs,), rows, dtype=torch.long).scatter_reduce(
        0, pair, torch.arange(rows), reduce="amin"
    )
    first_visit = first_row[pair] == torch.arange(rows)

    # Depth keys 0, 1, 2, 4: finer with depth; the exact prefix is shared at step 0 only
    # (and by a third of step-1 rows), as with G = 8 rollouts in practice.
    columns = [state_key]
    for depth in (1, 2, 4):
        context = torch.randint(0, 2 * depth, (rows,), generator=gen)
        columns.append(state_key * 1000 + depth * 100 + torch.where(step == 0, 0, context) + 10**9)
    shared = (step == 0) | ((step == 1) & (torch.rand(rows, generator=gen) < 0.33))
    prefix = torch.where(shared, group * 1000 + local_state + 2 * 10**12, torch.arange(rows) + 4 * 10**12)
    history_keys = torch.stack([*columns, prefix], dim=1)

    next_row = torch.arange(rows) + 1
    has_next = ~done
    next_state_key = torch.where(has_next, state_key[next_row.clamp_max(rows - 1)], 0)
    next_first_visit = has_next & first_visit[next_row.clamp_max(rows - 1)]
    assert int(segment_sum(done.long(), traj, num_traj).min()) == 1
    # Real keys are 64-bit hashes (sorted, not counted, into groups): map ids to random int64s.
    everything = torch.cat([state_key, next_state_key, history_keys.reshape(-1)])
    uniques, inverse = torch.unique(everything, return_inverse=True)
    hashed = torch.randint(1, 2**62, (uniques.numel(),), generator=gen)
    hashed[uniques == 0] = 0  # "no state" stays 0
    state_key, next_state_key, flat = hashed[inverse].split([rows, rows, history_keys.numel()])
    history_keys = flat.reshape(history_keys.shape)
    # Rows in random order: estimators may not rely on the collector's ordering.
    perm = torch.randperm(rows, generator=gen)
    return StepBatch(
        group_id=group[perm],
        traj_id=traj[perm],
        step=step[perm],
        state_key=state_key[perm],
        next_state_key=next_state_key[perm],
        history_keys=history_keys[perm],
        first_visit=first_visit[perm],
        next_first_visit=next_first_visit[perm],
        reward=reward.to(torch.float32)[perm],
        outcome=outcome[perm],
        done=done[perm],
    )


def time_vectorized(name: str, batch: StepBatch, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` calls after one warm-up."""
    config = make_config(name)
    cuda = batch.device.type == "cuda"
    compute_advantages(name, batch, config)
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        compute_advantages(name, batch, config)
        if cuda:
            torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - start))
    return times


def main(args: Args) -> dict:
    """Time every estimator at every size; returns the rows and the ratios (reference / vectorized)."""
    unknown = sorted(set(args.estimators) - set(list_estimators()))
    if unknown:
        raise SystemExit(f"unknown estimators {unknown}; registered: {list_estimators()}")
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [d for d in args.devices if d == "cpu" or (d == "cuda" and torch.cuda.is_available())]

    results = []
    for rows in args.sizes:
        batch = synthetic_batch(rows, args.seed)
        reference_rows = rows_of(batch) if rows <= args.reference_max_rows else None
        for name in args.estimators:
            entry: dict = {"rows": rows, "estimator": name}
            for device in devices:
                times = time_vectorized(name, batch.to(device), args.repeats)
                entry[f"{device}_ms"] = statistics.mean(times)
                entry[f"{device}_ms_std"] = statistics.stdev(times) if len(times) > 1 else 0.0
                entry[f"{device}_ms_median"] = statistics.median(times)
            if reference_rows is not None:
                config = make_config(name)
                start = time.perf_counter()
                expected = REFERENCES[name](reference_rows, config)
                entry["reference_ms"] = 1000 * (time.perf_counter() - start)
                # Median: robust to the odd slow run on a shared machine.
                entry["ratio"] = entry["reference_ms"] / entry["cpu_ms_median"]
                ours = compute_advantages(name, batch, config).double()
                entry["max_abs_diff"] = float(
                    (ours - torch.tensor(expected, dtype=torch.float64)).abs().max()
                )
            results.append(entry)
            line = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in entry.items())
            print(line, flush=True)

    header = "| rows | estimator | " + " | ".join(f"{d} (ms)" for d in devices)
    header += " | µs/row (cpu) | reference (ms) | ratio (reference / cpu median) | max abs diff |"
    lines = [
        f"# Advantage estimators: vectorized vs reference (mean ± std of {args.repeats} runs, seed {args.seed})",
        "",
        header,
        "|---:|---|" + "---:|" * (len(devices) + 4),
    ]
    for entry in results:
        timed = " | ".join(f"{entry[f'{d}_ms']:.2f} ± {entry[f'{d}_ms_std']:.2f}" for d in devices)
        per_row = 1000 * entry["cpu_ms"] / entry["rows"] if "cpu_ms" in entry else float("nan")
        reference = f"{entry['reference_ms']:.0f}" if "reference_ms" in entry else "—"
        ratio = f"{entry['ratio']:.0f}x" if "ratio" in entry else "—"
        diff = f"{entry['max_abs_diff']:.1e}" if "max_abs_diff" in entry else "—"
        lines.append(
            f"| {entry['rows']} | {entry['estimator']} | {timed} | {per_row:.3f} | {reference} | {ratio} | {diff} |"
        )
    lines += ["", f"torch threads: {torch.get_num_threads()}"]
    report = "\n".join(lines)
    print(report)
    result = {
        "args": asdict(args),
        "results": results,
        "torch_threads": torch.get_num_threads(),
        "ratios": {
            f"{e['estimator']} at {e['rows']} rows, reference / cpu": e["ratio"]
            for e in results
            if "ratio" in e
        },
    }
    return write_result(args, result, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_advantages", __doc__)

"""Vectorized segment operations over flat step rows (no Python loop over groups or rows).

The estimators in ``trainers.estimators`` are built from these few primitives:

- :func:`dense_ids`: map one or more int64 key columns to dense segment ids
  ``0..num_segments-1`` with ``torch.unique(return_inverse=True)``.
- :func:`segment_sum`, :func:`segment_stats`: per-segment sums, counts, means and
  (unbiased, two-pass) standard deviations with ``index_add_``.
- :func:`zscore`: ``z(x | S)`` of ``ALGORITHMS.md`` with the two singleton rules
  (``"zero"``: ``z = 0``; ``"identity"``: mean 0, std 1, verl-agent's episode rule).
- :class:`TrajectoryLayout` and :func:`discounted_returns`: rows sorted by
  (trajectory, step), the next row of each row, and discounted suffix sums
  ``Q_t = Σ_{j≥t} γ^{j-t} x_j`` by a segmented doubling scan (``⌈log2 T⌉`` vector
  passes, exact: no ``γ^{-t}`` rescaling that would overflow on long rollouts).

Statistics are accumulated in float64 so that rows holding the same value give a
standard deviation of (almost) exactly 0: with ``ε = 1e-6`` a float32 rounding error
of ``1e-8`` would otherwise turn into an advantage of ``0.01``.

>>> import torch
>>> ids, n = dense_ids(torch.tensor([7, 3, 7, 9]))
>>> ids.tolist(), n
([1, 0, 1, 2], 3)
>>> layout = TrajectoryLayout.build(torch.tensor([0, 0, 1]), torch.tensor([1, 0, 0]))
>>> discounted_returns(torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64), layout, 0.5).tolist()
[1.0, 2.5, 4.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = [
    "SegmentStats",
    "TrajectoryLayout",
    "dense_ids",
    "discounted_returns",
    "segment_stats",
    "segment_sum",
    "zscore",
]

Norm = Literal["std", "mean"]
Singleton = Literal["zero", "identity"]


def dense_ids(*columns: torch.Tensor | tuple[torch.Tensor, int]) -> tuple[torch.Tensor, int]:
    """Dense segment ids of the rows' key tuples.

    Args:
        *columns: int64 tensors ``[rows]``, or ``(ids, num)`` pairs that are already
            dense (skips their densification); rows with equal values in every
            column share a segment.

    Returns:
        ``(ids, num_segments)``: int64 ``[rows]`` in ``0..num_segments-1`` and the number
        of distinct tuples. A single column is numbered in sorted order; the numbering
        of tuples is deterministic but otherwise arbitrary (only the grouping matters).
    """
    ids, n = _dense(columns[0])
    for column in columns[1:]:
        if not isinstance(column, tuple):
            mixed = _mixed_ids(ids, n, column)
            if mixed is not None:
                ids, n = mixed
                continue
        other, m = _dense(column)
        # Exact combination of two dense ids (n * m < 2**63 for any real batch).
        ids, n = _unique_inverse(ids * m + other)
    return ids, n


# An odd 64-bit constant (as a signed int64): multiplying dense ids by it spreads them
# over all 64 bits before they are XOR-ed into a hashed key.
_MIX = -7046029254386353131


def _mixed_ids(ids: torch.Tensor, n: int, keys: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """Dense ids of ``(ids, keys)`` pairs with one ``torch.unique`` instead of two.

    ``keys ^ (ids * C)`` is unique per pair unless two pairs collide; the result is
    verified exactly (``ids`` constant within every segment, hence ``keys`` too, as
    XOR with a known value is invertible) and ``None`` is returned on a collision.
    """
    inverse, num = _unique_inverse(keys ^ (ids * _MIX))
    low = torch.full((num,), n, dtype=torch.long, device=ids.device).scatter_reduce(0, inverse, ids, "amin")
    high = torch.full((num,), -1, dtype=torch.long, device=ids.device).scatter_reduce(0, inverse, ids, "amax")
    if bool((low != high).any()):
        return None
    return inverse, num


def _dense(column: torch.Tensor | tuple[torch.Tensor, int]) -> tuple[torch.Tensor, int]:
    return column if isinstance(column, tuple) else _unique_inverse(column)


def _unique_inverse(values: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``torch.unique(values, return_inverse=True)`` without the uniques, faster.

    Small value ranges (group, rollout and step ids) are ranked by counting, in
    O(rows + range); hashed keys go to ``torch.unique``. Both give sorted-order ranks.
    """
    n = values.numel()
    if n == 0:
        return values.new_zeros(0, dtype=torch.long), 0
    low, high = int(values.min()), int(values.max())
    if high - low <= 4 * n + 1024:
        shifted = values - low
        present = torch.zeros(high - low + 1, dtype=torch.long, device=values.device)
        present.index_fill_(0, shifted, 1)
        rank = torch.cumsum(present, 0)
        return rank.index_select(0, shifted) - 1, int(rank[-1])
    uniques, inverse = torch.unique(values, sorted=True, return_inverse=True)
    return inverse, int(uniques.numel())


def segment_sum(values: torch.Tensor, ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Per-segment sums: ``out[s] = Σ_{i: ids[i] = s} values[i]``."""
    out = values.new_zeros((num_segments,) + tuple(values.shape[1:]))
    return out.index_add_(0, ids, values)


@dataclass(frozen=True)
class SegmentStats:
    """Per-segment count, mean and standard deviation (float64, ``[num_segments]``)."""

    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


def segment_stats(
    values: torch.Tensor, ids: torch.Tensor, num_segments: int, *, with_std: bool = True
) -> SegmentStats:
    """Count, mean and unbiased std (``torch.std``'s default) of each segment.

    Two passes (mean, then squared deviations) in float64. A segment with one
    member has std ``0`` here; :func:`zscore` applies the singleton rules.
    ``with_std=False`` skips the second pass (std is then all zeros).
    """
    x = values.to(torch.float64)
    count = segment_sum(torch.ones_like(x), ids, num_segments)
    mean = segment_sum(x, ids, num_segments) / count.clamp_min(1.0)
    if not with_std:
        return SegmentStats(count=count, mean=mean, std=torch.zeros_like(mean))
    sq = segment_sum((x - mean.index_select(0, ids)) ** 2, ids, num_segments)
    std = torch.sqrt(sq / (count - 1.0).clamp_min(1.0))
    return SegmentStats(count=count, mean=mean, std=std)


def zscore(
    values: torch.Tensor,
    ids: torch.Tensor,
    num_segments: int,
    *,
    norm: Norm = "std",
    epsilon: float = 1e-6,
    singleton: Singleton = "zero",
    weights_ids: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``z(x | S) = (x - mean_S) / (std_S + ε)`` of every row within its segment (float64).

    Args:
        values: ``[rows]`` values ``x``.
        ids: dense segment id of each row (from :func:`dense_ids`).
        num_segments: number of segments.
        norm: ``"std"`` divides by ``std + ε``; ``"mean"`` only subtracts the mean.
        epsilon: ``ε``.
        singleton: rule for a one-member segment: ``"zero"`` gives ``z = 0``;
            ``"identity"`` uses mean 0 and std 1 (the row keeps ``x / (1 + ε)``, or
            ``x`` with ``norm="mean"``), as verl-agent's episode normalization does.
        weights_ids: optional ``(member_values, member_ids)``: the statistics are
            taken over these members instead of over ``values`` (e.g. one entry per
            rollout while every step row is normalized).

    Returns:
        float64 ``[rows]``.
    """
    members, member_ids = (values, ids) if weights_ids is None else weights_ids
    stats = segment_stats(members, member_ids, num_segments, with_std=norm == "std")
    single = stats.count <= 1
    if singleton == "zero":
        mean = stats.mean
    else:
        mean = torch.where(single, torch.zeros_like(stats.mean), stats.mean)
    std = torch.where(single, torch.ones_like(stats.std), stats.std)
    x = values.to(torch.float64)
    out = x - mean.index_select(0, ids)
    if norm == "std":
        out = out / (std.index_select(0, ids) + epsilon)
    if singleton == "zero":
        out = torch.where(single.index_select(0, ids), 0.0, out)
    return out


@dataclass(frozen=True)
class TrajectoryLayout:
    """Rows ordered by (trajectory, step): the structure every per-rollout scan needs.

    Attributes:
        order: row indices sorted by (trajectory, step).
        traj: dense trajectory id of each row (original row order).
        num_traj: number of trajectories.
        next_row: index of the row of step ``t + 1`` of the same trajectory, or
            ``-1`` for a trajectory's last row (original row order).
        remaining: rows left after this one in its trajectory, in *sorted* order
            (``0`` on the last row).
    """

    order: torch.Tensor
    traj: torch.Tensor
    num_traj: int
    next_row: torch.Tensor
    remaining: torch.Tensor

    @classmethod
    def build(cls, traj_id: torch.Tensor, step: torch.Tensor) -> TrajectoryLayout:
        """Sort rows by (trajectory, step); rows may come in any order."""
        traj, num_traj = dense_ids(traj_id)
        n = traj.numel()
        if n == 0:
            empty = traj.new_zeros(0)
            return cls(order=empty, traj=traj, num_traj=0, next_row=empty, remaining=empty)
        arange = torch.arange(n, device=traj.device)
        length = segment_sum(torch.ones_like(traj), traj, num_traj)
        end = torch.cumsum(length, 0)  # one past each trajectory's last sorted position
        # Usual case: each rollout's steps are first..first + T - 1, so a row's sorted
        # position is its rollout's start plus its step offset (no sort at all).
        first = torch.full((num_traj,), torch.iinfo(torch.long).max, device=traj.device)
        first = first.scatter_reduce(0, traj, step, "amin")
        pos = (end - length).index_select(0, traj) + (step - first.index_select(0, traj))
        clamped = pos.clamp(0, n - 1)
        hits = torch.zeros(n, dtype=torch.long, device=traj.device).index_add_(
            0, clamped, torch.ones_like(pos)
        )
        if bool(((pos < end.index_select(0, traj)) & (hits.index_select(0, clamped) == 1)).all()):
            order = torch.empty_like(pos).scatter_(0, pos, arange)
        else:  # gaps or repeated steps: sort
            low = int(step.min())
            order = torch.argsort(traj * (int(step.max()) - low + 1) + (step - low), stable=True)
        sorted_traj = traj.index_select(0, order)
        same_next = torch.zeros(n, dtype=torch.bool, device=traj.device)
        same_next[:-1] = sorted_traj[1:] == sorted_traj[:-1]
        next_sorted = torch.full((n,), -1, dtype=torch.long, device=traj.device)
        next_sorted[:-1] = torch.where(same_next[:-1], order[1:], next_sorted[:-1])
        next_row = torch.empty_like(next_sorted).scatter_(0, order, next_sorted)
        remaining = end.index_select(0, sorted_traj) - 1 - arange
        return cls(order=order, traj=traj, num_traj=num_traj, next_row=next_row, remaining=remaining)

    def lengths(self) -> torch.Tensor:
        """``T_i`` of every trajectory (by dense id), int64."""
        return segment_sum(torch.ones_like(self.traj), self.traj, self.num_traj)


def discounted_returns(values: torch.Tensor, layout: TrajectoryLayout, gamma: float) -> torch.Tensor:
    """``Q_t = Σ_{j≥t} γ^{j-t} x_j`` within each trajectory, by a segmented doubling scan.

    After the pass with offset ``k`` each row holds the discounted sum of the next
    ``2k`` rows of its trajectory (clipped at the trajectory's end), so
    ``⌈log2 T_max⌉`` passes finish the scan.

    Args:
        values: ``[rows]`` per-step values ``x_t`` (original row order).
        layout: the batch's :class:`TrajectoryLayout`.
        gamma: discount ``γ``.

    Returns:
        ``[rows]`` in ``values``' dtype, original row order.
    """
    n = values.numel()
    if n == 0:
        return values.clone()
    y = values.index_select(0, layout.order)
    max_remaining = int(layout.remaining.max())
    k, factor = 1, gamma
    while k <= max_remaining:
        # Rows with at least k rows left in their rollout take the next window's sum;
        # the right-hand side is materialized before the in-place add.
        ahead = torch.where(layout.remaining[:-k] >= k, y[k:], 0.0)
        y[:-k].add_(ahead, alpha=factor)
        k, factor = 2 * k, factor * factor
    return torch.empty_like(y).scatter_(0, layout.order, y)

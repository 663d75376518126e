"""Pieces shared by the estimators: the batch's group/rollout index, the episode term, diagnostics."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import torch

from trainers.estimator_configs import EstimatorConfig
from trainers.segment_ops import TrajectoryLayout, dense_ids, segment_sum, zscore
from trainers.step_batch import StepBatch

__all__ = [
    "BatchIndex",
    "Diagnostics",
    "all_failed_groups",
    "anchor_ids",
    "env_rewards",
    "episode_signal",
    "episode_term",
    "group_size_diagnostics",
    "merged_anchor_diagnostics",
    "row_penalty",
    "safe_mean",
]

#: Diagnostics: 0-dim tensors by name, or a zero-argument function returning them, so
#: that they are computed (and synchronized with the device) only when asked for.
Diagnostics = dict[str, torch.Tensor] | Callable[[], dict[str, torch.Tensor]]


class BatchIndex:
    """Dense task-group and rollout ids of a batch, computed once per call and only when needed.

    Attributes:
        group: dense group id of each row; ``num_groups`` of them (computed eagerly).
        traj: dense rollout id of each row; ``num_traj`` of them.
        layout: rows sorted by (rollout, step), next rows (:class:`TrajectoryLayout`).
        traj_group: dense group id of each rollout ``[num_traj]``.
        traj_outcome: ``R_i`` of each rollout, float64 ``[num_traj]``.
        traj_score: the env score (in ``[0, 1]``) of each rollout, float64 ``[num_traj]``.
    """

    def __init__(self, batch: StepBatch) -> None:
        self.batch = batch
        self.group, self.num_groups = dense_ids(batch.group_id)

    @cached_property
    def layout(self) -> TrajectoryLayout:
        """The (rollout, step) order of the rows."""
        return TrajectoryLayout.build(self.batch.traj_id, self.batch.step)

    @cached_property
    def _traj(self) -> tuple[torch.Tensor, int]:
        if "layout" in self.__dict__:
            return self.layout.traj, self.layout.num_traj
        return dense_ids(self.batch.traj_id)

    @property
    def traj(self) -> torch.Tensor:
        """Dense rollout id of each row."""
        return self._traj[0]

    @property
    def num_traj(self) -> int:
        """Number of rollouts."""
        return self._traj[1]

    @cached_property
    def traj_group(self) -> torch.Tensor:
        """Dense group id of each rollout (every row of a rollout carries the same group)."""
        return self.group.new_zeros(self.num_traj).scatter_(0, self.traj, self.group)

    @cached_property
    def traj_outcome(self) -> torch.Tensor:
        """``R_i`` of each rollout (float64)."""
        out = torch.zeros(self.num_traj, dtype=torch.float64, device=self.group.device)
        return out.scatter_(0, self.traj, self.batch.outcome.to(torch.float64))

    @cached_property
    def traj_score(self) -> torch.Tensor:
        """The env score of each rollout (float64, in ``[0, 1]`` whatever the reward scale)."""
        out = torch.zeros(self.num_traj, dtype=torch.float64, device=self.group.device)
        return out.scatter_(0, self.traj, self.batch.score.to(torch.float64))

    @cached_property
    def lone_rows(self) -> torch.Tensor:
        """Bool ``[rows]``: the row's task group holds a single rollout (no peer to compare with)."""
        return (self.rollouts_per_group() == 1).index_select(0, self.group)

    @classmethod
    def build(cls, batch: StepBatch) -> BatchIndex:
        """Index ``batch`` (alias of the constructor)."""
        return cls(batch)

    def rollouts_per_group(self) -> torch.Tensor:
        """``G`` of each group (int64 ``[num_groups]``)."""
        return segment_sum(torch.ones_like(self.traj_group), self.traj_group, self.num_groups)


def row_penalty(batch: StepBatch, option: str) -> torch.Tensor:
    """``p_t`` of every row (float64), for an option that places the penalty as verl-agent does."""
    if batch.penalty is None:
        raise ValueError(
            f"{option} needs StepBatch.penalty (p_t, the invalid-action penalty subtracted from each "
            "row's reward): give every record a 'penalty' (trainers.rollout records it), or keep the "
            'defaults episode_signal="success" and step_penalty="discounted"'
        )
    return batch.penalty.to(torch.float64)


def env_rewards(batch: StepBatch, option: str) -> torch.Tensor:
    """``r_t + p_t``: the env's (scaled) reward before the penalty, float64.

    Rounded to float32, the precision ``StepBatch.reward`` is stored in, so that the env's
    reward comes back exactly (``float32(9.9) + float32(0.1)`` is ``10`` only after rounding):
    rows whose env rewards tie keep equal returns, which the ``ε``-sized std of ``z`` would
    otherwise turn into advantages of ``0.1``.
    """
    unpenalized = batch.reward.to(torch.float64) + row_penalty(batch, option)
    return unpenalized.to(torch.float32).to(torch.float64)


def episode_signal(
    batch: StepBatch, index: BatchIndex, config: EstimatorConfig
) -> tuple[torch.Tensor, Callable]:
    """The episode term's value on every row and, lazily, one value per rollout (float64, unscaled).

    ``config.episode_signal``: ``"success"``: ``R_i`` (``StepBatch.outcome``); ``"return"``:
    ``Σ_t r_t`` of the rollout's rows in the batch (penalties included); ``"verl_agent"``:
    ``R_i - p_t``, the row's own penalty taken off (verl-agent's ``token_level_rewards.sum(-1)``),
    whose per-rollout value is that of the rollout's first step (verl-agent's first row of the
    rollout in batch order, with ``compute_mean_std_cross_steps=False``).
    """
    kind = config.episode_signal
    if kind == "success":
        return batch.outcome.to(torch.float64), lambda: index.traj_outcome
    if kind == "return":
        per_rollout = segment_sum(batch.reward.to(torch.float64), index.traj, index.num_traj)
        return per_rollout.index_select(0, index.traj), lambda: per_rollout
    value = batch.outcome.to(torch.float64) - row_penalty(batch, 'episode_signal="verl_agent"')

    def first_steps() -> torch.Tensor:
        layout = index.layout
        lengths = layout.lengths()
        first_row = layout.order.index_select(0, torch.cumsum(lengths, 0) - lengths)
        return value.index_select(0, first_row)

    return value, first_steps


def episode_term(batch: StepBatch, index: BatchIndex, config: EstimatorConfig) -> torch.Tensor:
    """``A^E_i = z(x | group)`` on every step row, with verl-agent's statistics (float64).

    ``x`` is the episode signal (:func:`episode_signal`; default ``R_i``) times
    ``reward_scale``. ``episode_stats="steps"`` takes the group's mean/std over its step
    rows (each row carrying its value), ``"rollouts"`` over one value per rollout; a group
    with a single member (row or rollout) has mean 0 and std 1.
    """
    value, per_rollout = episode_signal(batch, index, config)
    value = value * config.reward_scale
    members = None
    if config.episode_stats == "rollouts":
        members = (per_rollout() * config.reward_scale, index.traj_group)
    return zscore(
        value,
        index.group,
        index.num_groups,
        norm=config.norm,
        epsilon=config.epsilon,
        singleton="identity",
        weights_ids=members,
    )


def anchor_ids(batch: StepBatch, index: BatchIndex, use_anchor_key: bool = False) -> tuple[torch.Tensor, int]:
    """Anchor-state groups: rows of one task group with equal state key (or ``anchor_key``)."""
    if use_anchor_key:
        if batch.anchor_key is None:
            raise ValueError(
                "enable_similarity=True needs StepBatch.anchor_key: give every record an 'anchor_key' "
                "(e.g. from trainers.semantic.similarity_anchor_keys) or set enable_similarity=False"
            )
        key = batch.anchor_key
    else:
        key = batch.state_key
    return dense_ids((index.group, index.num_groups), key)


def all_failed_groups(index: BatchIndex, threshold: float | None = None) -> torch.Tensor:
    """Bool ``[num_groups]``: the env paid nothing to any rollout, or every score is below ``threshold``.

    ``threshold=None``: every outcome ``R_i`` is 0, i.e. the episode term has no signal (0 at any
    reward scale, and 0 where the env's own shaping pays nothing, e.g. WebShop's
    ``reward_type="won"`` for a 0.75 score). A number: every env score (``StepBatch.score``, in
    ``[0, 1]``, never scaled) is below it.
    """
    if threshold is None:
        ok = index.batch.outcome != 0
    else:
        ok = index.batch.score.to(torch.float64) >= threshold
    return segment_sum(ok.to(torch.long), index.group, index.num_groups) == 0


def safe_mean(values: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` as float64, 0 when empty (diagnostics stay NaN-free)."""
    values = values.to(torch.float64)
    if values.numel() == 0:
        return values.new_zeros(())
    return values.mean()


def group_size_diagnostics(prefix: str, ids: torch.Tensor, num: int) -> dict[str, torch.Tensor]:
    """``{prefix}/mean_size`` and ``{prefix}/singleton_frac`` of a grouping of rows."""
    size = segment_sum(torch.ones_like(ids), ids, num)
    size = size[size > 0]  # ids may number segments that hold no row
    return {
        f"{prefix}/mean_size": safe_mean(size),
        f"{prefix}/singleton_frac": safe_mean(size == 1),
    }


def merged_anchor_diagnostics(
    batch: StepBatch, index: BatchIndex, ids: torch.Tensor, num: int
) -> dict[str, torch.Tensor]:
    """``anchor/merged_groups``: anchor groups that hold more than one state key (similarity merges)."""
    pairs, num_pairs = dense_ids((ids, num), batch.state_key)
    anchor_of_pair = ids.new_zeros(num_pairs).scatter_(0, pairs, ids)
    keys_per_anchor = segment_sum(torch.ones_like(anchor_of_pair), anchor_of_pair, num)
    return {"anchor/merged_groups": (keys_per_anchor > 1).sum().to(torch.float64)}


def base_diagnostics(index: BatchIndex) -> dict[str, torch.Tensor]:
    """Group-level numbers every estimator reports."""
    per_group = index.rollouts_per_group()
    return {
        "groups/all_zero_frac": safe_mean(all_failed_groups(index)),
        "groups/singleton_frac": safe_mean(per_group == 1),
        "groups/mean_rollouts": safe_mean(per_group),
    }

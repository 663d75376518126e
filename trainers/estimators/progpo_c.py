"""ProGPO-C: progress-conditioned coverage (``ALGORITHMS.md``, "ProGPO-C").

In all-failed groups every outcome advantage is 0, so rollouts are ranked by
first-visit coverage instead:

- trajectory level: ``A_i = λ · z(C_i | group)`` with ``C_i = Σ_t f_t``;
- step level (ours): ``A_t = λ · (z(C_i | group) + z(U_t | anchor group))`` with
  ``U_t = Σ_{j≥t} γ^{j-t} f_{j+1}`` (new states reached from step ``t`` on).

Other groups keep the base estimator's advantages (GRPO or GiGPO). In all-failed
groups the coverage term is added to the base advantage (``replace_base=False``),
which equals the formula for GRPO (its advantages are exactly 0 there) and keeps
GiGPO's penalty-driven step term.

All-failed means the env paid nothing to any rollout (every ``R_i = 0``, whatever the
reward scale), or, with ``failed_threshold``, that every env score (``StepBatch.score``,
in ``[0, 1]``) is below it. A lone rollout (a task group of one rollout) has no peer to
rank against: its ``z(C_i | group)`` is 0, so it keeps the base advantage (see
:mod:`trainers.estimators.grpo` for the base's lone-rollout rule); at the step level,
``z(U_t | anchor group)`` still compares its own revisits of a state.
"""

from __future__ import annotations

import torch

from trainers.estimator_configs import ProGPOCEstimatorConfig
from trainers.estimators.common import (
    BatchIndex,
    Diagnostics,
    all_failed_groups,
    anchor_ids,
    base_diagnostics,
    episode_term,
    group_size_diagnostics,
    merged_anchor_diagnostics,
    safe_mean,
)
from trainers.estimators.grpo import gigpo_step_term
from trainers.segment_ops import discounted_returns, segment_stats, segment_sum, zscore
from trainers.step_batch import StepBatch

__all__ = ["progpo_c"]


def progpo_c(
    batch: StepBatch, config: ProGPOCEstimatorConfig, state: None = None
) -> tuple[torch.Tensor, Diagnostics]:
    """ProGPO-C advantages.

    Args:
        batch: the step rows (``first_visit`` / ``next_first_visit`` give ``f_t``).
        config: base estimator, ``coverage_lambda``, ``level`` and the options.
        state: unused.

    Returns:
        ``(advantages float64 [rows], diagnostics)``.
    """
    index = BatchIndex.build(batch)
    traj = index.traj
    base = episode_term(batch, index, config)
    anchors: tuple[torch.Tensor, int] | None = None
    if config.base == "gigpo":
        step, anchor, num_anchors = gigpo_step_term(batch, index, config)
        anchors = (anchor, num_anchors)
        base = base + config.omega * step

    # C_i: distinct observations the rollout reached (optionally per step).
    coverage = segment_sum(batch.first_visit.to(torch.float64), traj, index.num_traj)
    if config.coverage_per_step:
        ones = torch.ones(traj.numel(), dtype=torch.float64, device=traj.device)
        coverage = coverage / segment_sum(ones, traj, index.num_traj)
    z_kwargs = dict(norm=config.norm, epsilon=config.epsilon, singleton="zero")
    if config.coverage_stats == "rollouts":
        z_cov = zscore(coverage, index.traj_group, index.num_groups, **z_kwargs).index_select(0, traj)
    else:
        z_cov = zscore(coverage.index_select(0, traj), index.group, index.num_groups, **z_kwargs)
    extra = z_cov
    if config.level == "step":
        anchors = anchors or anchor_ids(batch, index, config.enable_similarity)
        new_states = discounted_returns(batch.next_first_visit.to(torch.float64), index.layout, config.gamma)
        extra = extra + zscore(new_states, *anchors, **z_kwargs)
    extra = config.coverage_lambda * extra

    failed = all_failed_groups(index, config.failed_threshold)
    failed_row = failed.index_select(0, index.group)
    boosted = extra if config.replace_base else base + extra
    advantages = torch.where(failed_row, boosted, base)

    def diagnostics() -> dict[str, torch.Tensor]:
        spread = segment_stats(coverage, index.traj_group, index.num_groups).std > 0
        anchor_groups = anchors or anchor_ids(batch, index, config.enable_similarity)
        return (
            base_diagnostics(index)
            | group_size_diagnostics("anchor", *anchor_groups)
            | {
                "coverage/mean": safe_mean(coverage),
                "coverage/failed_mean": safe_mean(coverage[failed[index.traj_group]]),
                "coverage/failed_frac": safe_mean(failed),
                # Share of all-failed groups whose rollouts differ in coverage (the term is non-zero).
                "coverage/active_frac": safe_mean(spread[failed]),
            }
            | merged_anchor_diagnostics(batch, index, *anchor_groups)
        )

    return advantages, diagnostics

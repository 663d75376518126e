"""GRPO and GiGPO (``ALGORITHMS.md``: published baselines, verl-agent's statistics).

- GRPO: ``A_t = A^E_i = z(R_i | group)`` on every step of rollout ``i``.
- GiGPO: ``A_t = A^E_i + ω · z(Q_t | anchor group)`` where anchor groups are the rows
  of one task group with equal ``k(o_t)``, ``Q_t = Σ_{j≥t} γ^{j-t} r_j`` and a
  singleton anchor group gives 0.

A lone rollout (a task group of one rollout) keeps verl-agent's statistics, so that
GRPO/GiGPO reproduce the papers: with ``episode_stats="steps"`` its rows all carry the
same return, so ``A^E = 0`` unless it has a single row (mean 0, std 1: ``A^E = R_i / (1 + ε)``);
with ``episode_stats="rollouts"`` it is the group's only member: ``A^E = R_i / (1 + ε)``
on every row (``R_i`` with ``norm="mean"``). GiGPO's step term still compares the
rollout's own revisits of a state (an anchor group may hold several steps of one rollout).

Episode signal and penalty placement. Both default to the outcome ``R_i``
(``episode_signal="success"``) and to ``Q_t`` over the penalized rewards
(``step_penalty="discounted"``), as ``ALGORITHMS.md`` states them: the invalid-action penalty
reaches GiGPO through the step term only, and GRPO not at all. verl-agent's code
(``gigpo/core_gigpo.py``, ``verl/trainer/ppo/ray_trainer.py``) places it differently: its
episode score is ``token_level_rewards.sum(-1)``, the rollout's summed env rewards minus the
*row's own* penalty (``apply_invalid_action_penalty`` runs after the reward manager wrote the
episode reward on the step's last token), and its step returns are discounted env rewards
minus the row's own penalty (the penalty is subtracted from ``step_rewards`` after
``compute_step_discounted_returns``). ``episode_signal="verl_agent"`` with
``step_penalty="own_step"`` reproduces it (``StepBatch.penalty`` needed; tested in
``tests/test_gigpo_episode_signal.py``). It is not the default because in a group whose
outcomes tie (all failed, all won) the std over rows is the penalties' own, so
``mean_std_norm`` turns a 0.1 format penalty into episode advantages of order 1, stacked on
the step term's: one penalized row among ``n`` otherwise equal rows gets ``-(n - 1) / √n``
(``-3.75`` at ``n = 16``).
"""

from __future__ import annotations

from typing import Any

import torch

from trainers.estimator_configs import GiGPOEstimatorConfig, GRPOEstimatorConfig
from trainers.estimators.common import (
    BatchIndex,
    Diagnostics,
    anchor_ids,
    base_diagnostics,
    env_rewards,
    episode_term,
    group_size_diagnostics,
    merged_anchor_diagnostics,
    row_penalty,
)
from trainers.segment_ops import discounted_returns, zscore
from trainers.step_batch import StepBatch

__all__ = ["gigpo", "gigpo_step_term", "grpo", "similarity_anchors"]


def grpo(
    batch: StepBatch, config: GRPOEstimatorConfig, state: None = None
) -> tuple[torch.Tensor, Diagnostics]:
    """GRPO advantages: the episode term on every step row.

    Args:
        batch: the step rows.
        config: episode-term options (``norm``, ``episode_stats``, ``epsilon``, ``reward_scale``).
        state: unused (GRPO keeps nothing across iterations).

    Returns:
        ``(advantages float64 [rows], diagnostics)``.
    """
    index = BatchIndex.build(batch)
    return episode_term(batch, index, config), lambda: base_diagnostics(index)


def gigpo_step_term(
    batch: StepBatch, index: BatchIndex, config: GiGPOEstimatorConfig
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``A^S_t = z(Q_t | anchor group)`` (float64), with the anchor ids and their count.

    ``step_penalty="discounted"``: ``Q_t`` discounts the penalized rewards ``r_t``;
    ``"own_step"`` (verl-agent): the env's rewards ``r_t + p_t`` are discounted and the row's
    own penalty ``p_t`` is taken off afterwards.
    """
    ids, num = anchor_ids(batch, index, config.enable_similarity)
    if config.step_penalty == "own_step":
        option = 'step_penalty="own_step"'
        env = env_rewards(batch, option)
        returns = discounted_returns(env, index.layout, config.gamma) - row_penalty(batch, option)
    else:
        returns = discounted_returns(batch.reward.to(torch.float64), index.layout, config.gamma)
    step = zscore(returns, ids, num, norm=config.norm, epsilon=config.epsilon, singleton="zero")
    return step, ids, num


def gigpo(
    batch: StepBatch, config: GiGPOEstimatorConfig, state: None = None
) -> tuple[torch.Tensor, Diagnostics]:
    """GiGPO advantages: episode term plus ``ω`` times the anchor-state step term.

    Args:
        batch: the step rows (``reward`` holds ``r_t`` with the invalid-action penalty).
        config: ``gamma``, ``omega``, ``enable_similarity`` and the episode-term options.
        state: unused.

    Returns:
        ``(advantages float64 [rows], diagnostics)``.
    """
    index = BatchIndex.build(batch)
    step, ids, num = gigpo_step_term(batch, index, config)
    advantages = episode_term(batch, index, config) + config.omega * step

    def diagnostics() -> dict[str, torch.Tensor]:
        anchors = group_size_diagnostics("anchor", ids, num) | merged_anchor_diagnostics(
            batch, index, ids, num
        )
        return base_diagnostics(index) | anchors

    return advantages, diagnostics


def similarity_anchors(collector: Any, config: GiGPOEstimatorConfig) -> None:
    """Registry hook of GiGPO-style estimators: with ``enable_similarity`` the collector adds ``anchor_key``.

    The text clustering is quadratic in a group's rows, so the collector only runs it when asked.
    """
    if config.enable_similarity:
        collector.similarity_threshold = config.similarity_threshold

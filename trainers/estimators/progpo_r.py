"""ProGPO-R: exact-prefix groups plus reliability-weighted potential credit (``ALGORITHMS.md``).

For a row at step ``t`` of rollout ``i`` (``P_t``: rows with the same exact-prefix key):

1. ``A^P_t = z(Q_t | P_t)``: fair comparison of actions taken in the same context.
2. Per depth column ``d`` of ``history_keys`` (and the semantic key when
   ``n_∞ < n_min``): ``n_d`` visits and ``S_d`` summed env scores of the key in the
   batch (plus the optional moving-average table of :class:`ProGPORState`);
   ``Φ_d = (S_d + m p_0) / (n_d + m)``, ``Var_d = Φ_d (1 - Φ_d) / (n_d + m + 1)``
   with ``p_0`` the mean score of the row's group over its rollouts. Scores are
   ``StepBatch.score``, in ``[0, 1]`` at any reward scale, so ``Φ`` estimates a success
   rate; the rewards in ``c_t`` are the loss side (scaled).
3. Inverse-variance fusion: ``Φ = Σ Φ_d / Var_d / Σ 1 / Var_d``, ``V = 1 / Σ 1 / Var_d``.
4. ``c_t = r_t + γ Φ(s_{t+1}) - Φ(s_t)`` (``Φ = 0`` after the rollout's last row),
   ``ρ_t = n_eff / (n_eff + κ)`` with ``n_eff = Φ (1 - Φ) / V``.
5. ``A_t = A^E_i + ω_P 1{|P_t| ≥ 2} A^P_t + ω_Φ 1{|P_t| = 1} ρ_t z(c_t | task)``.

``Φ_d (1 - Φ_d)`` is floored at ``variance_floor`` (ours): with ``p_0 = 0`` (an
all-failed group) and no success at the key, ``Φ_d = 0`` and the plain formula
would divide by zero.

A lone rollout (a task group of one rollout; ours): its episode term follows
verl-agent's rule (see :mod:`trainers.estimators.grpo`); its exact prefixes are all
unique, so every row takes the potential term. Every visit's score is the prior
``p_0`` there, so ``Φ = p_0`` (unless the table or another group of the same task shares
a key) and ``c_t = r_t + (γ - 1) p_0`` (``r_t - p_0`` on the last step) ranks its steps
by their rewards (penalties); the estimator keeps that within-rollout credit rather
than zeroing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainers.estimator_configs import ProGPOREstimatorConfig
from trainers.estimators.common import (
    BatchIndex,
    Diagnostics,
    base_diagnostics,
    episode_term,
    group_size_diagnostics,
    safe_mean,
)
from trainers.estimators.key_table import KeyTable
from trainers.segment_ops import dense_ids, discounted_returns, segment_stats, segment_sum, zscore
from trainers.step_batch import StepBatch

__all__ = ["ProGPORState", "fused_potentials", "progpo_r"]


def _depth_columns(batch: StepBatch, config: ProGPOREstimatorConfig) -> list[int]:
    width = batch.history_keys.shape[1]
    columns = range(width) if config.depth_columns is None else config.depth_columns
    out = []
    for column in columns:
        if not -width <= column < width:
            raise ValueError(
                f"depth_columns holds {column}, but history_keys has {width} columns; "
                f"pick columns in 0..{width - 1} or set depth_columns=None"
            )
        out.append(column % width)
    return out


def _use_semantic(batch: StepBatch, config: ProGPOREstimatorConfig) -> bool:
    return config.use_semantic and batch.semantic_key is not None


class ProGPORState:
    """Optional moving-average potential table across iterations (ProGPO-R).

    Per key (every depth column and the semantic key): ``n`` visits and ``S`` summed env
    scores (``StepBatch.score``), decayed by ``ema_decay`` each :meth:`update`. Pass the
    state to ``compute_advantages`` first, then call :meth:`update` with the same batch,
    so a batch is never counted twice.

    Args:
        config: the estimator's config (``depth_columns``, ``use_semantic``, ``ema_decay``).
        min_count: keys whose decayed visit count falls below this are dropped.
    """

    def __init__(self, config: ProGPOREstimatorConfig | None = None, *, min_count: float = 1e-3) -> None:
        self.config = config or ProGPOREstimatorConfig()
        self.min_count = min_count
        self.table = KeyTable.empty(2)
        self.iterations = 0

    def update(self, batch: StepBatch) -> None:
        """Fold the batch's visits into the table: ``table ← decay · table + batch``."""
        columns = [batch.history_keys[:, c] for c in _depth_columns(batch, self.config)]
        if _use_semantic(batch, self.config):
            columns.append(batch.semantic_key)
        keys = torch.cat(columns)
        score = batch.score.to(torch.float64).repeat(len(columns))
        values = torch.stack([torch.ones_like(score), score], dim=1)
        self.table = self.table.merge(keys, values, decay=self.config.ema_decay).prune(0, self.min_count)
        self.iterations += 1

    def state_dict(self) -> dict[str, Any]:
        """Checkpointable state (CPU tensors and ints)."""
        return {"table": self.table.state_dict(), "iterations": self.iterations, "min_count": self.min_count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.table = KeyTable.from_state_dict(state["table"])
        self.iterations = int(state["iterations"])
        self.min_count = float(state.get("min_count", self.min_count))


@dataclass(frozen=True)
class _Fusion:
    phi: torch.Tensor  # fused potential Φ of every row
    variance: torch.Tensor  # its variance V
    semantic_used: torch.Tensor  # the semantic key joined the row's fusion (n_∞ < n_min)
    expanded: torch.Tensor  # ... and pooled more visits than any history key of the row
    semantic_ids: tuple[torch.Tensor, int] | None  # dense ids of the semantic key


def fused_potentials(
    batch: StepBatch,
    index: BatchIndex,
    config: ProGPOREstimatorConfig,
    table: KeyTable | None = None,
    prefix: tuple[torch.Tensor, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused potential ``Φ``, its variance ``V`` and the semantic mask of every row.

    Args:
        batch: the step rows.
        index: the batch's :class:`~trainers.estimators.common.BatchIndex`.
        config: the estimator's config.
        table: moving-average ``(n, S)`` per key from earlier iterations, pooled in.
        prefix: dense ids of the exact-prefix column, when already computed.

    Returns:
        ``(phi, variance, semantic_used)``: float64, float64 and bool ``[rows]``.
    """
    fusion = _fuse(batch, index, config, table, prefix)
    return fusion.phi, fusion.variance, fusion.semantic_used


def _fuse(
    batch: StepBatch,
    index: BatchIndex,
    config: ProGPOREstimatorConfig,
    table: KeyTable | None = None,
    prefix: tuple[torch.Tensor, int] | None = None,
) -> _Fusion:
    m = config.prior_strength
    prior = segment_stats(index.traj_score, index.traj_group, index.num_groups).mean.index_select(
        0, index.group
    )
    score = batch.score.to(torch.float64)
    precision = torch.zeros_like(score)
    weighted = torch.zeros_like(score)

    def visits(
        key: torch.Tensor, dense: tuple[torch.Tensor, int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ids, num = dense if dense is not None else dense_ids(key)
        n = segment_sum(torch.ones_like(score), ids, num).index_select(0, ids)
        s = segment_sum(score, ids, num).index_select(0, ids)
        if table is not None:
            pooled = table.lookup(key)
            n, s = n + pooled[:, 0], s + pooled[:, 1]
        return n, s

    def add(n: torch.Tensor, s: torch.Tensor, active: torch.Tensor | None = None) -> None:
        nonlocal precision, weighted
        phi_d = (s + m * prior) / (n + m)
        var_d = (phi_d * (1.0 - phi_d)).clamp_min(config.variance_floor) / (n + m + 1.0)
        weight = 1.0 / var_d
        if active is not None:
            weight = torch.where(active, weight, torch.zeros_like(weight))
        precision = precision + weight
        weighted = weighted + weight * phi_d

    columns = _depth_columns(batch, config)
    last = batch.history_keys.shape[1] - 1
    n_prefix = None
    n_history = torch.zeros_like(score)  # the most visits any history key of the row pools
    for column in columns:
        n, s = visits(batch.history_keys[:, column], prefix if column == last else None)
        add(n, s)
        n_history = torch.maximum(n_history, n)
        if column == last:
            n_prefix = n
    semantic_used = torch.zeros_like(batch.done)
    expanded = semantic_used
    semantic_ids = None
    if _use_semantic(batch, config):
        if n_prefix is None:
            n_prefix = visits(batch.history_keys[:, last], prefix)[0]
        semantic_used = n_prefix < config.min_prefix_visits
        semantic_ids = dense_ids(batch.semantic_key)
        n_semantic, s_semantic = visits(batch.semantic_key, semantic_ids)
        add(n_semantic, s_semantic, active=semantic_used)
        expanded = semantic_used & (n_semantic > n_history)
    return _Fusion(weighted / precision, 1.0 / precision, semantic_used, expanded, semantic_ids)


def progpo_r(
    batch: StepBatch, config: ProGPOREstimatorConfig, state: ProGPORState | None = None
) -> tuple[torch.Tensor, Diagnostics]:
    """ProGPO-R advantages.

    Args:
        batch: the step rows (``history_keys``, optional ``semantic_key``).
        config: potentials, fusion and combination options.
        state: optional :class:`ProGPORState` whose table is pooled with the batch.

    Returns:
        ``(advantages float64 [rows], diagnostics)``.
    """
    index = BatchIndex.build(batch)
    layout = index.layout
    z_kwargs = dict(norm=config.norm, epsilon=config.epsilon, singleton="zero")

    # Exact-prefix groups (batch only) and their step-return term.
    prefix, num_prefix = dense_ids(batch.prefix_key)
    prefix_size = segment_sum(torch.ones_like(prefix), prefix, num_prefix).index_select(0, prefix)
    returns = discounted_returns(batch.reward.to(torch.float64), layout, config.gamma)
    prefix_term = zscore(returns, prefix, num_prefix, **z_kwargs)

    # Transition credit from the fused potentials.
    table = None if state is None else state.table
    fusion = _fuse(batch, index, config, table, (prefix, num_prefix))
    phi, variance = fusion.phi, fusion.variance
    has_next = (layout.next_row >= 0) & ~batch.done
    phi_next = torch.where(has_next, phi.index_select(0, layout.next_row.clamp_min(0)), 0.0)
    reward = batch.reward.to(torch.float64)
    if not config.outcome_in_reward:
        reward = reward + torch.where(batch.done, batch.outcome.to(torch.float64), torch.zeros_like(reward))
    credit = reward + config.gamma * phi_next - phi
    n_eff = (phi * (1.0 - phi)).clamp_min(config.variance_floor) / variance
    reliability = n_eff / (n_eff + config.reliability_kappa)
    potential_term = reliability * zscore(credit, index.group, index.num_groups, **z_kwargs)

    singleton = prefix_size == 1
    if config.always_both:
        step = config.omega_prefix * prefix_term + config.omega_potential * potential_term
    else:
        step = torch.where(
            singleton, config.omega_potential * potential_term, config.omega_prefix * prefix_term
        )
    advantages = episode_term(batch, index, config) + step

    def diagnostics() -> dict[str, torch.Tensor]:
        return (
            base_diagnostics(index)
            | group_size_diagnostics("prefix", prefix, num_prefix)
            | {
                "prefix/singleton_row_frac": safe_mean(singleton),
                "potential/mean": safe_mean(phi),
                "potential/reliability_mean": safe_mean(reliability[singleton]),
                "potential/semantic_frac": safe_mean(fusion.semantic_used),
                "potential/expanded_groups": _expanded_groups(fusion),
            }
        )

    return advantages, diagnostics


def _expanded_groups(fusion: _Fusion) -> torch.Tensor:
    """Semantic groups that pooled, for some row, more visits than any of its history keys."""
    if fusion.semantic_ids is None:
        return torch.zeros((), dtype=torch.float64, device=fusion.phi.device)
    ids, num = fusion.semantic_ids
    hits = segment_sum(fusion.expanded.to(torch.long), ids, num)
    return (hits > 0).sum().to(torch.float64)

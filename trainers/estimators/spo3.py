"""3SPO: state-score supervision with a state table kept across iterations (``ALGORITHMS.md``).

Table (:class:`SPO3State`), keyed by ``k(o)`` (or per task): ``N_total``, ``N_succ``;
every finished rollout adds 1 to ``N_total`` of each *distinct* state it visited and
1 to ``N_succ`` if it succeeded (its env score, ``StepBatch.score`` in ``[0, 1]``, is at
least ``success_threshold``: the reward scale never makes a success). ``τ = 1 +``
rollouts recorded so far.

- ``S(s) = exp(-α log τ · N_succ / (N_total + ε)) · 1{N_fail < ξ ∨ N_succ / N_total > ζ}``,
  ``S = 1`` for unvisited states.
- ``R_t = ω(N) 1[k(o_t) ≠ k(o_{t+1})] + (0.5 - ω(N)) (S(s_t) - S(s_{t+1})) + 0.5 r^succ_t``,
  ``ω(N) = 0.5 exp(-ω_k N_total(s_t))``; when ``k(o_{t+1})`` is unknown (``0``, after
  the last row) both transition terms are 0 (ours).
- Across an action the env refused (``StepBatch.refused``; ours, ``refusal_keeps_state``):
  the state stays ``s_t``. The refusal's text (ALFWorld's "Nothing happens.", one key
  for all refusals) would otherwise be a state with ``S ≈ 0`` reachable from anywhere,
  so that ``R_t`` paid refusals and charged the step out of them; rows whose ``o_t`` is a
  refusal take the state before it and are no table visit (their anchor stays ``o_t``).
- ``A_t = z(R_t | anchor group)`` (mean-only by default), optionally of the
  discounted returns of ``R_t`` and plus ``A^E_i``.
- A lone rollout (a task group with one rollout in the batch: the adaptive size
  ``n = 1``, or in post-step mode a group's last live rollout) rolls out without
  update: all its rows get ``A_t = 0`` (its visits still enter the table).
- ``n(s) = ⌈G_max · S(s)⌉`` (:func:`adaptive_group_sizes`), ``≥ 1`` wherever the
  ``ξ``/``ζ`` filter keeps ``s`` (``S > 0`` there, however small); ``0`` only where it
  does not.

The paper updates the table after each finished rollout, before the batch's step
rewards are scored, so :func:`spo3` scores with the table *plus* the batch's finished
rollouts, without changing ``state``; call :meth:`SPO3State.update` afterwards.
A rollout's distinct states are its rows with ``first_visit`` (``f_t = 1``) plus the
terminal observation when the collector gives its key and it is new
(``next_first_visit`` of the done row), so the env's first-visit flags must be
consistent with the state keys (as ``agentgym_rl.keys.EpisodeKeys`` makes them).
Rows of the branching DFS (``trainers.branching``) carry ``path_count`` /
``path_successes``: a row before a fork belongs to every finished path below it, so
its first visit counts once per such path (the table counts root-to-leaf paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainers.estimator_configs import SPO3EstimatorConfig
from trainers.estimators.common import (
    BatchIndex,
    Diagnostics,
    anchor_ids,
    base_diagnostics,
    episode_term,
    group_size_diagnostics,
    safe_mean,
)
from trainers.estimators.key_table import KeyTable
from trainers.segment_ops import dense_ids, discounted_returns, segment_sum, zscore
from trainers.step_batch import StepBatch

__all__ = ["SPO3State", "adaptive_group_sizes", "spo3", "spo3_step_rewards"]

_TOTAL, _SUCC = 0, 1


def _keeps_state(batch: StepBatch, config: SPO3EstimatorConfig) -> bool:
    """Whether refusals are undone (``refusal_keeps_state`` and the batch records them)."""
    return batch.refused is not None and config.refusal_keeps_state


def _state_keys(
    batch: StepBatch, index: BatchIndex, config: SPO3EstimatorConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Table keys of ``s_t`` and ``s_{t+1}`` (``0`` when unknown) of every row, and whether
    ``o_t`` is a state (not an env's refusal: see :func:`_across_refusals`)."""
    key, next_key = _observation_keys(batch, index, config)
    if not _keeps_state(batch, config):
        return key, next_key, torch.ones_like(batch.first_visit)
    return _across_refusals(key, next_key, batch.refused, index)


def _across_refusals(
    key: torch.Tensor, next_key: torch.Tensor, refused: torch.Tensor, index: BatchIndex
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keys with every refusal undone: a refused row's ``s_{t+1}`` is its ``s_t``, and a row whose
    ``o_t`` is a refusal takes the state of the last row before it that was not one (ours).

    >>> from trainers.step_batch import StepBatch
    >>> rows = [dict(group_id=0, traj_id=0, step=t, state_key=k, history_keys=[k], first_visit=True,
    ...              reward=0.0, outcome=0.0, done=t == 3, refused=r) for t, (k, r) in
    ...         enumerate([(11, True), (99, True), (99, False), (12, False)])]
    >>> batch = StepBatch.from_records(rows)
    >>> key, nxt, real = _across_refusals(batch.state_key, batch.next_state_key, batch.refused, BatchIndex(batch))
    >>> key.tolist(), nxt.tolist(), real.tolist()
    ([11, 11, 11, 12], [11, 11, 12, 0], [True, False, False, True])
    """
    rows = torch.arange(key.numel(), device=key.device)
    following = index.layout.next_row
    has_next = following >= 0
    previous = torch.full_like(rows, -1).index_put_((following[has_next],), rows[has_next])
    real = ~((previous >= 0) & refused.index_select(0, previous.clamp_min(0)))
    source = torch.where(real, rows, previous)
    # Pointer doubling: each pass halves the longest chain of refusals left to cross.
    for _ in range(max(1, key.numel()).bit_length()):
        source = source.index_select(0, source)
    key = key.index_select(0, source)
    return key, torch.where(refused, key, next_key), real


def _observation_keys(
    batch: StepBatch, index: BatchIndex, config: SPO3EstimatorConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Table keys of ``o_t`` and ``o_{t+1}`` (``0`` when unknown) of every row."""
    if not config.per_task:
        return batch.state_key, batch.next_state_key
    width = batch.history_keys.shape[1]
    if not -width <= config.task_state_column < width:
        raise ValueError(
            f"task_state_column={config.task_state_column} but history_keys has {width} columns; "
            "point it at the depth-0 column or set per_task=False"
        )
    key = batch.history_keys[:, config.task_state_column]
    # The next observation's per-task key is the next row's; after the last row it is unknown.
    nxt = index.layout.next_row
    next_key = torch.where(nxt >= 0, key.index_select(0, nxt.clamp_min(0)), 0)
    return key, next_key


@dataclass(frozen=True)
class _BatchCounts:
    """The batch's keys, densified once, and its finished rollouts' contribution to the table."""

    keys: torch.Tensor  # [U] distinct table keys among o_t and o_{t+1} (0 included if present)
    row: torch.Tensor  # [rows] index into keys of o_t
    next_row: torch.Tensor  # [rows] index into keys of o_{t+1}
    added: torch.Tensor  # [U, 2] float64 (N_total, N_succ) increments
    finished: torch.Tensor  # 0-dim int64: rollouts recorded by this batch


def _successes(batch: StepBatch, config: SPO3EstimatorConfig) -> torch.Tensor:
    """Bool ``[rows]``: the row's rollout succeeded (env score ``>= success_threshold``, unscaled)."""
    return batch.score.to(torch.float64) >= config.success_threshold


def _batch_counts(batch: StepBatch, index: BatchIndex, config: SPO3EstimatorConfig) -> _BatchCounts:
    """Distinct states of every finished rollout: its first visits (``f_t = 1``) plus a
    known terminal observation that is new (``next_first_visit`` of the done row).

    With ``path_count`` / ``path_successes`` (branching DFS), a row counts once for each
    finished path through it; every path still has one done row, its leaf.
    """
    key, next_key, real = _state_keys(batch, index, config)
    keys, row, next_row = _dense_pair(key, next_key)
    inverse, num_keys = torch.cat([row, next_row]), keys.numel()
    finished = batch.done.sum()
    if batch.path_count is not None:
        paths = batch.path_count.to(torch.float64)
        wins = batch.path_successes.to(torch.float64)
    else:
        if int(finished) == index.num_traj:  # every rollout ended (the usual case)
            finished_row = torch.ones_like(batch.done)
        else:
            traj_finished = segment_sum(batch.done.to(torch.long), index.traj, index.num_traj) > 0
            finished_row = traj_finished.index_select(0, index.traj)
        paths = finished_row.to(torch.float64)
        wins = (finished_row & _successes(batch, config)).to(torch.float64)
    # A refusal is no visit: the state it stands for was counted where the rollout reached it.
    arrived = batch.next_first_visit & (next_key != 0)
    if _keeps_state(batch, config):
        arrived = arrived & ~batch.refused
    visit = torch.cat([batch.first_visit & real & (key != 0), batch.done & arrived]).to(torch.float64)
    added = torch.stack(
        [
            segment_sum(visit * paths.repeat(2), inverse, num_keys),
            segment_sum(visit * wins.repeat(2), inverse, num_keys),
        ],
        dim=1,
    )
    return _BatchCounts(keys, row, next_row, added, finished)


def _dense_pair(key: torch.Tensor, next_key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distinct keys of ``o_t`` and ``o_{t+1}`` (one sort of both columns) and each row's index."""
    both = torch.cat([key, next_key])
    uniques, inverse = torch.unique(both, sorted=True, return_inverse=True)
    return uniques, inverse[: key.numel()], inverse[key.numel() :]


class SPO3State:
    """3SPO's state table, persisted across iterations and checkpoints.

    Holds ``N_total`` / ``N_succ`` per state key, the number of rollouts recorded
    (``τ - 1``), and per state the actions already explored (for the ranked
    backtracking DFS of ``trainers.branching``). With ``config.max_states`` set, the
    table keeps at most that many keys: after each :meth:`update` the keys seen least
    recently (in an update) are evicted, with their explored actions, so memory stays flat.

    Args:
        config: the estimator's config (``per_task``, ``success_threshold``, score constants).
    """

    def __init__(self, config: SPO3EstimatorConfig | None = None) -> None:
        self.config = config or SPO3EstimatorConfig()
        self.table = KeyTable.empty(2)
        self.num_rollouts = 0
        self.explored: dict[int, set[int]] = {}
        self.last_seen = torch.zeros(0, dtype=torch.long)  # update tick per table key (aligned)
        self.ticks = 0

    @property
    def tau(self) -> int:
        """``τ = 1 +`` rollouts recorded so far."""
        return 1 + self.num_rollouts

    def update(self, batch: StepBatch) -> None:
        """Record the batch's finished rollouts (rollouts with a ``done`` row)."""
        counts = _batch_counts(batch, BatchIndex(batch), self.config)
        new = counts.added[:, _TOTAL] > 0
        old_keys, old_seen = self.table.keys.cpu(), self.last_seen
        self.table = self.table.merge(counts.keys[new], counts.added[new])
        self.num_rollouts += int(counts.finished)
        # Least-recently-seen bookkeeping: carry old ticks over to the merged keys, stamp this update's.
        self.ticks += 1
        keys = self.table.keys.cpu()
        seen = torch.zeros(keys.numel(), dtype=torch.long)
        if old_keys.numel():
            seen[torch.searchsorted(keys, old_keys)] = old_seen
        if bool(new.any()):
            seen[torch.searchsorted(keys, counts.keys[new].cpu())] = self.ticks
        self.last_seen = seen
        self._evict()

    def _evict(self) -> None:
        """Keep the ``max_states`` most recently seen keys (and their explored actions)."""
        limit = self.config.max_states
        if limit is None or len(self.table) <= limit:
            return
        keep = torch.topk(self.last_seen, limit, sorted=False).indices.sort().values
        index = keep.to(self.table.keys.device)
        self.table = KeyTable(self.table.keys[index], self.table.values[index])
        self.last_seen = self.last_seen[keep]
        kept = set(self.table.keys.tolist())
        self.explored = {key: actions for key, actions in self.explored.items() if key in kept}

    def counts(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N_total, N_succ)`` of ``keys`` (float64; 0 for unvisited states)."""
        found = self.table.lookup(torch.as_tensor(keys, dtype=torch.long))
        return found[:, _TOTAL], found[:, _SUCC]

    def score(self, keys: torch.Tensor) -> torch.Tensor:
        """``S(s)`` of ``keys`` with the current table and ``τ`` (float64)."""
        total, succ = self.counts(keys)
        tau = torch.tensor(float(self.tau), dtype=torch.float64, device=total.device)
        return _score(total, succ, tau, self.config)[0]

    def mark_explored(self, state_key: int, action_key: int) -> None:
        """Record that ``action_key`` was taken from ``state_key`` (ranked DFS)."""
        self.explored.setdefault(int(state_key), set()).add(int(action_key))

    def explored_actions(self, state_key: int) -> frozenset[int]:
        """Actions already explored from ``state_key``."""
        return frozenset(self.explored.get(int(state_key), ()))

    def state_dict(self) -> dict[str, Any]:
        """Checkpointable state (CPU tensors, ints, lists)."""
        return {
            "table": self.table.state_dict(),
            "num_rollouts": self.num_rollouts,
            "explored": {key: sorted(actions) for key, actions in self.explored.items()},
            "last_seen": self.last_seen.clone(),
            "ticks": self.ticks,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.table = KeyTable.from_state_dict(state["table"])
        self.num_rollouts = int(state["num_rollouts"])
        self.explored = {int(k): {int(a) for a in v} for k, v in state.get("explored", {}).items()}
        # Checkpoints from before the bound have no ticks: every key counts as seen at tick 0.
        self.last_seen = torch.as_tensor(
            state.get("last_seen", torch.zeros(len(self.table))), dtype=torch.long
        )
        self.ticks = int(state.get("ticks", 0))


def _score(
    total: torch.Tensor, succ: torch.Tensor, tau: torch.Tensor, config: SPO3EstimatorConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``S(s)`` from the counts, and the ``ξ``/``ζ`` filter's pass mask."""
    lam = config.alpha * torch.log(tau)
    decay = torch.exp(-lam * succ / (total + config.table_epsilon))
    ratio = torch.where(total > 0, succ / total.clamp_min(1.0), torch.zeros_like(total))
    keep = ((total - succ) < config.xi) | (ratio > config.zeta)
    return torch.where(keep, decay, torch.zeros_like(decay)), keep


def spo3_step_rewards(
    batch: StepBatch, config: SPO3EstimatorConfig, state: SPO3State | None = None
) -> tuple[torch.Tensor, dict[str, Any]]:
    """3SPO's step rewards ``R_t`` (float64 ``[rows]``), scored with ``state`` + the batch.

    The batch's finished rollouts are counted as if already recorded (the paper updates
    the table after each rollout), without changing ``state``. Also usable by a rollout
    collector to rank transitions (the ranked DFS).

    Returns:
        ``(R_t, parts)`` with ``parts`` holding ``score`` (``S(s_t)``), ``filtered``
        (rows whose state the ``ξ``/``ζ`` filter zeroes), ``counts`` and ``index``.
    """
    index = BatchIndex(batch)
    counts = _batch_counts(batch, index, config)
    table = counts.added
    if state is not None and len(state.table):
        table = table + state.table.lookup(counts.keys)
    recorded = counts.finished + (0 if state is None else state.num_rollouts)
    tau = (1 + recorded).to(torch.float64)
    total, succ = table[:, _TOTAL], table[:, _SUCC]
    # Per distinct key first (U of them), then gathered to the rows.
    score_of_key, keep_of_key = _score(total, succ, tau, config)
    omega = (0.5 * torch.exp(-config.omega_k * total)).index_select(0, counts.row)
    known = counts.keys.index_select(0, counts.next_row) != 0
    score = score_of_key.index_select(0, counts.row)
    # An unknown next observation contributes no progress: S(s_{t+1}) := S(s_t).
    progress = torch.where(known, score - score_of_key.index_select(0, counts.next_row), 0.0)
    changed = known & (counts.next_row != counts.row)
    success = batch.done & _successes(batch, config)
    rewards = omega * changed + (0.5 - omega) * progress + 0.5 * success
    parts = {
        "score": score,
        "filtered": ~keep_of_key.index_select(0, counts.row),
        "counts": counts,
        "index": index,
    }
    return rewards, parts


def spo3(
    batch: StepBatch, config: SPO3EstimatorConfig, state: SPO3State | None = None
) -> tuple[torch.Tensor, Diagnostics]:
    """3SPO advantages: step rewards normalized within anchor-state groups.

    Args:
        batch: the step rows.
        config: score constants and advantage options.
        state: the table of earlier iterations (``None``: an empty table). Not modified.

    Returns:
        ``(advantages float64 [rows], diagnostics)``.
    """
    rewards, parts = spo3_step_rewards(batch, config, state)
    index, counts = parts["index"], parts["counts"]
    if config.use_returns:
        rewards = discounted_returns(rewards, index.layout, config.gamma)
    if config.per_task:
        anchors, num_anchors = anchor_ids(batch, index)
    elif _keeps_state(batch, config):  # anchors stay the observations, not the states kept
        anchors, num_anchors = dense_ids((index.group, index.num_groups), batch.state_key)
    else:  # the state keys are dense already: anchor on (group, key) directly
        anchors, num_anchors = dense_ids((index.group, index.num_groups), (counts.row, len(counts.keys)))
    advantages = zscore(
        rewards, anchors, num_anchors, norm=config.norm, epsilon=config.epsilon, singleton="zero"
    )
    if config.add_episode:
        advantages = advantages + episode_term(batch, index, config)
    # n = 1 "rolls out without update (no peer)": a lone rollout's rows get no advantage.
    advantages = torch.where(index.lone_rows, 0.0, advantages)

    def diagnostics() -> dict[str, torch.Tensor]:
        return (
            base_diagnostics(index)
            | group_size_diagnostics("anchor", anchors, num_anchors)
            | {
                "spo3/step_reward_mean": safe_mean(rewards),
                "spo3/score_mean": safe_mean(parts["score"]),
                "spo3/filtered_frac": safe_mean(parts["filtered"]),
                "spo3/refused_frac": safe_mean(batch.refused)
                if batch.refused is not None
                else rewards.new_zeros(()),
            }
        )

    return advantages, diagnostics


def adaptive_group_sizes(
    task_initial_keys: Sequence[int] | torch.Tensor,
    state: SPO3State | None,
    config: SPO3EstimatorConfig | None = None,
) -> list[int]:
    """3SPO's adaptive group size ``n(s_0) = ⌈G_max · S(s_0)⌉`` of each task.

    ``n = 0`` means "skip the task" (no rollout), ``n = 1`` a rollout without a peer.
    ``S > 0`` gives ``n ≥ 1`` however small ``S`` is (even below float64's range:
    ``exp`` is never 0); ``n = 0`` only where the ``ξ``/``ζ`` filter zeroes ``S``.

    Args:
        task_initial_keys: the table key of each task's first observation (``k(o_0)``,
            or the depth-0 history key when ``per_task``).
        state: the current table (``None``: every task gets ``G_max``).
        config: supplies ``g_max`` and the score constants (default: ``state.config``).

    Returns:
        One group size per task.
    """
    config = config or (state.config if state is not None else SPO3EstimatorConfig())
    keys = torch.as_tensor(task_initial_keys, dtype=torch.long).reshape(-1)
    if state is None:
        return [config.g_max] * int(keys.numel())
    total, succ = state.counts(keys)
    tau = torch.tensor(float(state.tau), dtype=torch.float64)
    score, keep = _score(total, succ, tau, config)
    # Round before ceil so that 8 * 0.125 = 1.0000000001 does not become 2; the rounding (or an
    # underflow of exp) must not turn a kept state's tiny S > 0 into n = 0, hence the floor of 1.
    sizes = torch.ceil(torch.round(config.g_max * score, decimals=9)).to(torch.long)
    sizes = torch.where(keep, sizes.clamp(1, config.g_max), torch.zeros_like(sizes))
    return sizes.tolist()

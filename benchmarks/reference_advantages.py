"""Plain-Python reference estimators, written from ``ALGORITHMS.md`` with loops and dicts.

Readable rather than fast: the vectorized estimators in ``trainers`` must match these
on random batches (``tests/test_advantages.py``) and ``benchmarks/bench_advantages.py``
times them. Rows are dicts (see :func:`rows_of`); every function returns one float
per row, in row order. :func:`random_records` makes the seeded test batches. The documented "(ours)" choices of the vectorized code are
followed here too (see the module docstrings in ``trainers/estimators``).
"""

from __future__ import annotations

import math
import random
import struct
from collections import defaultdict

from trainers.step_batch import StepBatch

# ------------------------------------------------------------------ helpers


def rows_of(batch: StepBatch) -> list[dict]:
    """The batch as a list of plain dicts (Python ints, floats and bools)."""
    columns = {
        "group": batch.group_id.tolist(),
        "traj": batch.traj_id.tolist(),
        "step": batch.step.tolist(),
        "key": batch.state_key.tolist(),
        "next_key": batch.next_state_key.tolist(),
        "hist": batch.history_keys.tolist(),
        "f": batch.first_visit.tolist(),
        "next_f": batch.next_first_visit.tolist(),
        "r": batch.reward.tolist(),
        "R": batch.outcome.tolist(),
        "S": batch.score.tolist(),
        "p": batch.penalty.tolist() if batch.penalty is not None else [None] * batch.num_rows,
        "done": batch.done.tolist(),
        "sem": batch.semantic_key.tolist() if batch.semantic_key is not None else [None] * batch.num_rows,
        "anchor": batch.anchor_key.tolist() if batch.anchor_key is not None else [None] * batch.num_rows,
        "paths": batch.path_count.tolist() if batch.path_count is not None else [None] * batch.num_rows,
        "wins": batch.path_successes.tolist() if batch.path_count is not None else [None] * batch.num_rows,
        "refused": batch.refused.tolist() if batch.refused is not None else [None] * batch.num_rows,
    }
    return [{name: values[i] for name, values in columns.items()} for i in range(batch.num_rows)]


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and unbiased std (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def normalize(value: float, members: list[float], norm: str, eps: float, singleton: str) -> float:
    """``z(value | members)``; singleton ``"zero"`` gives 0, ``"identity"`` mean 0 / std 1."""
    if len(members) == 1:
        if singleton == "zero":
            return 0.0
        mean, std = 0.0, 1.0
    else:
        mean, std = mean_std(members)
    return (value - mean) / (std + eps) if norm == "std" else value - mean


def by_trajectory(rows: list[dict]) -> dict[int, list[int]]:
    """Row indices of each rollout, sorted by step."""
    out: dict[int, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        out[row["traj"]].append(i)
    for indices in out.values():
        indices.sort(key=lambda i: rows[i]["step"])
    return out


def next_rows(rows: list[dict]) -> list[int | None]:
    """The row of step ``t + 1`` of the same rollout, or ``None``."""
    out: list[int | None] = [None] * len(rows)
    for indices in by_trajectory(rows).values():
        for a, b in zip(indices, indices[1:], strict=False):
            out[a] = b
    return out


def discounted(rows: list[dict], values: list[float], gamma: float) -> list[float]:
    """``Σ_{j≥t} γ^{j-t} x_j`` per rollout, by a backward loop."""
    out = [0.0] * len(rows)
    for indices in by_trajectory(rows).values():
        running = 0.0
        for i in reversed(indices):
            running = values[i] + gamma * running
            out[i] = running
    return out


def normalize_in_groups(
    values: list[float], keys: list, norm: str, eps: float, singleton: str
) -> list[float]:
    """``z`` of every value within the rows sharing its key."""
    members: dict = defaultdict(list)
    for v, k in zip(values, keys, strict=False):
        members[k].append(v)
    return [normalize(v, members[k], norm, eps, singleton) for v, k in zip(values, keys, strict=False)]


def traj_outcomes(rows: list[dict], field: str = "R") -> dict[int, tuple[int, float]]:
    """``traj -> (group, R_i)`` (``field="S"``: the env score instead of the outcome)."""
    return {row["traj"]: (row["group"], row[field]) for row in rows}


def lone_groups(rows: list[dict]) -> set[int]:
    """Task groups that hold a single rollout."""
    trajs: dict = defaultdict(set)
    for row in rows:
        trajs[row["group"]].add(row["traj"])
    return {group for group, members in trajs.items() if len(members) == 1}


# ------------------------------------------------------------------ GRPO / GiGPO


def float32(x: float) -> float:
    """``x`` rounded to float32 (the precision ``StepBatch.reward`` is stored in)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def episode_signals(rows: list[dict], cfg) -> tuple[list[float], dict[int, float]]:
    """The episode signal of every row and of every rollout (unscaled)."""
    trajs = by_trajectory(rows)
    if cfg.episode_signal == "success":
        values = [row["R"] for row in rows]
    elif cfg.episode_signal == "return":
        totals = {traj: sum(rows[i]["r"] for i in indices) for traj, indices in trajs.items()}
        values = [totals[row["traj"]] for row in rows]
    else:  # verl_agent: the outcome minus the row's own penalty
        values = [row["R"] - row["p"] for row in rows]
    per_rollout = {traj: values[indices[0]] for traj, indices in trajs.items()}  # first step
    return values, per_rollout


def ref_episode(rows: list[dict], cfg) -> list[float]:
    """``A^E_i = z(x | group)`` of the episode signal ``x`` with verl-agent's statistics."""
    values, per_rollout = episode_signals(rows, cfg)
    members: dict = defaultdict(list)
    if cfg.episode_stats == "steps":
        for row, value in zip(rows, values, strict=True):
            members[row["group"]].append(value * cfg.reward_scale)
    else:
        groups = traj_outcomes(rows)
        for traj, value in per_rollout.items():
            members[groups[traj][0]].append(value * cfg.reward_scale)
    return [
        normalize(value * cfg.reward_scale, members[row["group"]], cfg.norm, cfg.epsilon, "identity")
        for row, value in zip(rows, values, strict=True)
    ]


def ref_grpo(rows: list[dict], cfg, state=None) -> list[float]:
    return ref_episode(rows, cfg)


def anchor_keys(rows: list[dict], use_anchor_key: bool = False) -> list[tuple]:
    return [(row["group"], row["anchor"] if use_anchor_key else row["key"]) for row in rows]


def ref_gigpo_step(rows: list[dict], cfg) -> list[float]:
    if cfg.step_penalty == "own_step":  # env rewards discounted, then the row's own penalty
        env = [float32(row["r"] + row["p"]) for row in rows]
        q = [value - row["p"] for value, row in zip(discounted(rows, env, cfg.gamma), rows, strict=True)]
    else:
        q = discounted(rows, [row["r"] for row in rows], cfg.gamma)
    return normalize_in_groups(q, anchor_keys(rows, cfg.enable_similarity), cfg.norm, cfg.epsilon, "zero")


def ref_gigpo(rows: list[dict], cfg, state=None) -> list[float]:
    episode = ref_episode(rows, cfg)
    step = ref_gigpo_step(rows, cfg)
    return [e + cfg.omega * s for e, s in zip(episode, step, strict=False)]


# ------------------------------------------------------------------ ProGPO-C


def ref_progpo_c(rows: list[dict], cfg, state=None) -> list[float]:
    base = ref_gigpo(rows, cfg) if cfg.base == "gigpo" else ref_episode(rows, cfg)
    trajs = by_trajectory(rows)
    coverage = {}
    for traj, indices in trajs.items():
        c = float(sum(1 for i in indices if rows[i]["f"]))
        coverage[traj] = c / len(indices) if cfg.coverage_per_step else c
    outcomes = traj_outcomes(rows)
    scores = traj_outcomes(rows, "S")
    failed: dict[int, bool] = {}
    for traj, (group, outcome) in outcomes.items():
        # All-failed: the env paid nothing (R_i = 0), or every score (in [0, 1]) is below the threshold.
        bad = outcome == 0 if cfg.failed_threshold is None else scores[traj][1] < cfg.failed_threshold
        failed[group] = failed.get(group, True) and bad
    members: dict = defaultdict(list)
    if cfg.coverage_stats == "rollouts":
        for traj, (group, _) in outcomes.items():
            members[group].append(coverage[traj])
    else:
        for row in rows:
            members[row["group"]].append(coverage[row["traj"]])
    z_cov = [
        normalize(coverage[row["traj"]], members[row["group"]], cfg.norm, cfg.epsilon, "zero") for row in rows
    ]
    extra = z_cov
    if cfg.level == "step":
        u = discounted(rows, [1.0 if row["next_f"] else 0.0 for row in rows], cfg.gamma)
        z_u = normalize_in_groups(u, anchor_keys(rows, cfg.enable_similarity), cfg.norm, cfg.epsilon, "zero")
        extra = [a + b for a, b in zip(z_cov, z_u, strict=False)]
    out = []
    for i, row in enumerate(rows):
        if failed[row["group"]]:
            bonus = cfg.coverage_lambda * extra[i]
            out.append(bonus if cfg.replace_base else base[i] + bonus)
        else:
            out.append(base[i])
    return out


# ------------------------------------------------------------------ ProGPO-R


def ref_fused_potentials(rows: list[dict], cfg, table: dict | None = None) -> tuple[list, list, list]:
    """``(Φ, V, semantic_used)`` per row; ``table``: ``key -> (n, S)`` of earlier iterations."""
    table = table or {}
    width = len(rows[0]["hist"])
    columns = list(range(width)) if cfg.depth_columns is None else [c % width for c in cfg.depth_columns]
    m = cfg.prior_strength
    group_outcomes: dict = defaultdict(list)
    for group, score in traj_outcomes(rows, "S").values():  # potentials read the env scores
        group_outcomes[group].append(score)
    prior = {g: sum(v) / len(v) for g, v in group_outcomes.items()}

    def pooled(get_key) -> list[tuple[float, float]]:
        counts: dict = defaultdict(lambda: [0.0, 0.0])
        for row in rows:
            counts[get_key(row)][0] += 1.0
            counts[get_key(row)][1] += row["S"]
        out = []
        for row in rows:
            n, s = counts[get_key(row)]
            tn, ts = table.get(get_key(row), (0.0, 0.0))
            out.append((n + tn, s + ts))
        return out

    estimators = [(pooled(lambda row, c=c: row["hist"][c]), [True] * len(rows)) for c in columns]
    n_prefix = [n for n, _ in pooled(lambda row: row["hist"][width - 1])]
    use_sem = cfg.use_semantic and rows[0]["sem"] is not None
    semantic_used = [use_sem and n < cfg.min_prefix_visits for n in n_prefix]
    if use_sem:
        estimators.append((pooled(lambda row: row["sem"]), semantic_used))
    phis, variances = [], []
    for i, row in enumerate(rows):
        p0 = prior[row["group"]]
        precision = weighted = 0.0
        for counts, active in estimators:
            if not active[i]:
                continue
            n, s = counts[i]
            phi_d = (s + m * p0) / (n + m)
            var_d = max(phi_d * (1 - phi_d), cfg.variance_floor) / (n + m + 1)
            precision += 1 / var_d
            weighted += phi_d / var_d
        phis.append(weighted / precision)
        variances.append(1 / precision)
    return phis, variances, semantic_used


def ref_progpo_r(rows: list[dict], cfg, table: dict | None = None) -> list[float]:
    episode = ref_episode(rows, cfg)
    q = discounted(rows, [row["r"] for row in rows], cfg.gamma)
    prefix_keys = [row["hist"][-1] for row in rows]
    prefix_term = normalize_in_groups(q, prefix_keys, cfg.norm, cfg.epsilon, "zero")
    prefix_size: dict = defaultdict(int)
    for k in prefix_keys:
        prefix_size[k] += 1
    phi, variance, _ = ref_fused_potentials(rows, cfg, table)
    nxt = next_rows(rows)
    credit = []
    for i, row in enumerate(rows):
        r = row["r"] + (row["R"] if row["done"] and not cfg.outcome_in_reward else 0.0)
        phi_next = phi[nxt[i]] if nxt[i] is not None and not row["done"] else 0.0
        credit.append(r + cfg.gamma * phi_next - phi[i])
    z_credit = normalize_in_groups(credit, [row["group"] for row in rows], cfg.norm, cfg.epsilon, "zero")
    out = []
    for i in range(len(rows)):
        n_eff = max(phi[i] * (1 - phi[i]), cfg.variance_floor) / variance[i]
        rho = n_eff / (n_eff + cfg.reliability_kappa)
        potential = cfg.omega_potential * rho * z_credit[i]
        prefix = cfg.omega_prefix * prefix_term[i]
        if cfg.always_both:
            step = prefix + potential
        else:
            step = potential if prefix_size[prefix_keys[i]] == 1 else prefix
        out.append(episode[i] + step)
    return out


def ref_progpo_r_update(rows: list[dict], cfg, table: dict) -> dict:
    """The moving-average table after one batch: ``decay · table + batch``."""
    new = {k: (n * cfg.ema_decay, s * cfg.ema_decay) for k, (n, s) in table.items()}
    width = len(rows[0]["hist"])
    columns = list(range(width)) if cfg.depth_columns is None else [c % width for c in cfg.depth_columns]
    keys_of_row = [[row["hist"][c] for c in columns] for row in rows]
    if cfg.use_semantic and rows[0]["sem"] is not None:
        keys_of_row = [keys + [row["sem"]] for keys, row in zip(keys_of_row, rows, strict=False)]
    for row, keys in zip(rows, keys_of_row, strict=False):
        for k in keys:
            n, s = new.get(k, (0.0, 0.0))
            new[k] = (n + 1.0, s + row["S"])
    return {k: v for k, v in new.items() if v[0] >= 1e-3}


# ------------------------------------------------------------------ 3SPO


def spo3_keys(rows: list[dict], cfg) -> tuple[list[int], list[int], list[bool]]:
    """Table keys of ``s_t`` and ``s_{t+1}``, and whether ``o_t`` is a state (not a refusal)."""
    if not cfg.per_task:
        keys, next_keys = [row["key"] for row in rows], [row["next_key"] for row in rows]
    else:
        col = cfg.task_state_column
        nxt = next_rows(rows)
        keys = [row["hist"][col] for row in rows]
        next_keys = [keys[j] if j is not None else 0 for j in nxt]
    real = [True] * len(rows)
    if not rows or rows[0]["refused"] is None or not cfg.refusal_keeps_state:
        return keys, next_keys, real
    # Walk each rollout in step order: after a refused action the state is still the one before.
    keys, next_keys = list(keys), list(next_keys)
    for indices in by_trajectory(rows).values():
        state, refused_before = None, False
        for i in indices:
            if refused_before:
                keys[i], real[i] = state, False
            state, refused_before = keys[i], rows[i]["refused"]
            if rows[i]["refused"]:
                next_keys[i] = keys[i]
    return keys, next_keys, real


def ref_spo3_update(rows: list[dict], cfg, table: dict, num_rollouts: int) -> tuple[dict, int]:
    """Record every finished rollout: ``N_total`` / ``N_succ`` of each distinct visited state.

    Success is the env score (never scaled) reaching ``success_threshold``. Rows with path
    counts (branching DFS) instead add, at each first visit and at a new terminal state,
    their finished paths and those paths' successes; every path ends in one done row.
    """
    table = dict(table)
    keys, next_keys, real = spo3_keys(rows, cfg)
    if rows and rows[0]["paths"] is not None:
        for i, row in enumerate(rows):
            num_rollouts += int(row["done"])
            visited = [keys[i]] if row["f"] and real[i] and keys[i] != 0 else []
            if (
                row["done"]
                and row["next_f"]
                and next_keys[i] != 0
                and not (row["refused"] and cfg.refusal_keeps_state)
            ):
                visited.append(next_keys[i])
            for s in visited:
                total, succ = table.get(s, (0, 0))
                table[s] = (total + row["paths"], succ + row["wins"])
        return table, num_rollouts
    for indices in by_trajectory(rows).values():
        if not any(rows[i]["done"] for i in indices):
            continue
        num_rollouts += 1
        success = rows[indices[0]]["S"] >= cfg.success_threshold
        visited = {keys[i] for i in indices} | {next_keys[i] for i in indices if next_keys[i] != 0}
        for s in visited:
            total, succ = table.get(s, (0, 0))
            table[s] = (total + 1, succ + (1 if success else 0))
    return table, num_rollouts


def ref_spo3_kept(key: int, cfg, table: dict) -> bool:
    """The ``ξ``/``ζ`` filter: ``N_fail < ξ`` or ``N_succ / N_total > ζ``."""
    total, succ = table.get(key, (0, 0))
    ratio = succ / total if total > 0 else 0.0
    return (total - succ) < cfg.xi or ratio > cfg.zeta


def ref_spo3_score(key: int, cfg, table: dict, tau: int) -> float:
    total, succ = table.get(key, (0, 0))
    lam = cfg.alpha * math.log(tau)
    decay = math.exp(-lam * succ / (total + cfg.table_epsilon))
    return decay if ref_spo3_kept(key, cfg, table) else 0.0


def ref_spo3_rewards(rows: list[dict], cfg, table: dict, num_rollouts: int) -> list[float]:
    table, num_rollouts = ref_spo3_update(rows, cfg, table, num_rollouts)
    tau = 1 + num_rollouts
    keys, next_keys, _ = spo3_keys(rows, cfg)
    out = []
    for row, key, next_key in zip(rows, keys, next_keys, strict=False):
        omega = 0.5 * math.exp(-cfg.omega_k * table.get(key, (0, 0))[0])
        if next_key != 0:
            changed = 1.0 if next_key != key else 0.0
            progress = ref_spo3_score(key, cfg, table, tau) - ref_spo3_score(next_key, cfg, table, tau)
        else:
            changed = progress = 0.0
        success = 1.0 if row["done"] and row["S"] >= cfg.success_threshold else 0.0
        out.append(omega * changed + (0.5 - omega) * progress + 0.5 * success)
    return out


def ref_spo3(rows: list[dict], cfg, table: dict | None = None, num_rollouts: int = 0) -> list[float]:
    rewards = ref_spo3_rewards(rows, cfg, table or {}, num_rollouts)
    if cfg.use_returns:
        rewards = discounted(rows, rewards, cfg.gamma)
    out = normalize_in_groups(rewards, anchor_keys(rows), cfg.norm, cfg.epsilon, "zero")
    if cfg.add_episode:
        out = [a + e for a, e in zip(out, ref_episode(rows, cfg), strict=False)]
    lone = lone_groups(rows)  # n = 1: a rollout without a peer gets no update
    return [0.0 if row["group"] in lone else a for row, a in zip(rows, out, strict=True)]


def ref_adaptive_sizes(keys: list[int], cfg, table: dict, num_rollouts: int) -> list[int]:
    """``⌈G_max S⌉`` rounded to 9 decimals, at least 1 where the filter keeps ``s`` (``S > 0``)."""
    sizes = []
    for k in keys:
        n = min(cfg.g_max, math.ceil(round(cfg.g_max * ref_spo3_score(k, cfg, table, 1 + num_rollouts), 9)))
        sizes.append(max(n, 1) if ref_spo3_kept(k, cfg, table) else 0)
    return sizes


REFERENCES = {
    "grpo": ref_grpo,
    "gigpo": ref_gigpo,
    "progpo_c": ref_progpo_c,
    "progpo_r": ref_progpo_r,
    "3spo": ref_spo3,
}


# ------------------------------------------------------------------ seeded random records


class Interner:
    """Small non-zero int keys for hashable tuples, stable across batches of one test."""

    def __init__(self) -> None:
        self.ids: dict = {}

    def __call__(self, obj) -> int:
        return self.ids.setdefault(obj, len(self.ids) + 1)


def random_records(
    rng: random.Random,
    intern: Interner | None = None,
    *,
    num_groups: int = 5,
    max_group: int = 5,
    max_len: int = 6,
    num_states: int = 4,
    num_actions: int = 2,
    depths: tuple[int, ...] = (0, 1, 2),
    task_offset: int = 0,
    terminal_keys: bool = False,
    semantic: bool = False,
    anchor: bool = False,
    unfinished: float = 0.0,
    scale: float | None = None,
    paths: bool = False,
    penalties: bool = False,
    refusals: float = 0.0,
) -> list[dict]:
    """Per-step records as the rollout collector would give them, shuffled.

    Groups are all-failed, binary or scored at random; rollouts start at the same
    state, revisit a few states, take few distinct actions (so exact prefixes are
    sometimes shared) and get an invalid-action penalty now and then. ``scale``: the
    trainer's reward scale (rewards and outcomes scaled, ``score`` records the unscaled
    outcome). ``paths``: random ``path_count`` / ``path_successes`` as a branching
    search's rows carry them (1 path on a done row). ``penalties``: records carry ``penalty``
    (the amount taken off their reward). ``refusals``: the chance that the env refuses a step's
    action; its next observation is then the one refusal observation, and records carry ``refused``.
    """
    intern = intern or Interner()
    records = []
    traj = 0
    for g in range(num_groups):
        task = g + task_offset
        size = rng.randint(1, max_group)
        kind = rng.choice(["failed", "binary", "scored"])
        # Some groups are a single one-step rollout: the singleton rules must hold.
        single = rng.random() < 0.15
        size = 1 if single else size
        for _ in range(size):
            length = 1 if single else rng.randint(1, max_len)
            if kind == "failed":
                outcome = 0.0
            elif kind == "binary":
                outcome = float(rng.random() < 0.5)
            else:
                outcome = rng.choice([0.0, 0.25, 0.5, 1.0])
            states = [0] + [rng.randrange(num_states) for _ in range(length)]
            actions = [rng.randrange(num_actions) for _ in range(length)]
            # A refused action is answered by the one refusal observation (state id num_states).
            refused = [rng.random() < refusals for _ in range(length)] if refusals else [False] * length
            states = [states[0]] + [num_states if r else s for s, r in zip(states[1:], refused, strict=True)]
            alive = rng.random() < unfinished
            seen: set[int] = set()
            for t in range(length):
                s = states[t]
                first = s not in seen
                seen.add(s)
                hist = [
                    intern(
                        (
                            "h",
                            task,
                            d,
                            tuple(states[max(0, t - d) : t + 1]),
                            tuple(actions[max(0, t - d) : t]),
                        )
                    )
                    for d in depths
                ]
                hist.append(intern(("p", task, tuple(states[: t + 1]), tuple(actions[:t]))))
                last = t == length - 1
                penalty = 0.1 if rng.random() < 0.2 else 0.0
                reward = -0.1 if penalty else 0.0
                if last and not alive:
                    reward += outcome
                record = dict(
                    group_id=g,
                    traj_id=traj,
                    step=t,
                    state_key=intern(("s", s)),
                    history_keys=hist,
                    first_visit=first,
                    reward=reward,
                    outcome=outcome,
                    done=last and not alive,
                )
                if scale is not None:
                    record.update(reward=reward * scale, outcome=outcome * scale, score=outcome)
                    penalty *= scale
                if penalties:
                    record["penalty"] = penalty
                if refusals:
                    record["refused"] = refused[t]
                if paths:
                    count = 1 if record["done"] else rng.randint(0, 3)
                    wins = int(outcome >= 1.0) if record["done"] else rng.randint(0, count)
                    record.update(path_count=count, path_successes=wins)
                if last and terminal_keys and rng.random() < 0.5:
                    record["next_state_key"] = intern(("s", states[t + 1]))
                    record["next_first_visit"] = states[t + 1] not in seen
                if semantic:
                    record["semantic_key"] = intern(("sem", task, s // 2))
                if anchor:
                    record["anchor_key"] = intern(("anc", s // 2))
                records.append(record)
            traj += 1
    rng.shuffle(records)
    return records


def random_batch(seed: int, intern: Interner | None = None, **kwargs) -> StepBatch:
    """:func:`random_records` as a :class:`StepBatch`."""
    return StepBatch.from_records(random_records(random.Random(seed), intern, **kwargs))

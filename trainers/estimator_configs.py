"""One configuration dataclass per advantage estimator (``ALGORITHMS.md`` names and defaults).

Every field carries ``metadata={"help": ...}`` (TRL style, so a CLI parser can expose
it) and ``__post_init__`` rejects bad values with a message naming the fix. Fields
marked "(ours)" in the help are choices ``ALGORITHMS.md`` leaves open.

>>> GiGPOEstimatorConfig().omega, SPO3EstimatorConfig().norm
(1.0, 'mean')
>>> GRPOEstimatorConfig(norm="zscore")
Traceback (most recent call last):
...
ValueError: norm='zscore' is not one of ('std', 'mean'): use norm="std" (verl-agent's mean_std_norm) or norm="mean" (mean_norm)
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "EPISODE_SIGNALS",
    "STEP_PENALTIES",
    "EstimatorConfig",
    "GRPOEstimatorConfig",
    "GiGPOEstimatorConfig",
    "ProGPOCEstimatorConfig",
    "ProGPOREstimatorConfig",
    "SPO3EstimatorConfig",
]


#: Values of ``EstimatorConfig.episode_signal``.
EPISODE_SIGNALS = ("success", "return", "verl_agent")
#: Values of ``GiGPOEstimatorConfig.step_penalty``.
STEP_PENALTIES = ("discounted", "own_step")


def _choice(name: str, value: object, choices: tuple, hint: str) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {choices}: {hint}")


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={value!r} must be {bound}; pass a value {bound}")


@dataclass
class EstimatorConfig:
    """Options shared by every estimator: the episode term ``A^E_i = z(R_i | group)``.

    > Parameters that control the episode (GRPO) term

    Args:
        norm (`str`, defaults to `"std"`): `"std"` divides by `std + ε` (verl-agent's
            `mean_std_norm`); `"mean"` only subtracts the mean (`mean_norm`).
        episode_stats (`str`, defaults to `"steps"`): statistics of a group over its step
            rows (verl-agent) or over its rollouts (`"rollouts"`).
        epsilon (`float`, defaults to `1e-6`): `ε` of `z(x | S)`.
        reward_scale (`float`, defaults to `1.0`): multiplies the episode signal in the
            episode term (verl-agent trains on 10 × won; it matters with `norm="mean"`).
        episode_signal (`str`, defaults to `"success"`): the value `x` normalized by the
            episode term. `"success"`: `R_i`, the rollout's outcome (what the env paid, no
            penalty). `"return"`: the rollout's undiscounted penalized return `Σ_t r_t`
            (shaping such as the invalid-action penalty included; every row of a rollout
            carries it). `"verl_agent"`: `R_i - p_t`, the outcome minus the *row's own*
            invalid-action penalty (`StepBatch.penalty`), which is what verl-agent's GRPO and
            GiGPO normalize (`token_level_rewards.sum(-1)`: the episode reward, minus the
            penalty `apply_invalid_action_penalty` puts on that step's last token).
    """

    # Parameters that control the episode (GRPO) term
    norm: str = field(
        default="std",
        metadata={
            "help": "'std': divide by std + epsilon (mean_std_norm); 'mean': subtract the mean only (mean_norm)."
        },
    )
    episode_stats: str = field(
        default="steps",
        metadata={
            "help": "'steps': group mean/std over the group's step rows (verl-agent; long rollouts weigh more); "
            "'rollouts': over rollouts, one value each."
        },
    )
    epsilon: float = field(default=1e-6, metadata={"help": "epsilon added to the std in z(x | S)."})
    reward_scale: float = field(
        default=1.0,
        metadata={"help": "Scale of the episode signal in the episode term (verl-agent uses 10 x won)."},
    )
    episode_signal: str = field(
        default="success",
        metadata={
            "help": "Value the episode term normalizes: 'success': the outcome R_i (no penalty); 'return': the "
            "rollout's undiscounted return sum_t r_t, penalties included; 'verl_agent': R_i minus the row's own "
            "invalid-action penalty (StepBatch.penalty), as verl-agent's GRPO/GiGPO."
        },
    )

    def __post_init__(self) -> None:
        _choice(
            "norm",
            self.norm,
            ("std", "mean"),
            'use norm="std" (verl-agent\'s mean_std_norm) or norm="mean" (mean_norm)',
        )
        _choice(
            "episode_stats",
            self.episode_stats,
            ("steps", "rollouts"),
            'use "steps" (verl-agent) or "rollouts"',
        )
        _choice(
            "episode_signal",
            self.episode_signal,
            EPISODE_SIGNALS,
            'use "success" (the outcome R_i), "return" (sum of the rollout\'s penalized rewards) or '
            "\"verl_agent\" (R_i minus the row's own penalty, verl-agent's GRPO/GiGPO)",
        )
        _positive("epsilon", self.epsilon)
        _positive("reward_scale", self.reward_scale)


@dataclass
class _DiscountedConfig(EstimatorConfig):
    gamma: float = field(default=0.95, metadata={"help": "Discount gamma of step returns Q_t."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma={self.gamma!r} must lie in [0, 1]; ALGORITHMS.md uses 0.95")


@dataclass
class GRPOEstimatorConfig(EstimatorConfig):
    """GRPO: `A_t = z(R_i | group)` for every step of rollout `i` (see :class:`EstimatorConfig`).

    Episode signal: `"success"` by default, the outcome `R_i` as `ALGORITHMS.md` and the GRPO
    papers define the reward, so GRPO sees no invalid-action penalty. `"verl_agent"`
    reproduces verl-agent's GRPO, whose per-row score also subtracts the row's own penalty.
    """


@dataclass
class GiGPOEstimatorConfig(_DiscountedConfig):
    """GiGPO: `A_t = A^E_i + ω · z(Q_t | anchor group)`; anchors are equal state keys of one task group.

    Episode signal: `"success"` by default (`A^E_i = z(R_i | group)`, the paper's Eq. 3 on the
    outcome): the invalid-action penalty already reaches GiGPO through `Q_t`, and counting it in
    the episode term too makes `mean_std_norm` blow a 0.1 penalty up to an order-1 advantage in
    groups whose outcomes tie. `episode_signal="verl_agent"` with `step_penalty="own_step"`
    reproduces verl-agent's code exactly (see :mod:`trainers.estimators.grpo`).

    > Parameters that control the step (anchor) term

    Args:
        gamma (`float`, defaults to `0.95`): discount of `Q_t`.
        omega (`float`, defaults to `1.0`): weight `ω` of the step term.
        enable_similarity (`bool`, defaults to `False`): anchor on `StepBatch.anchor_key`
            (observations merged by text similarity, see
            :func:`trainers.semantic.similarity_anchor_keys`) instead of `state_key`.
        similarity_threshold (`float`, defaults to `0.95`): the similarity ratio at which the
            rollout collector merges two observations into one anchor (verl-agent's
            `similarity_thresh`); read by the trainer, which has the collector compute
            `anchor_key` when `enable_similarity` is on.
        step_penalty (`str`, defaults to `"discounted"`): how the penalty `p_t` enters `Q_t`.
            `"discounted"`: `Q_t = Σ_{j≥t} γ^{j-t} r_j` over the penalized rewards
            (`ALGORITHMS.md`: later penalties are discounted into earlier steps). `"own_step"`:
            `Q_t = Σ_{j≥t} γ^{j-t} (r_j + p_j) - p_t`, the env's rewards discounted, then the row's
            own penalty taken off (verl-agent: `apply_invalid_action_penalty` subtracts it from
            `step_rewards` after `compute_step_discounted_returns`); needs `StepBatch.penalty`.
    """

    # Parameters that control the step (anchor) term
    omega: float = field(default=1.0, metadata={"help": "Weight omega of the anchor-state step term."})
    enable_similarity: bool = field(
        default=False,
        metadata={
            "help": "Anchor on StepBatch.anchor_key (similarity-merged observations, verl-agent's "
            "enable_similarity) instead of state_key; records must carry 'anchor_key'."
        },
    )
    similarity_threshold: float = field(
        default=0.95,
        metadata={
            "help": "Text similarity ratio at which the rollout collector merges observations into one "
            "anchor (verl-agent's similarity_thresh; used with enable_similarity)."
        },
    )
    step_penalty: str = field(
        default="discounted",
        metadata={
            "help": "How the invalid-action penalty p_t enters Q_t: 'discounted': Q_t discounts the penalized "
            "rewards r_t; 'own_step': the env's rewards r_t + p_t discounted, minus the row's own p_t "
            "(verl-agent; needs StepBatch.penalty)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _choice(
            "step_penalty",
            self.step_penalty,
            STEP_PENALTIES,
            'use "discounted" (Q_t over the penalized rewards) or "own_step" (verl-agent)',
        )
        if not 0.0 < self.similarity_threshold <= 1.0:
            raise ValueError(
                f"similarity_threshold={self.similarity_threshold!r} must lie in (0, 1]; verl-agent uses 0.95"
            )


@dataclass
class ProGPOCEstimatorConfig(GiGPOEstimatorConfig):
    """ProGPO-C: first-visit coverage ranks rollouts of all-failed groups.

    Episode signal: `"success"` by default: the coverage term is meant for groups whose
    episode term is exactly 0 (every `R_i = 0`); a penalized signal (`"return"`,
    `"verl_agent"`) would give those groups episode advantages made of format penalties,
    of order 1 under `norm="std"`, swamping the `λ = 0.1` coverage ranking. The all-failed
    rule reads `R_i` (or the score) whatever the signal.

    > Parameters that control the coverage term

    Args:
        base (`str`, defaults to `"grpo"`): base estimator, `"grpo"` or `"gigpo"`.
        coverage_lambda (`float`, defaults to `0.1`): `λ`.
        level (`str`, defaults to `"trajectory"`): `"trajectory"`: `λ z(C_i | group)`;
            `"step"`: `λ (z(C_i | group) + z(U_t | anchor group))` (ours).
        coverage_per_step (`bool`, defaults to `False`): use `C_i / T_i` (ours).
        failed_threshold (`float` or `None`, defaults to `None`): `None`: a group is
            all-failed when every `R_i == 0` (the env paid nothing, at any reward scale); a
            number: when every env score (`StepBatch.score`, in [0, 1], never scaled) is
            below it (WebShop scores; ours).
        coverage_stats (`str`, defaults to `"rollouts"`): `z(C_i | group)` over rollouts
            (ours) or over step rows.
        replace_base (`bool`, defaults to `False`): in all-failed groups replace the base
            advantage by the coverage term instead of adding it (identical for GRPO,
            whose advantages are 0 there; ours).
    """

    # Parameters that control the coverage term
    base: str = field(default="grpo", metadata={"help": "Base estimator: 'grpo' or 'gigpo'."})
    coverage_lambda: float = field(default=0.1, metadata={"help": "lambda, weight of the coverage term."})
    level: str = field(
        default="trajectory",
        metadata={
            "help": "'trajectory': lambda z(C_i|group); 'step': lambda (z(C_i|group) + z(U_t|anchor group)) (ours)."
        },
    )
    coverage_per_step: bool = field(default=False, metadata={"help": "Use C_i / T_i instead of C_i (ours)."})
    failed_threshold: float | None = field(
        default=None,
        metadata={
            "help": "None: a group is all-failed when every R_i == 0 (the env paid nothing); a number t: "
            "when every env score in [0, 1] (unscaled) is < t (e.g. 1.0 for WebShop scores) (ours)."
        },
    )
    coverage_stats: str = field(
        default="rollouts",
        metadata={
            "help": "z(C_i | group) over 'rollouts' (one value each, ours) or over step rows ('steps')."
        },
    )
    replace_base: bool = field(
        default=False,
        metadata={
            "help": "In all-failed groups replace the base advantage instead of adding the coverage term."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _choice("base", self.base, ("grpo", "gigpo"), 'use base="grpo" or base="gigpo"')
        _choice("level", self.level, ("trajectory", "step"), 'use level="trajectory" or level="step"')
        _choice("coverage_stats", self.coverage_stats, ("rollouts", "steps"), 'use "rollouts" or "steps"')
        _positive("coverage_lambda", self.coverage_lambda, allow_zero=True)


@dataclass
class ProGPOREstimatorConfig(_DiscountedConfig):
    """ProGPO-R: exact-prefix groups, and fused rollout potentials for singleton prefixes.

    `A_t = A^E_i + ω_P 1{|P_t| ≥ 2} z(Q_t | P_t) + ω_Φ 1{|P_t| = 1} ρ_t z(c_t | task)` with
    `c_t = r_t + γ Φ(s_{t+1}) - Φ(s_t)` and `ρ_t = n_eff / (n_eff + κ)`.

    Episode signal: `"success"` by default: `A^E_i` compares outcomes, like the potentials
    (built from env scores); the invalid-action penalty already enters through `r_t` in `Q_t`
    and `c_t`, so a penalized episode signal would count it twice.

    > Parameters that control the potentials

    Args:
        depth_columns (`tuple[int, ...]` or `None`, defaults to `None`): columns of
            `history_keys` pooled as depths `d` (`None`: all, the last being `∞`).
        prior_strength (`float`, defaults to `2.0`): `m`, strength of the group-mean prior.
        min_prefix_visits (`int`, defaults to `2`): `n_min`; below it the semantic key
            (`StepBatch.semantic_key`, when present) joins the fusion.
        use_semantic (`bool`, defaults to `True`): use `semantic_key` when the batch has it.
        variance_floor (`float`, defaults to `1e-6`): floor of `Φ_d (1 - Φ_d)` so that a
            depth with `Φ_d ∈ {0, 1}` (prior `p_0 ∈ {0, 1}`) keeps a finite weight (ours).
        reliability_kappa (`float`, defaults to `4.0`): `κ`.
        ema_decay (`float`, defaults to `0.9`): decay of the optional cross-iteration table
            kept by :class:`trainers.estimators.progpo_r.ProGPORState`.
        outcome_in_reward (`bool`, defaults to `True`): the env reward of the last step
            already carries the outcome (ALFWorld, WebShop); `False` adds `R_i` to it in `c_t`.

    > Parameters that control the combination

    Args:
        omega_prefix (`float`, defaults to `1.0`): `ω_P`.
        omega_potential (`float`, defaults to `1.0`): `ω_Φ`.
        always_both (`bool`, defaults to `False`): add both terms on every row (ours option).
    """

    # Parameters that control the potentials
    depth_columns: tuple[int, ...] | None = field(
        default=None,
        metadata={
            "help": "Columns of history_keys pooled as depths (None: all; the last column is d = inf)."
        },
    )
    prior_strength: float = field(default=2.0, metadata={"help": "m, strength of the group-mean prior p_0."})
    min_prefix_visits: int = field(
        default=2,
        metadata={"help": "n_min: below it the semantic key joins the fusion (semantic expansion)."},
    )
    use_semantic: bool = field(
        default=True, metadata={"help": "Use StepBatch.semantic_key for semantic expansion when present."}
    )
    variance_floor: float = field(
        default=1e-6, metadata={"help": "Floor of Phi_d (1 - Phi_d) in Var_d, for Phi_d in {0, 1} (ours)."}
    )
    reliability_kappa: float = field(
        default=4.0, metadata={"help": "kappa of rho = n_eff / (n_eff + kappa)."}
    )
    ema_decay: float = field(
        default=0.9, metadata={"help": "Decay of the cross-iteration potential table (ProGPORState)."}
    )
    outcome_in_reward: bool = field(
        default=True,
        metadata={
            "help": "The last step's env reward already holds the outcome; False adds R_i to r_t in c_t."
        },
    )
    # Parameters that control the combination
    omega_prefix: float = field(default=1.0, metadata={"help": "omega_P, weight of the exact-prefix term."})
    omega_potential: float = field(default=1.0, metadata={"help": "omega_Phi, weight of the potential term."})
    always_both: bool = field(
        default=False, metadata={"help": "Add both terms on every row instead of switching on |P_t| (ours)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.depth_columns is not None:
            self.depth_columns = tuple(int(c) for c in self.depth_columns)
            if not self.depth_columns:
                raise ValueError(
                    "depth_columns=() selects no depth; pass None (all columns) or column indices"
                )
        _positive("prior_strength", self.prior_strength, allow_zero=True)
        if self.min_prefix_visits < 1:
            raise ValueError(f"min_prefix_visits={self.min_prefix_visits} must be >= 1 (default 2)")
        _positive("variance_floor", self.variance_floor)
        _positive("reliability_kappa", self.reliability_kappa, allow_zero=True)
        if not 0.0 <= self.ema_decay <= 1.0:
            raise ValueError(f"ema_decay={self.ema_decay!r} must lie in [0, 1] (default 0.9)")


@dataclass
class SPO3EstimatorConfig(_DiscountedConfig):
    """3SPO: state-score step rewards normalized in anchor-state groups.

    `R_t = ω(N) 1[k(o_t) ≠ k(o_{t+1})] + (0.5 - ω(N)) (S(s_t) - S(s_{t+1})) + 0.5 r^succ_t`.

    Episode signal: no episode term by default (`add_episode=False`, the public code's
    step-only advantage); with `add_episode=True` it is `"success"`, the outcome, matching the
    success term `0.5 r^succ` that is 3SPO's only outcome reward (its `R_t` ignore env
    penalties by design).

    > Parameters that control the state score

    Args:
        alpha (`float`, defaults to `50.0`): `α` of `λ(τ) = α log τ`.
        xi (`float`, defaults to `10.0`): `ξ`, failure count of the filter.
        zeta (`float`, defaults to `0.1`): `ζ`, success ratio of the filter.
        table_epsilon (`float`, defaults to `1e-6`): `ε` of `N_succ / (N_total + ε)`.
        omega_k (`float`, defaults to `0.1`): `ω_k` of `ω(N) = 0.5 exp(-ω_k N_total(s_t))`.
        success_threshold (`float`, defaults to `1.0`): a rollout succeeded when its env score
            (`StepBatch.score`, in [0, 1], never scaled) is `≥` this (score 1: won).
        per_task (`bool`, defaults to `False`): key the table by state within the task
            (column `task_state_column` of `history_keys`, the depth-0 key) instead of `k(o)`.
        task_state_column (`int`, defaults to `0`): the depth-0 column of `history_keys`.
        g_max (`int`, defaults to `8`): `G_max` of the adaptive group size.
        max_states (`int` or `None`, defaults to `None`): bound of the state table; beyond it
            the least-recently-seen keys are evicted (`None`: unbounded).
        refusal_keeps_state (`bool`, defaults to `True`): where the env refused an action
            (`StepBatch.refused`), the state stays the one before it (ours): the refusal's text
            (ALFWorld's "Nothing happens.", one key for every refusal of every task) is neither
            a transition target nor a table state. `False` keys it as any observation, which
            pays a refusal from any state with `S > 0` the change bonus and the score drop to
            its `S ≈ 0`, and charges the step out of it (measured: the tiny ALFWorld clone's
            inadmissible actions rose from 25% to 70% in 16 steps, held-out success 5.7% → 0%).

    > Parameters that control the advantage

    Args:
        norm (`str`, defaults to `"mean"`): the public code's mean-only step normalization.
        use_returns (`bool`, defaults to `False`): normalize discounted returns of `R_t` (ours).
        add_episode (`bool`, defaults to `False`): add the episode term `A^E_i` (ours).
    """

    norm: str = field(
        default="mean",
        metadata={"help": "'mean' (public 3SPO code, GiGPO's mean_norm) or 'std' (divide by std + epsilon)."},
    )
    # Parameters that control the state score
    alpha: float = field(default=50.0, metadata={"help": "alpha of lambda(tau) = alpha log tau."})
    xi: float = field(default=10.0, metadata={"help": "xi: the filter keeps s when N_fail < xi ..."})
    zeta: float = field(default=0.1, metadata={"help": "zeta: ... or when N_succ / N_total > zeta."})
    table_epsilon: float = field(default=1e-6, metadata={"help": "epsilon of N_succ / (N_total + epsilon)."})
    omega_k: float = field(
        default=0.1, metadata={"help": "omega_k of omega(N) = 0.5 exp(-omega_k N_total(s_t))."}
    )
    success_threshold: float = field(
        default=1.0,
        metadata={"help": "A rollout succeeded when its env score in [0, 1] (unscaled) is >= this (1: won)."},
    )
    per_task: bool = field(
        default=False,
        metadata={"help": "Key the state table per task (history_keys[:, task_state_column], depth 0)."},
    )
    task_state_column: int = field(
        default=0, metadata={"help": "Column of history_keys holding the depth-0 (task, o_t) key."}
    )
    g_max: int = field(default=8, metadata={"help": "G_max of the adaptive group size n = ceil(G_max S(s))."})
    max_states: int | None = field(
        default=None,
        metadata={
            "help": "Bound of the state table: evict least-recently-seen keys beyond it (None: unbounded)."
        },
    )
    refusal_keeps_state: bool = field(
        default=True,
        metadata={"help": "Across an action the env refused, the state stays the one before it (ours)."},
    )
    # Parameters that control the advantage
    use_returns: bool = field(
        default=False, metadata={"help": "Normalize discounted returns of R_t instead of R_t (ours)."}
    )
    add_episode: bool = field(default=False, metadata={"help": "Add the episode term A^E_i (ours)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive("alpha", self.alpha, allow_zero=True)
        _positive("table_epsilon", self.table_epsilon)
        _positive("omega_k", self.omega_k, allow_zero=True)
        if self.g_max < 1:
            raise ValueError(f"g_max={self.g_max} must be >= 1 (default 8)")
        if self.max_states is not None and self.max_states < 1:
            raise ValueError(f"max_states={self.max_states} must be >= 1, or None for an unbounded table")

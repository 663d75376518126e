"""Step-level advantage estimators by name: ``grpo``, ``gigpo``, ``progpo_c``, ``progpo_r``, ``3spo``.

``compute_advantages(name, batch, config, state)`` returns one float32 advantage per
step row of a :class:`~trainers.step_batch.StepBatch`, on the batch's device. Every
estimator is a pure function ``(batch, config, state) -> (advantages, diagnostics)``
of vectorized torch ops, registered by name with its config class and, when it
learns across iterations, its state class.

A registration may also say what the estimator needs from the trainer, so that
``StepGRPOTrainer`` and ``StepGRPOConfig`` name no estimator (:class:`EstimatorSpec`):
``group_sizes`` (rollouts per task, 3SPO's ``n(s_0)``), ``rollout_modes`` (collectors
other than plain episodes, 3SPO's ``branching`` and ``post_step``), ``configure_collector``
(extra record fields, GiGPO's similarity ``anchor_key``), ``check_args`` (checks of the
trainer config) and ``flag_prefix`` (its ``agentgym-rl train`` flags ``--<prefix>_<field>``).

Protocol for a training iteration::

    state = make_state(name, config)          # once; None for stateless estimators
    ...
    adv, diagnostics = compute_advantages(name, batch, config, state, return_diagnostics=True)
    if state is not None:
        state.update(batch)                    # after computing, never before

Diagnostics are floats under slash names (the trainer logs them with a prefix):

============================== ===========================================================
``groups/all_zero_frac``       share of task groups whose outcomes are all 0
``groups/singleton_frac``      share of task groups with one rollout
``groups/mean_rollouts``       mean rollouts per task group
``anchor/mean_size``           mean size of anchor-state groups (gigpo, progpo_c, 3spo)
``anchor/singleton_frac``      share of anchor-state groups with one row
``anchor/merged_groups``       anchor groups holding several state keys (gigpo, progpo_c
                               with ``enable_similarity``: similarity merges)
``prefix/mean_size``           mean size of exact-prefix groups (progpo_r)
``prefix/singleton_frac``      share of exact-prefix groups with one row
``prefix/singleton_row_frac``  share of rows whose exact prefix is unique
``potential/mean``             mean fused potential ``Φ(s_t)``
``potential/reliability_mean`` mean ``ρ_t`` over rows credited by the potential
``potential/semantic_frac``    share of rows whose fusion used the semantic key
``potential/expanded_groups``  semantic groups that pooled, for some such row, more
                               visits than any of its history keys (expansion happened)
``coverage/mean``              mean ``C_i`` (progpo_c); ``coverage/failed_mean`` in
                               all-failed groups; ``coverage/failed_frac`` share of
                               all-failed groups; ``coverage/active_frac`` share of them
                               whose rollouts differ in coverage
``spo3/score_mean``            mean ``S(s_t)``; ``spo3/filtered_frac`` share of rows
                               zeroed by the ``ξ``/``ζ`` filter; ``spo3/step_reward_mean``
============================== ===========================================================

>>> from trainers.step_batch import StepBatch
>>> records = [
...     dict(group_id=0, traj_id=i, step=0, state_key=5, history_keys=[9], first_visit=True,
...          reward=float(i), outcome=float(i), done=True)
...     for i in (0, 1)
... ]
>>> compute_advantages("grpo", StepBatch.from_records(records)).tolist()
[-0.7071057558059692, 0.7071057558059692]
>>> sorted(list_estimators())
['3spo', 'gigpo', 'grpo', 'progpo_c', 'progpo_r']
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, overload

import torch

from trainers.estimator_configs import (
    EstimatorConfig,
    GiGPOEstimatorConfig,
    GRPOEstimatorConfig,
    ProGPOCEstimatorConfig,
    ProGPOREstimatorConfig,
    SPO3EstimatorConfig,
)
from trainers.estimators.grpo import gigpo, grpo, similarity_anchors
from trainers.estimators.progpo_c import progpo_c
from trainers.estimators.progpo_r import ProGPORState, progpo_r
from trainers.estimators.spo3 import SPO3State, spo3
from trainers.estimators.spo3_rollouts import branching_rollouts, post_step_rollouts, spo3_group_sizes
from trainers.step_batch import StepBatch

__all__ = [
    "CheckArgsFn",
    "ConfigureCollectorFn",
    "EstimatorFn",
    "EstimatorSpec",
    "GroupSizesFn",
    "RolloutModeFactory",
    "RolloutRequest",
    "compute_advantages",
    "get_estimator",
    "list_estimators",
    "make_config",
    "make_state",
    "register_estimator",
]

#: ``(batch, config, state) -> (advantages [rows], diagnostics)``; diagnostics map names
#: to 0-dim tensors or floats, or are a zero-argument function returning such a map
#: (evaluated only when ``return_diagnostics=True``).
EstimatorFn = Callable[[StepBatch, Any, Any], tuple[torch.Tensor, Any]]
#: ``(initial_keys, state, config, group_size) -> rollouts per task``: ``initial_keys`` holds
#: ``k(o_0)`` of each chosen task (``0`` for a task not rolled out yet), ``group_size`` the
#: env's slots per task (the result must not exceed it).
GroupSizesFn = Callable[[list[int], Any, Any, int], list[int]]
#: ``(collector, config) -> None``: asks the trainer's ``RolloutCollector`` for the record
#: fields the estimator reads beyond the defaults (e.g. GiGPO's similarity ``anchor_key``).
ConfigureCollectorFn = Callable[[Any, Any], None]
#: ``(collector, state, config, args) -> collect``: builds a rollout mode from the trainer's
#: ``RolloutCollector``, the estimator's state and config and the ``StepGRPOConfig``;
#: ``collect(RolloutRequest) -> Rollout`` then gathers one training step's rows.
RolloutModeFactory = Callable[[Any, Any, Any, Any], Callable[["RolloutRequest"], Any]]
#: ``(args) -> None``: rejects a ``StepGRPOConfig`` the estimator cannot train with (raise ``ValueError``).
CheckArgsFn = Callable[[Any], None]


@dataclass(frozen=True)
class RolloutRequest:
    """What the trainer hands a rollout mode for one training step.

    Attributes:
        generate: the policy, ``conversations -> replies`` (``trainers.rollout.GenerateFn``).
        tasks: the tasks chosen for this step, one per task group.
        group_sizes: rollouts per task (``None``: the env's ``group_size`` each).
        choose_tasks: draws another ``(tasks, group_sizes)``, for modes that reset mid-step.
        seed: the env seed of this step.
    """

    generate: Callable[[list[list[dict[str, str]]]], Any]
    tasks: list[str]
    group_sizes: list[int] | None
    choose_tasks: Callable[[], tuple[list[str], list[int] | None]]
    seed: int


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator: its function, config and state, and what it needs from the trainer.

    The optional hooks keep the trainer and ``StepGRPOConfig`` free of estimator names:
    an estimator with special rollout needs declares them here, in its registration.

    Attributes:
        name: the registry name.
        fn: the pure estimator function.
        config_cls: its config dataclass (instantiated with defaults when no config is given).
        state_cls: class of its cross-iteration state (constructed as ``state_cls(config)``),
            or ``None`` when it keeps nothing.
        flag_prefix: prefix of its ``agentgym-rl train`` flags, ``--<prefix>_<field>``
            (default: ``name``; a name that is not a Python identifier, such as ``3spo``, needs one).
        group_sizes: adaptive rollouts per task (default: ``group_size`` for every task).
        rollout_modes: rollout modes it supports beyond plain lockstep episodes, by the
            name ``StepGRPOConfig.rollout_mode`` gives them (``"branching"``, ``"post_step"``).
        configure_collector: asks the rollout collector for extra record fields.
        check_args: validates the ``StepGRPOConfig`` (called by its ``__post_init__``).
    """

    name: str
    fn: EstimatorFn
    config_cls: type
    state_cls: type | None = None
    flag_prefix: str = ""
    group_sizes: GroupSizesFn | None = None
    rollout_modes: Mapping[str, RolloutModeFactory] = field(default_factory=dict)
    configure_collector: ConfigureCollectorFn | None = None
    check_args: CheckArgsFn | None = None

    def __post_init__(self) -> None:
        prefix = self.flag_prefix or self.name
        if not prefix.isidentifier():
            raise ValueError(
                f"estimator {self.name!r} needs a flag_prefix that is a Python identifier (its CLI flags are "
                f"--<prefix>_<field>), e.g. register_estimator({self.name!r}, ..., flag_prefix='my_estimator')"
            )
        object.__setattr__(self, "flag_prefix", prefix)
        object.__setattr__(self, "rollout_modes", MappingProxyType(dict(self.rollout_modes)))


_REGISTRY: dict[str, EstimatorSpec] = {}


def register_estimator(
    name: str,
    fn: EstimatorFn | None = None,
    *,
    config_cls: type = EstimatorConfig,
    state_cls: type | None = None,
    flag_prefix: str = "",
    group_sizes: GroupSizesFn | None = None,
    rollout_modes: Mapping[str, RolloutModeFactory] | None = None,
    configure_collector: ConfigureCollectorFn | None = None,
    check_args: CheckArgsFn | None = None,
    overwrite: bool = False,
) -> Any:
    """Register an estimator under ``name``; usable as a decorator.

    Args:
        name: the name ``compute_advantages`` (and ``StepGRPOConfig.estimator``) will accept.
        fn: ``(batch, config, state) -> (advantages, diagnostics)``; omit to decorate.
        config_cls: its config dataclass (its fields become ``--<flag_prefix>_<field>`` flags).
        state_cls: its state class, if it learns across iterations.
        flag_prefix: prefix of its CLI flags (default: ``name``).
        group_sizes: adaptive rollouts per task (see :data:`GroupSizesFn`).
        rollout_modes: its own rollout modes (see :data:`RolloutModeFactory`).
        configure_collector: extra record fields it needs (see :data:`ConfigureCollectorFn`).
        check_args: its checks of the trainer config (see :data:`CheckArgsFn`).
        overwrite: replace an existing registration instead of raising.

    Returns:
        ``fn`` (or a decorator when ``fn`` is omitted).

    Example:
        >>> @register_estimator("zero_demo")
        ... def zero_demo(batch, config, state=None):
        ...     return torch.zeros(batch.num_rows), {}
        >>> "zero_demo" in list_estimators()
        True
        >>> _ = _REGISTRY.pop("zero_demo")
    """

    def add(function: EstimatorFn) -> EstimatorFn:
        if name in _REGISTRY and not overwrite:
            raise ValueError(f"estimator {name!r} is already registered; pass overwrite=True to replace it")
        _REGISTRY[name] = EstimatorSpec(
            name,
            function,
            config_cls,
            state_cls,
            flag_prefix=flag_prefix,
            group_sizes=group_sizes,
            rollout_modes=rollout_modes or {},
            configure_collector=configure_collector,
            check_args=check_args,
        )
        return function

    return add if fn is None else add(fn)


def list_estimators() -> list[str]:
    """Registered estimator names."""
    return list(_REGISTRY)


def get_estimator(name: str) -> EstimatorSpec:
    """The registration of ``name``; an unknown name raises with the closest match."""
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown advantage estimator {name!r}.{hint} Registered: {sorted(_REGISTRY)}; "
            "add one with trainers.register_estimator"
        ) from None


def make_config(name: str, **kwargs: Any) -> Any:
    """The config of estimator ``name`` with ``kwargs`` overriding its defaults."""
    return get_estimator(name).config_cls(**kwargs)


def make_state(name: str, config: Any = None) -> Any:
    """A fresh cross-iteration state for ``name`` (``None`` if it keeps none)."""
    spec = get_estimator(name)
    if spec.state_cls is None:
        return None
    return spec.state_cls(config if config is not None else spec.config_cls())


@overload
def compute_advantages(
    name: str,
    batch: StepBatch,
    config: Any = ...,
    state: Any = ...,
    *,
    return_diagnostics: Literal[False] = ...,
) -> torch.Tensor: ...


@overload
def compute_advantages(
    name: str,
    batch: StepBatch,
    config: Any = ...,
    state: Any = ...,
    *,
    return_diagnostics: Literal[True],
) -> tuple[torch.Tensor, dict[str, float]]: ...


def compute_advantages(
    name: str,
    batch: StepBatch,
    config: Any = None,
    state: Any = None,
    *,
    return_diagnostics: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, dict[str, float]]:
    """One advantage per step row with estimator ``name``.

    Args:
        name: a registered estimator (``grpo``, ``gigpo``, ``progpo_c``, ``progpo_r``,
            ``3spo`` or one added with :func:`register_estimator`).
        batch: the step rows; the result lives on ``batch.device``.
        config: the estimator's config (default: its defaults).
        state: cross-iteration state (3SPO's table, ProGPO-R's moving averages), read
            only: call ``state.update(batch)`` afterwards.
        return_diagnostics: also return a dict of float diagnostics (this synchronizes
            with the device once).

    Returns:
        float32 ``[rows]``, or ``(advantages, diagnostics)`` when ``return_diagnostics``.
    """
    spec = get_estimator(name)
    if config is None:
        config = spec.config_cls()
    elif not isinstance(config, spec.config_cls):
        raise TypeError(
            f"estimator {name!r} takes a {spec.config_cls.__name__}, got {type(config).__name__}; "
            f"build one with trainers.make_config({name!r}, ...)"
        )
    if spec.state_cls is not None and state is not None and not isinstance(state, spec.state_cls):
        raise TypeError(
            f"estimator {name!r} takes a {spec.state_cls.__name__} state, got {type(state).__name__}; "
            f"build one with trainers.make_state({name!r}, config)"
        )
    if batch.num_rows == 0:
        empty = torch.zeros(0, dtype=torch.float32, device=batch.device)
        return (empty, {}) if return_diagnostics else empty
    advantages, diagnostics = spec.fn(batch, config, state)
    advantages = advantages.to(device=batch.device, dtype=torch.float32)
    if advantages.shape != (batch.num_rows,):
        raise ValueError(
            f"estimator {name!r} returned shape {tuple(advantages.shape)}, expected ({batch.num_rows},)"
        )
    if not return_diagnostics:
        return advantages
    if callable(diagnostics):  # computed lazily: only when asked for
        diagnostics = diagnostics()
    return advantages, {key: float(value) for key, value in diagnostics.items()}


# ---------------------------------------------------------------- built-in estimators
register_estimator("grpo", grpo, config_cls=GRPOEstimatorConfig)
register_estimator("gigpo", gigpo, config_cls=GiGPOEstimatorConfig, configure_collector=similarity_anchors)
register_estimator(
    "progpo_c", progpo_c, config_cls=ProGPOCEstimatorConfig, configure_collector=similarity_anchors
)
register_estimator("progpo_r", progpo_r, config_cls=ProGPOREstimatorConfig, state_cls=ProGPORState)
register_estimator(
    "3spo",
    spo3,
    config_cls=SPO3EstimatorConfig,
    state_cls=SPO3State,
    flag_prefix="spo3",  # flags are --spo3_<field>: "3spo" is not an identifier
    group_sizes=spo3_group_sizes,
    rollout_modes={"branching": branching_rollouts, "post_step": post_step_rollouts},
)

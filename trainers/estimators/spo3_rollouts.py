"""3SPO's rollout needs, as registry hooks (``trainers.advantages.register_estimator``).

- :func:`spo3_group_sizes`: the adaptive group size ``n(s_0) = ⌈G_max S(s_0)⌉`` of each task.
- :func:`branching_rollouts`: the ``branching`` rollout mode, ranked backtracking DFS from
  env snapshots (:class:`trainers.branching.BranchingCollector`).
- :func:`post_step_rollouts`: the ``post_step`` rollout mode, episodes kept alive across
  optimizer steps (:class:`trainers.post_step.PostStepCollector`).

The trainer calls these through the registry and knows none of them by name. The
collectors are imported when a mode is built: they import this package's state class.
"""

from __future__ import annotations

from typing import Any

from trainers.estimator_configs import SPO3EstimatorConfig
from trainers.estimators.spo3 import SPO3State, adaptive_group_sizes

__all__ = ["branching_rollouts", "post_step_rollouts", "spo3_group_sizes"]


def spo3_group_sizes(
    initial_keys: list[int], state: SPO3State | None, config: SPO3EstimatorConfig, group_size: int
) -> list[int]:
    """Rollouts per task: ``n(s_0)`` from the table, capped by the env's ``group_size`` slots.

    A task not rolled out yet has key 0, which is never in the table: ``S = 1``, ``n = G_max``.
    """
    sizes = [min(s, group_size) for s in adaptive_group_sizes(initial_keys, state, config)]
    if sum(sizes) == 0:  # every task is "solved or hopeless": keep training on one rollout each
        sizes = [1] * len(sizes)
    return sizes


class _BranchingMode:
    """``collect(request)`` of the branching mode; ``collector`` is the ``BranchingCollector``."""

    def __init__(self, base: Any, state: SPO3State, args: Any) -> None:
        from trainers.branching import BranchingCollector

        self.collector = BranchingCollector(base, state)
        self.args = args

    def budget(self) -> int:
        """Env steps per training step: ``branch_budget``, else N × G × the episode step limit."""
        import gymnasium as gym

        args = self.args
        if args.branch_budget:
            return args.branch_budget
        # The env's own step limit when none is set (ALFWorld 50, WebShop 15).
        steps = (
            args.max_env_steps
            or args.env_kwargs.get("max_episode_steps")
            or gym.spec(args.env_id).max_episode_steps
            or 50
        )
        return args.num_tasks * args.group_size * steps

    def __call__(self, request: Any) -> Any:
        return self.collector.collect(request.generate, request.tasks, self.budget(), seed=request.seed)


class _PostStepMode:
    """``collect(request)`` of the post-step mode; ``collector`` is the ``PostStepCollector``."""

    def __init__(self, base: Any, args: Any) -> None:
        from trainers.post_step import PostStepCollector

        self.collector = PostStepCollector(base)
        self.steps = args.post_step_updates

    def __call__(self, request: Any) -> Any:
        # Episodes outlive the step: the collector resets with fresh tasks only when all have ended.
        return self.collector.collect(request.generate, request.choose_tasks, self.steps, seed=request.seed)


def branching_rollouts(base: Any, state: SPO3State, config: SPO3EstimatorConfig, args: Any) -> _BranchingMode:
    """The ``branching`` rollout mode (``StepGRPOConfig.branching=True``)."""
    return _BranchingMode(base, state, args)


def post_step_rollouts(base: Any, state: SPO3State, config: SPO3EstimatorConfig, args: Any) -> _PostStepMode:
    """The ``post_step`` rollout mode (``StepGRPOConfig.post_step_updates=K``)."""
    return _PostStepMode(base, args)

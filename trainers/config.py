"""``StepGRPOConfig``: TRL's ``GRPOConfig`` plus the env, rollout and step-level estimator settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

__all__ = ["ROLLOUT_MODES", "StepGRPOConfig"]

_ENV_ALIASES = {
    "alfworld": "AgentGymRL/ALFWorld-v0",
    "webshop": "AgentGymRL/WebShop-v0",
    "bandit": "AgentGymRL/TextBandit-v0",
}


#: Rollout modes beyond plain episodes, by the config field that asks for each. Only an
#: estimator that declares a mode (``EstimatorSpec.rollout_modes``) may be trained with it.
ROLLOUT_MODES = {"branching": "branching", "post_step": "post_step_updates"}


def _has_accelerator() -> bool:
    import torch

    xpu = getattr(torch, "xpu", None)
    return bool(
        torch.cuda.is_available()
        or (hasattr(torch.backends, "mps") and torch.backends.mps.is_available())
        or (xpu is not None and xpu.is_available())
    )


@dataclass
class StepGRPOConfig(GRPOConfig):
    r"""Configuration of :class:`trainers.StepGRPOTrainer`.

    Every field of ``trl.GRPOConfig`` applies (learning rate, ``beta``, ``loss_type``,
    ``temperature``, ``max_completion_length``, vLLM settings, ...). One training step
    rolls out ``num_tasks`` tasks × ``group_size`` rollouts in a ``GroupVectorEnv``;
    every env step becomes one training row, and rows are fed to TRL's loss in chunks of
    ``per_device_train_batch_size`` (one backward each, one optimizer step per rollout).

    > Parameters that control the environment

    env_id (`str`, *optional*, defaults to `"AgentGymRL/ALFWorld-v0"`):
        Registered env id, or `alfworld` / `webshop` / `bandit`. The flag `--env` is an alias;
        in a `--config` YAML write `env_id:` (TRL's parser reads a top-level `env:` mapping as
        environment variables).
    env_kwargs (`dict`, *optional*):
        Keyword arguments for `gym.make` (e.g. `{"data_dir": "generated"}`).
    split (`str`, *optional*, defaults to `"train"`):
        Split whose tasks are trained on.
    num_tasks (`int`, *optional*, defaults to `4`):
        Tasks per training step (N).
    group_size (`int`, *optional*, defaults to `4`):
        Rollouts per task (G); 3SPO's `G_max`.
    max_env_steps (`int` or `None`, *optional*):
        Step limit of an episode (default: the env's, ALFWorld 50, WebShop 15).
    env_workers (`int` or `None`, *optional*):
        Env worker processes (default: the machine's cores).
    env_backend (`str`, *optional*, defaults to `"process"`):
        `process` (local worker processes) or `ray` (Ray actors, spread over a cluster).
    ray_address (`str` or `None`, *optional*):
        Ray cluster address for `env_backend="ray"`.

    > Parameters that control prompts and rewards

    history_window (`int`, *optional*, defaults to `2`):
        Past (observation, action) pairs in each prompt (the papers use 2).
    system_prompt (`str` or `None`, *optional*):
        Optional system message.
    action_format (`str`, *optional*, defaults to `"think_action"`):
        `think_action`: the reply must hold `<think>…</think><action>…</action>`;
        `action_tag`: only the `<action>` tags are required; `plain`: the whole reply is the
        action (pipeline checks with tiny models).
    invalid_action_penalty (`float`, *optional*, defaults to `0.1`):
        Subtracted from `r_t` when the reply breaks the format.
    penalize_inadmissible (`bool`, *optional*, defaults to `False`):
        Also penalize well-formed actions the env does not admit.
    reward_scale (`float`, *optional*, defaults to `1.0`):
        Multiplies env rewards and outcomes (verl-agent trains on 10 × won).

    > Parameters that control the advantage estimator

    estimator (`str`, *optional*, defaults to `"gigpo"`):
        `grpo`, `gigpo`, `progpo_c`, `progpo_r`, `3spo` or a name added with
        `trainers.register_estimator` (its registration says what it needs from the trainer:
        group sizes, rollout modes, record fields, checks of this config).
    estimator_kwargs (`dict`, *optional*):
        Fields of the estimator's config (e.g. `{"omega": 1.0}`); checked here. `agentgym-rl train`
        also offers each field as a flag `--<estimator>_<field>` (e.g. `--gigpo_omega`).
    gamma (`float`, *optional*, defaults to `0.95`):
        Discount of step returns, passed to the estimator when its config has `gamma`.

    > Parameters that control the rollout mode (estimators that declare it: `3spo`)

    branching (`bool`, *optional*, defaults to `False`):
        Ranked backtracking DFS rollouts from env snapshots: at a state s, `n(s) = ⌈G_max S(s)⌉`
        branches (`trainers.branching`); envs need `snapshot()`/`restore()` (ALFWorld).
    branch_budget (`int` or `None`, *optional*):
        Env steps per training step in branching mode (default: `num_tasks × group_size ×
        max_env_steps`, with 50 for an unset limit), shared by tasks in proportion to `n(s_0)`.
    post_step_updates (`int` or `None`, *optional*):
        Post-step optimization: episodes stay alive across optimizer steps and one update
        happens every this many lockstep env steps, on the rows of those steps (`None`: off).

    > Parameters that control the loss batches

    sort_by_length (`bool`, *optional*, defaults to `True`):
        Order a rollout's rows by length before cutting them into chunks, so that each chunk's
        padding (trimmed to its longest row) is small. The gradient is the same (the rows' sum
        does not depend on their order, and rotary attention on relative positions only);
        `False` keeps the rollout's order.
    """

    # Parameters that control the environment
    env_id: str = field(
        default="AgentGymRL/ALFWorld-v0",
        # `--env` as the other commands spell it; a YAML config says `env_id:` (TRL reserves `env:`).
        metadata={"help": "Registered env id, or 'alfworld' / 'webshop' / 'bandit'.", "aliases": ["--env"]},
    )
    env_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": 'Keyword arguments for gym.make, as a dict or a JSON string (e.g. \'{"data_dir": "generated"}\').'
        },
    )
    split: str = field(default="train", metadata={"help": "Split whose tasks are trained on."})
    num_tasks: int = field(default=4, metadata={"help": "Tasks per training step (N)."})
    group_size: int = field(default=4, metadata={"help": "Rollouts per task (G); 3SPO's G_max."})
    max_env_steps: int | None = field(
        default=None, metadata={"help": "Episode step limit (default: the env's; ALFWorld 50, WebShop 15)."}
    )
    env_workers: int | None = field(default=None, metadata={"help": "Env worker processes (default: cores)."})
    env_backend: str = field(
        default="process",
        metadata={"help": "Where env workers run: 'process' or 'ray' (pip install \"agentgym-rl[ray]\")."},
    )
    ray_address: str | None = field(
        default=None,
        metadata={
            "help": "Ray cluster for env_backend='ray': None ($RAY_ADDRESS or a local one), 'auto', 'ray://host:10001'."
        },
    )

    # Parameters that control prompts and rewards
    history_window: int = field(default=2, metadata={"help": "Past (observation, action) pairs per prompt."})
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message."})
    action_format: str = field(
        default="think_action",
        metadata={
            "help": "'think_action': replies need <think></think><action></action>; 'action_tag': only <action>."
        },
    )
    invalid_action_penalty: float = field(
        default=0.1, metadata={"help": "Subtracted from r_t when a reply breaks the format."}
    )
    penalize_inadmissible: bool = field(
        default=False, metadata={"help": "Also penalize well-formed actions that the env does not admit."}
    )
    reward_scale: float = field(default=1.0, metadata={"help": "Multiplies env rewards and outcomes."})

    # Parameters that control the advantage estimator
    estimator: str = field(
        default="gigpo",
        metadata={"help": "Advantage estimator: grpo, gigpo, progpo_c, progpo_r, 3spo or a registered name."},
    )
    estimator_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Fields of the estimator's config, as a dict or a JSON string; the flags "
            "--<estimator>_<field> below set the same fields (a field set both ways must agree)."
        },
    )
    gamma: float = field(
        default=0.95, metadata={"help": "Discount of step returns (estimators that use it)."}
    )

    # Parameters that control the rollout mode (estimators that declare it: 3spo)
    branching: bool = field(
        default=False,
        metadata={
            "help": "3SPO: ranked backtracking DFS rollouts from env snapshots (n(s) = ceil(G_max S(s)))."
        },
    )
    branch_budget: int | None = field(
        default=None,
        metadata={
            "help": "Env steps per training step when branching (default: num_tasks * group_size * steps)."
        },
    )
    post_step_updates: int | None = field(
        default=None,
        metadata={
            "help": "3SPO post-step optimization: update every this many env steps, episodes kept alive."
        },
    )

    # Parameters that control the loss batches
    sort_by_length: bool = field(
        default=True,
        metadata={
            "help": "Order a rollout's rows by length before chunking them (less padding, same gradient)."
        },
    )

    def __post_init__(self) -> None:
        import json

        self.env_id = _ENV_ALIASES.get(self.env_id, self.env_id)
        for name in ("env_kwargs", "estimator_kwargs"):
            value = getattr(self, name)
            if isinstance(value, str):
                try:
                    value = json.loads(value) if value.strip() else {}
                except json.JSONDecodeError as error:
                    raise ValueError(f"{name} must be a JSON object, got {value!r}: {error}") from error
            setattr(self, name, dict(value or {}))
        if self.num_tasks < 1 or self.group_size < 1:
            raise ValueError(
                f"num_tasks and group_size must be >= 1, got {self.num_tasks} and {self.group_size}"
            )
        if self.action_format not in ("think_action", "action_tag", "plain"):
            raise ValueError(
                f"action_format must be 'think_action', 'action_tag' or 'plain', got {self.action_format!r}"
            )
        spec = self._estimator_spec()
        requested = [mode for mode, field_name in ROLLOUT_MODES.items() if self._asks_for(field_name)]
        for mode in requested:
            if mode not in spec.rollout_modes:
                from trainers.advantages import get_estimator, list_estimators

                able = [n for n in list_estimators() if mode in get_estimator(n).rollout_modes]
                fix = f"set estimator={able[0]!r}" if len(able) == 1 else f"set estimator to one of {able}"
                raise ValueError(
                    f"{ROLLOUT_MODES[mode]} asks for the {mode!r} rollout mode, which estimator "
                    f"{self.estimator!r} does not declare: {fix} (got {self.estimator!r})"
                )
        if len(requested) > 1:
            raise ValueError(
                "choose one of branching=True and post_step_updates (their combination is not built)"
            )
        if self.post_step_updates is not None and self.post_step_updates < 1:
            raise ValueError(f"post_step_updates must be >= 1 env step, got {self.post_step_updates}")
        if self.branch_budget is not None and self.branch_budget < 1:
            raise ValueError(f"branch_budget must be >= 1 env step, got {self.branch_budget}")
        if self.history_window < 0:
            raise ValueError(f"history_window must be >= 0, got {self.history_window}")
        self.make_estimator_config()  # a bad estimator_kwargs fails here, not when the trainer starts
        if spec.check_args is not None:
            spec.check_args(self)
        # One rollout feeds one optimizer step; its rows are cut into chunks of
        # per_device_train_batch_size inside training_step. TRL's own accumulation and
        # generation batching must therefore be the identity: see StepGRPOTrainer.training_step.
        if self.gradient_accumulation_steps != 1:
            raise ValueError(
                "StepGRPOTrainer accumulates over all rows of a rollout itself: set gradient_accumulation_steps=1 "
                f"(got {self.gradient_accumulation_steps}) and size chunks with per_device_train_batch_size."
            )
        if getattr(self, "steps_per_generation", None) not in (None, 1) or getattr(
            self, "generation_batch_size", None
        ):
            raise ValueError(
                "StepGRPOTrainer rolls out once per optimizer step: leave steps_per_generation and "
                "generation_batch_size unset"
            )
        # GRPOConfig insists on >= 2 generations dividing the generation batch; our groups come from the
        # env, not from TRL's sampler, so these only shape the (ignored) dataloader batch.
        trl_default = next(f.default for f in dataclasses.fields(GRPOConfig) if f.name == "num_generations")
        if self.num_generations not in (None, 2, trl_default):
            raise ValueError(
                f"num_generations={self.num_generations} is TRL's samples per prompt, which this trainer does not "
                f"use: rollouts per task are group_size (--group_size {self.num_generations})"
            )
        self.num_generations = 2
        if self.per_device_train_batch_size % 2:
            raise ValueError(
                f"per_device_train_batch_size must be even (TRL's sampler), got {self.per_device_train_batch_size}"
            )
        if self.bf16 is None and not self.fp16 and not _has_accelerator():
            # TRL turns bf16 on by default, which transformers refuses without an accelerator;
            # on a CPU-only machine train in float32 unless asked otherwise.
            self.bf16 = False
        super().__post_init__()

    @property
    def rollout_mode(self) -> str:
        """How a training step's rows are collected: ``"episodes"`` (plain lockstep episodes) or one of
        :data:`ROLLOUT_MODES`, which the estimator must declare (``EstimatorSpec.rollout_modes``)."""
        return next(
            (mode for mode, field_name in ROLLOUT_MODES.items() if self._asks_for(field_name)), "episodes"
        )

    def _asks_for(self, field_name: str) -> bool:
        value = getattr(self, field_name)
        return value is not None and value is not False

    def _estimator_spec(self) -> Any:
        from trainers.advantages import get_estimator

        return get_estimator(self.estimator)  # an unknown name raises with the closest match

    def make_estimator_config(self) -> Any:
        """The estimator's config object: its defaults, ``gamma``, then ``estimator_kwargs``."""
        config_cls = self._estimator_spec().config_cls
        names = [f.name for f in dataclasses.fields(config_cls) if f.init]
        unknown = sorted(set(self.estimator_kwargs) - set(names))
        if unknown:
            import difflib

            hints = [difflib.get_close_matches(name, names, n=1) for name in unknown]
            close = [f"{name!r} -> {hint[0]!r}" for name, hint in zip(unknown, hints, strict=True) if hint]
            did_you_mean = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(
                f"estimator_kwargs {unknown} are not fields of estimator {self.estimator!r} "
                f"({config_cls.__name__}).{did_you_mean} Its fields: {names}"
            )
        kwargs = dict(self.estimator_kwargs)
        if "gamma" in names:
            kwargs.setdefault("gamma", self.gamma)
        return config_cls(**kwargs)

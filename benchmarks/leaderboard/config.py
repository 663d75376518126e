"""The leaderboard's arguments: one dataclass serves ``agentgym-rl leaderboard`` and the Python API.

>>> config = LeaderboardConfig(env="alfworld", agent="expert", episodes="3")
>>> config.envs, config.num_episodes, config.split_for("alfworld")
(['alfworld'], 3, 'valid_unseen')
>>> LeaderboardConfig(agent="gpt")
Traceback (most recent call last):
...
ValueError: unknown agent 'gpt'; use random, expert, hf:PATH_OR_ID or checkpoint:DIR
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_SPLITS", "ENV_NAMES", "IDENTITY_FIELDS", "LeaderboardConfig", "agent_slug"]

#: Short env names and the split each is scored on by default (the papers' test splits).
DEFAULT_SPLITS: dict[str, str] = {"alfworld": "valid_unseen", "webshop": "test"}
ENV_NAMES: tuple[str, ...] = tuple(DEFAULT_SPLITS)
#: Fields that define what a results file measures: a resumed run must agree on them.
IDENTITY_FIELDS: tuple[str, ...] = (
    "agent",
    "group_size",
    "seed",
    "data_dir",
    "temperature",
    "max_new_tokens",
    "max_steps",
    "history_window",
    "system_prompt",
    "action_format",
)

_MODEL_FIELDS = ("temperature", "max_new_tokens", "history_window", "system_prompt", "action_format")


def agent_slug(agent: str) -> str:
    """A folder-safe name of an agent spec.

    >>> agent_slug("hf:/models/Qwen2.5-1.5B-Instruct/"), agent_slug("checkpoint:out/run1")
    ('hf-Qwen2.5-1.5B-Instruct', 'checkpoint-run1')
    """
    kind, _, location = agent.partition(":")
    if not location:
        return kind
    name = Path(location.rstrip("/")).name or "model"
    return f"{kind}-{name}".replace(" ", "_")


@dataclass
class LeaderboardConfig:
    """Arguments of ``agentgym-rl leaderboard``.

    Parameters that control what is evaluated:
        env: ``alfworld``, ``webshop`` or ``all`` (both, one table each).
        agent: ``random``, ``expert``, ``hf:PATH_OR_ID`` or ``checkpoint:DIR``.
        split: The split (default: ALFWorld ``valid_unseen``, WebShop ``test``).
        episodes: Tasks to play (``all`` or a number; a seeded sample of the split).
        group_size: Rollouts per task (G): the table gives mean@G and pass@G.
        seed: Seed of the task sample, the envs and the agents.
        data_dir: ALFWorld data folder (``generated`` for the embedded games) or the
            WebShop catalogue (``generated`` or a folder of the original files).
        max_steps: Step limit per episode (default: the env's, ALFWorld 50, WebShop 15).

    Parameters that control the model (``hf:`` and ``checkpoint:`` agents):
        temperature: Sampling temperature; 0 decodes greedily.
        max_new_tokens: Tokens generated per step.
        batch_size: Episodes played at once (env slots), hence prompts per ``generate`` call.
        device: Torch device (default: ``cuda`` when available, else ``cpu``).
        history_window, system_prompt, action_format: The prompt settings of
            :class:`trainers.prompting.PromptConfig` (default: the model folder's
            ``prompt_config.json`` when it has one, else PromptConfig's defaults).

    Parameters that control the run:
        workers: Env worker processes (default: the machine's cores).
        output: The run's results folder (default: ``results/leaderboard/<env>-<split>-<agent>-G<G>-seed<seed>``).
        resume: Continue from the results already in ``output``; ``false`` starts over.
        progress: Show a progress bar.
    """

    # Parameters that control what is evaluated
    env: str = field(
        default="alfworld",
        metadata={"help": "alfworld, webshop or all.", "choices": ["alfworld", "webshop", "all"]},
    )
    agent: str = field(
        default="random",
        metadata={
            "help": "random, expert, hf:PATH_OR_ID (a causal LM) or checkpoint:DIR (saved by the trainer)."
        },
    )
    split: str | None = field(
        default=None, metadata={"help": "Split; default ALFWorld valid_unseen, WebShop test."}
    )
    episodes: int | str = field(
        default="all", metadata={"help": "Tasks to play: 'all' or N (a seeded sample of the split)."}
    )
    group_size: int = field(
        default=1, metadata={"help": "Rollouts per task (G): the table gives mean@G and pass@G."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of the task sample, the envs and the agents."})
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "ALFWorld data dir ('generated' for the embedded games) or WebShop catalogue ('generated' or the original files' folder)."
        },
    )
    max_steps: int | None = field(
        default=None,
        metadata={
            "help": "Step limit per episode; default the env's (ALFWorld 50, WebShop 15), as in the papers."
        },
    )
    # Parameters that control the model
    temperature: float = field(
        default=0.4, metadata={"help": "Sampling temperature of hf:/checkpoint: agents; 0 = greedy."}
    )
    max_new_tokens: int = field(
        default=512, metadata={"help": "Tokens generated per step by hf:/checkpoint: agents."}
    )
    batch_size: int = field(
        default=16, metadata={"help": "Episodes played at once (env slots) = prompts per generate call."}
    )
    device: str | None = field(
        default=None, metadata={"help": "Torch device of the model; default cuda if available, else cpu."}
    )
    # The prompt must be the one the model was trained with (trainers.prompting.PromptConfig).
    history_window: int | None = field(
        default=None,
        metadata={"help": "Past steps in the prompt; default the checkpoint's prompt_config.json, else 2."},
    )
    system_prompt: str | None = field(
        default=None,
        metadata={"help": "System message; default the checkpoint's prompt_config.json, else none."},
    )
    action_format: str | None = field(
        default=None,
        metadata={
            "help": "Reply format: think_action, action_tag or plain; default the checkpoint's "
            "prompt_config.json, else think_action (the papers')."
        },
    )
    # Parameters that control the run
    workers: int | None = field(
        default=None, metadata={"help": "Env worker processes; default the machine's cores."}
    )
    output: str | None = field(
        default=None,
        metadata={
            "help": "Results folder; default results/leaderboard/<env>-<split>-<agent>-G<G>-seed<seed>. Rerunning into it resumes."
        },
    )
    resume: bool = field(
        default=True, metadata={"help": "Continue from the episodes already in --output; false starts over."}
    )
    progress: bool = field(default=True, metadata={"help": "Show a progress bar."})

    def __post_init__(self) -> None:
        kind, _, location = self.agent.partition(":")
        if self.agent not in ("random", "expert") and not (kind in ("hf", "checkpoint") and location):
            raise ValueError(
                f"unknown agent {self.agent!r}; use random, expert, hf:PATH_OR_ID or checkpoint:DIR"
            )
        if self.env not in (*ENV_NAMES, "all"):
            raise ValueError(f"unknown env {self.env!r}; use one of {[*ENV_NAMES, 'all']}")
        if self.env == "all" and self.split is not None:
            raise ValueError(
                f"--split {self.split} with --env all: the envs have different splits; run each env on its own"
            )
        if self.env == "all" and self.data_dir not in (None, "generated"):
            raise ValueError(
                f"--data_dir {self.data_dir} with --env all: ALFWorld games and a WebShop catalogue are "
                "different folders; run each env on its own (or use the defaults / 'generated')"
            )
        if isinstance(self.episodes, str) and self.episodes != "all":
            if not self.episodes.isdigit():
                raise ValueError(f"--episodes must be 'all' or a number, got {self.episodes!r}")
            self.episodes = int(self.episodes)
        if self.num_episodes is not None and self.num_episodes < 1:
            raise ValueError(f"--episodes must be >= 1, got {self.episodes}")
        if self.group_size < 1 or self.batch_size < 1:
            raise ValueError(
                f"--group-size and --batch-size must be >= 1, got {self.group_size} and {self.batch_size}"
            )
        if self.temperature < 0:
            raise ValueError(f"--temperature must be >= 0 (0 = greedy), got {self.temperature}")

    @property
    def envs(self) -> list[str]:
        """The short names of the envs to evaluate."""
        return list(ENV_NAMES) if self.env == "all" else [self.env]

    @property
    def num_episodes(self) -> int | None:
        """Tasks to play per env (None: the whole split)."""
        return None if self.episodes == "all" else int(self.episodes)

    @property
    def tasks_at_once(self) -> int:
        """Groups per reset: as many as ``batch_size`` slots hold (at least one)."""
        return max(1, self.batch_size // self.group_size)

    def split_for(self, env: str) -> str:
        """The split evaluated for ``env``."""
        return self.split or DEFAULT_SPLITS[env]

    def output_dir(self) -> Path:
        """The run's results folder (stable per configuration, so that a rerun resumes)."""
        if self.output:
            return Path(self.output)
        split = self.split or "default"
        name = f"{self.env}-{split}-{agent_slug(self.agent)}-G{self.group_size}-seed{self.seed}"
        return Path("results") / "leaderboard" / name

    def identity(self, env: str) -> dict:
        """What an env's results file must agree on to be resumed (model settings only for models)."""
        names = (
            IDENTITY_FIELDS if ":" in self.agent else [n for n in IDENTITY_FIELDS if n not in _MODEL_FIELDS]
        )
        return {"env": env, "split": self.split_for(env), **{name: getattr(self, name) for name in names}}

"""Expert trajectories as a supervised dataset, in the trainer's exact prompt format.

An expert plays episodes in a real env; every step it takes becomes one example in TRL's
conversational prompt–completion format: the prompt is the chat messages that
:func:`trainers.prompting.build_messages` writes for that step (the function the trainer's
rollout collector and the leaderboard's ``hf:`` agent call), the completion is the
expert's reply in the configured action format. With probability ``epsilon`` a step takes
a uniformly random admissible action instead (never one that ends the episode: WebShop's
``click[buy now]``): that step is no training target, and the expert's later steps (it
replans from the state it is in) teach recovery.

Output folder (``save_to_disk`` layout, loadable with ``datasets.load_from_disk``):

- the dataset itself: columns ``prompt``, ``completion``, ``task_id``, ``task_type``,
  ``step``, ``won``, ``episode``, ``action``;
- ``trajectories.jsonl``: the same examples, one JSON object a line;
- ``trajectories.json``: the settings, the prompt config, and counts (episodes, wins, rows).

Experts:

- ALFWorld, ``expert="search"`` (the default): :class:`agentgym_rl.alfworld.search_expert.SearchExpert`,
  which decides from what the prompt shows (it searches the receptacles in order for the
  object, then the appliance, target or lamp), so a model can imitate it;
  ``expert="random_search"``: the same, but each next receptacle is drawn uniformly from the
  admissible go-to actions (no string comparison for a tiny model to learn; 91% won within
  30 steps against the ordered search's 100%);
  ``expert="walkthrough"``: the game's walkthrough, after a random step the engine's
  planner (``expert_plan()``, Fast Downward from the current state). It goes straight to
  where the object lies, which no observation tells: a clone of it learns to guess.
- WebShop, ``expert="search"`` (the default): :class:`agentgym_rl.webshop.instruction_expert.InstructionExpert`,
  which decides from what the prompt shows (it searches the instruction, opens the first
  result, clicks the options the instruction names, one per step after the last one it
  clicked, and buys; about 88 score on the generated test goals); ``expert="walkthrough"``:
  goal-seeking (it searches the goal product's name, which no page shows, and reads the
  session's page state to go back from any page; it scores 100).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainers.prompting import PromptConfig, build_messages, extract_task

__all__ = [
    "DATASET_COLUMNS",
    "META_FILE",
    "JSONL_FILE",
    "EXPERTS",
    "TrajectoryConfig",
    "check_expert",
    "collect_trajectories",
    "expert_reply",
    "load_trajectories",
]

META_FILE = "trajectories.json"
JSONL_FILE = "trajectories.jsonl"
_PROGRESS_FILE = ".progress.json"
DATASET_COLUMNS = ("prompt", "completion", "task_id", "task_type", "step", "won", "episode", "action")
#: The experts each env has (``random_search`` searches ALFWorld's receptacles; WebShop has no such places).
EXPERTS = {"alfworld": ("search", "random_search", "walkthrough"), "webshop": ("search", "walkthrough")}
_ENV_IDS = {"alfworld": "AgentGymRL/ALFWorld-v0", "webshop": "AgentGymRL/WebShop-v0"}
#: The reasoning the expert writes inside ``<think>`` (a short fixed sentence: the data teaches the
#: action, and a tiny model should not spend its tokens on made-up reasoning).
EXPERT_THOUGHT = "I take the next step toward the task."


@dataclass
class TrajectoryConfig:
    """Settings of ``agentgym-rl trajectories``.

    Parameters that control the episodes:
        env: ``alfworld`` or ``webshop``.
        data_dir: ALFWorld data folder, or ``generated`` for the embedded games (ALFWorld only).
        split: Split whose tasks are played.
        episodes: Episodes to play, or ``all`` (one per task of the split); past the split's
            size the tasks repeat, with other random draws.
        epsilon: Probability that a step takes a random admissible action (not a target).
        seed: Seed of the task order, the env resets and the random steps.
        max_env_steps: Step limit of an episode (default: the env's, ALFWorld 50, WebShop 15).
        expert: ``search`` (decides from what the prompt shows, so a model can imitate it),
            ``random_search`` (ALFWorld: the same with a uniformly random next receptacle) or
            ``walkthrough`` (ALFWorld: the game's plan, it knows where the object lies;
            WebShop: it knows the goal product's name).
        num_products: WebShop's generated catalogue size (None: the env's default).

    Parameters that control the prompt (as the trainer's ``StepGRPOConfig`` fields):
        history_window: Past (observation, action) pairs in each prompt.
        system_prompt: Optional system message.
        action_format: ``think_action``, ``action_tag`` or ``plain``.

    Parameters that control the output:
        output: Folder to write (resumed when it holds a run with the same settings).
        overwrite: Start over even if ``output`` holds a finished or partial run.
    """

    env: str = field(default="alfworld", metadata={"help": "Env: alfworld or webshop."})
    data_dir: str | None = field(
        default=None, metadata={"help": "ALFWorld data folder ('generated' for the embedded games)."}
    )
    split: str = field(default="train", metadata={"help": "Split whose tasks are played."})
    episodes: str = field(
        default="all", metadata={"help": "Episodes to play, or 'all' (one per task of the split)."}
    )
    epsilon: float = field(
        default=0.0,
        metadata={
            "help": "Probability that a step takes a random admissible action (not a training target)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of task order, resets and random steps."})
    max_env_steps: int | None = field(
        default=None, metadata={"help": "Episode step limit (default: the env's; ALFWorld 50, WebShop 15)."}
    )
    num_products: int | None = field(
        default=None, metadata={"help": "WebShop: generated catalogue size (default: the env's)."}
    )
    expert: str = field(
        default="search",
        metadata={
            "help": "Expert: search (acts on what the prompt shows), random_search (ALFWorld: search "
            "with a random next receptacle) or walkthrough (knows where the goal is)."
        },
    )
    history_window: int = field(default=2, metadata={"help": "Past (observation, action) pairs per prompt."})
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message."})
    action_format: str = field(
        default="think_action", metadata={"help": "think_action, action_tag or plain (as train's flag)."}
    )
    output: str = field(default="runs/trajectories", metadata={"help": "Output folder (the dataset)."})
    overwrite: bool = field(default=False, metadata={"help": "Start over instead of resuming."})

    def __post_init__(self) -> None:
        if self.env not in _ENV_IDS:
            raise ValueError(f"env must be one of {sorted(_ENV_IDS)}, got {self.env!r}")
        if not 0.0 <= float(self.epsilon) <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")
        self.epsilon = float(self.epsilon)
        episodes = str(self.episodes)
        if episodes != "all" and not (episodes.isdigit() and int(episodes) > 0):
            raise ValueError(f"episodes must be a positive integer or 'all', got {self.episodes!r}")
        self.episodes = episodes
        if self.data_dir is not None and self.env != "alfworld":
            raise ValueError("data_dir is ALFWorld's; WebShop plays the generated catalogue (num_products)")
        check_expert(self.env, self.expert)
        self.prompt_config()  # validates history_window and action_format

    def prompt_config(self) -> PromptConfig:
        """The trainer's prompt settings for these episodes."""
        return PromptConfig(
            env_kind=self.env,
            history_window=self.history_window,
            system_prompt=self.system_prompt,
            action_format=self.action_format,
        )

    def identity(self) -> dict[str, Any]:
        """The settings that define the data (a resumed run must match them)."""
        data = dataclasses.asdict(self)
        for name in ("output", "overwrite", "episodes"):
            data.pop(name)
        return data


def expert_reply(action: str, config: PromptConfig) -> str:
    """The expert's reply for ``action`` in the configured action format.

    >>> expert_reply("go to desk 1", PromptConfig(action_format="action_tag"))
    '<action>go to desk 1</action>'
    """
    if config.action_format == "plain":
        return action
    if config.action_format == "action_tag":
        return f"<action>{action}</action>"
    return f"<think>{EXPERT_THOUGHT}</think><action>{action}</action>"


# --------------------------------------------------------------------------------------------
# Experts that recover from off-plan steps
# --------------------------------------------------------------------------------------------


class _ALFWorldExpert:
    """The walkthrough, replanned by the game's planner after an off-plan step."""

    def __init__(self, env: Any) -> None:
        self.env = env.unwrapped
        self.plan = list(self.env.walkthrough)
        self.off_plan = False

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self.off_plan:
            self.plan, self.off_plan = list(self.env.expert_plan()), False
        return self.plan.pop(0) if self.plan else "look"

    def deviated(self) -> None:
        self.off_plan = True

    def observe(self, action: str, observation: str) -> None:
        pass


class _Searcher:
    """A prompt-visible expert (``SearchExpert``, ``InstructionExpert``): it reads every step, its own
    and the random ones."""

    def __init__(self, expert: Any) -> None:
        self.expert = expert

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.expert.act(observation, list(info["admissible_actions"]))

    def deviated(self) -> None:
        pass

    def observe(self, action: str, observation: str) -> None:
        self.expert.observe(action, observation)


class _WebShopExpert:
    """Goal-seeking from the session's page state, so that it recovers from any page."""

    def __init__(self, env: Any) -> None:
        self.env = env.unwrapped
        goal = self.env.goal
        self.asin = str(goal["asin"]).lower()
        options = goal["goal_options"]
        self.values = [str(v).lower() for v in (options.values() if isinstance(options, dict) else options)]
        self.name = str(goal["name"])
        self.pages_seen = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        admissible = list(info["admissible_actions"])
        # The session's page state (page, asin, options): the env's backend is ours.
        state = self.env._backend.get_state()
        page = state["page"]
        if page == "search":
            self.pages_seen = 0
            return f"search[{self.name}]"
        if page == "results":
            if f"click[{self.asin}]" in admissible:
                return f"click[{self.asin}]"
            if "click[next >]" in admissible and self.pages_seen < 4:
                self.pages_seen += 1
                return "click[next >]"
            return "click[back to search]"
        if page == "item" and str(state.get("asin") or "").lower() == self.asin:
            chosen = {str(v).lower() for v in state.get("options", {}).values()}
            for value in self.values:
                if value not in chosen and f"click[{value}]" in admissible:
                    return f"click[{value}]"
            return "click[buy now]"
        # Another product's page or a sub-page: one page back.
        return "click[< prev]" if "click[< prev]" in admissible else "click[back to search]"

    def deviated(self) -> None:
        pass

    def observe(self, action: str, observation: str) -> None:
        pass


#: Admissible actions a random step never takes: ``help`` changes nothing, and a random purchase
#: would end the episode (lost, nothing left to recover from).
_NOT_RANDOM = frozenset({"help", "click[buy now]"})


def _random_action(admissible: list[str], observation: str, rng: np.random.Generator) -> str:
    """A uniformly random admissible action that does not end the episode; WebShop's search
    template is filled with the task."""
    choices = [a for a in admissible if a not in _NOT_RANDOM] or ["look"]
    action = str(choices[int(rng.integers(len(choices)))])
    if action.startswith("search[<") and action.endswith(">]"):
        action = f"search[{extract_task(observation, PromptConfig(env_kind='webshop'))}]"
    return action


# --------------------------------------------------------------------------------------------
# Collection
# --------------------------------------------------------------------------------------------


def _make_env(config: TrajectoryConfig) -> Any:
    import gymnasium as gym

    import agentgym_rl  # noqa: F401  (registers the envs)

    kwargs: dict[str, Any] = {"split": config.split}
    if config.data_dir is not None:
        kwargs["data_dir"] = config.data_dir
    if config.num_products is not None:
        kwargs["num_products"] = config.num_products
    if config.max_env_steps is not None:
        kwargs["max_episode_steps"] = config.max_env_steps
    return gym.make(_ENV_IDS[config.env], **kwargs)


def play_episode(
    env: Any, task: Any, seed: int, config: TrajectoryConfig, rng: np.random.Generator
) -> tuple[list[dict[str, Any]], bool]:
    """One expert episode: its training examples (off-plan steps left out) and whether it was won."""
    prompt_config = config.prompt_config()
    observation, info = env.reset(seed=seed, options={"task": task})
    task_text = extract_task(str(observation), prompt_config)
    expert: Any
    if config.expert == "walkthrough":
        expert = _WebShopExpert(env) if config.env == "webshop" else _ALFWorldExpert(env)
    elif config.env == "webshop":
        from agentgym_rl.webshop.instruction_expert import InstructionExpert

        expert = _Searcher(InstructionExpert(task_text))
    else:
        from agentgym_rl.alfworld.search_expert import SearchExpert

        order = "random" if config.expert == "random_search" else "alphabetical"
        expert = _Searcher(SearchExpert(env.unwrapped.task_id, order=order, seed=seed))
    history: list[tuple[str, str]] = []
    examples: list[dict[str, Any]] = []
    won = False
    while True:
        admissible = list(info["admissible_actions"])
        messages = build_messages(task_text, str(observation), admissible, history, prompt_config)
        off_plan = config.epsilon > 0 and rng.random() < config.epsilon
        if off_plan:
            action = _random_action(admissible, str(observation), rng)
            expert.deviated()
        else:
            action = expert.act(str(observation), info)
            examples.append(
                {
                    "prompt": messages,
                    "completion": [{"role": "assistant", "content": expert_reply(action, prompt_config)}],
                    "task_id": str(info["task_id"]),
                    "task_type": str(info.get("task_type", "")),
                    "step": len(history),
                    "action": action,
                }
            )
        history.append((str(observation), action))
        observation, _, terminated, truncated, info = env.step(action)
        expert.observe(action, str(observation))
        if terminated or truncated:
            won = bool(info.get("won", False))
            break
    for example in examples:
        example["won"] = won
    return examples, won


def _atomic_write(path: Path, text: str) -> None:
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(text)
    os.replace(scratch, path)


def collect_trajectories(config: TrajectoryConfig, progress: bool = True) -> Path:
    """Play the expert episodes and write the dataset; resumes a partial run of the same settings.

    Returns:
        The output folder (``datasets.load_from_disk`` reads it).

    Raises:
        ValueError: The output folder holds a run with other settings (use ``overwrite``).
    """
    from datasets import Dataset
    from tqdm.auto import tqdm

    out = Path(config.output)
    progress_file, jsonl = out / _PROGRESS_FILE, out / JSONL_FILE
    done, wins = 0, 0
    if out.exists() and config.overwrite:
        shutil.rmtree(out)
    if out.exists() and any(out.iterdir()):
        previous = json.loads(progress_file.read_text()) if progress_file.is_file() else None
        if previous is None and (out / META_FILE).is_file():
            previous = json.loads((out / META_FILE).read_text())
        if previous is None or previous.get("identity") != config.identity():
            raise ValueError(
                f"{out} holds other data (another run's settings or an unknown folder); "
                "pass --overwrite True or another --output"
            )
        done, wins = int(previous["episodes_done"]), int(previous["wins"])
    out.mkdir(parents=True, exist_ok=True)
    # Keep exactly the finished episodes' lines (a crash may leave a partial episode behind).
    kept: list[str] = []
    if jsonl.is_file():
        for line in jsonl.read_text().splitlines():
            try:
                if json.loads(line)["episode"] < done:
                    kept.append(line)
            except (json.JSONDecodeError, KeyError):
                continue
    _atomic_write(jsonl, "".join(f"{line}\n" for line in kept))

    env = _make_env(config)
    try:
        tasks = list(env.unwrapped.task_ids)
        total = len(tasks) if config.episodes == "all" else int(config.episodes)
        order = np.random.default_rng(config.seed).permutation(len(tasks))
        bar = tqdm(total=total, initial=done, desc=f"expert {config.env}", unit="ep", disable=not progress)
        with jsonl.open("a") as handle:
            for episode in range(done, total):
                task = tasks[int(order[episode % len(tasks)])]
                rng = np.random.default_rng([config.seed, episode])
                examples, won = play_episode(env, task, int(rng.integers(2**31 - 1)), config, rng)
                for example in examples:
                    handle.write(json.dumps({**example, "episode": episode}) + "\n")
                handle.flush()
                done, wins = episode + 1, wins + int(won)
                _atomic_write(
                    progress_file,
                    json.dumps({"identity": config.identity(), "episodes_done": done, "wins": wins}),
                )
                bar.update(1)
                bar.set_postfix(won=f"{wins / done:.2f}")
        bar.close()
    finally:
        env.close()

    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    dataset = Dataset.from_list(rows) if rows else Dataset.from_dict({c: [] for c in DATASET_COLUMNS})
    # save_to_disk refuses the folder it would overwrite in place: write beside it, then move in.
    scratch = out.with_name(out.name + ".saving")
    if scratch.exists():
        shutil.rmtree(scratch)
    dataset.save_to_disk(str(scratch))
    for item in scratch.iterdir():
        os.replace(item, out / item.name)
    scratch.rmdir()
    meta = {
        "identity": config.identity(),
        "env_id": _ENV_IDS[config.env],
        "prompt_config": dataclasses.asdict(config.prompt_config()),
        "episodes_done": done,
        "wins": wins,
        "rows": len(rows),
        "command": "agentgym-rl trajectories",
    }
    _atomic_write(out / META_FILE, json.dumps(meta, indent=1))
    progress_file.unlink(missing_ok=True)
    return out


def check_expert(env: str, expert: str) -> None:
    """Raises ``ValueError`` unless ``env`` is known and ``expert`` is one of its experts (:data:`EXPERTS`)."""
    if env not in EXPERTS:
        raise ValueError(f"env must be one of {sorted(EXPERTS)}, got {env!r}")
    known = sorted({name for names in EXPERTS.values() for name in names})
    if expert not in known:
        raise ValueError(f"expert must be one of {known}, got {expert!r}")
    if expert not in EXPERTS[env]:
        owners = " and ".join(e for e, names in EXPERTS.items() if expert in names)
        raise ValueError(f"expert {expert!r} is {owners}'s; {env}'s experts are {', '.join(EXPERTS[env])}")


def load_trajectories(directory: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """The dataset and its ``trajectories.json`` settings, checked.

    Raises:
        FileNotFoundError: No dataset there (the message names the command that makes one).
        ValueError: The dataset lacks the expected columns.
    """
    from datasets import load_from_disk

    folder = Path(directory)
    make = "make one with `agentgym-rl trajectories --env alfworld --output DIR`"
    if not (folder / META_FILE).is_file() or not (folder / "state.json").is_file():
        raise FileNotFoundError(
            f"no trajectory dataset in {folder} ({META_FILE} or state.json missing); {make}"
        )
    dataset = load_from_disk(str(folder))
    missing = [c for c in ("prompt", "completion") if c not in dataset.column_names]
    if missing:
        raise ValueError(f"{folder} is not a trajectory dataset: columns {missing} are missing; {make}")
    return dataset, json.loads((folder / META_FILE).read_text())

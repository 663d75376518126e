"""``agentgym-rl play``: play episodes with a scripted agent and print what happens.

The README's first command runs it on the embedded default: an ALFWorld game played
by the expert and by a random agent. The agents are :mod:`agentgym_rl.agents`' batch
policies in a one-slot ``GroupVectorEnv``, stepped by :func:`agentgym_rl.episodes.step_episodes`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from agentgym_rl.cli_args import make_command_parser, parse_command_args


@dataclass
class Args:
    """Arguments of ``agentgym-rl play``."""

    env: str = field(default="alfworld", metadata={"help": "Env: alfworld, webshop or a registered id."})
    agents: list[str] = field(
        default_factory=lambda: ["expert", "random"],
        metadata={"help": "Agents to play, in turn: expert, random."},
    )
    split: str | None = field(
        default=None,
        metadata={
            "help": "Split (ALFWorld: train, valid_seen, valid_unseen, valid_train). Env default if unset."
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "ALFWorld data folder ('generated' for the embedded games); default: ALFWORLD_DATA, ../shared/data."
        },
    )
    task: str | None = field(default=None, metadata={"help": "Task id to play; default: picked by the seed."})
    episodes: int = field(default=1, metadata={"help": "Episodes per agent."})
    seed: int = field(
        default=0, metadata={"help": "Seed of the task choice and of the random agent (episode k: seed + k)."}
    )
    max_steps: int | None = field(
        default=None, metadata={"help": "Step limit (default: the env's, ALFWorld 50)."}
    )
    quiet: bool = field(default=False, metadata={"help": "Print only each episode's result, not every step."})


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl play``."""
    return make_command_parser(
        Args,
        name="play",
        description="Play episodes with a scripted agent and print them.",
        subparsers=subparsers,
        prog=prog,
    )


def _env_kwargs(args: Args, env_id: str) -> dict:
    kwargs: dict = {}
    if args.split is not None:
        kwargs["split"] = args.split
    if args.data_dir is not None and "ALFWorld" in env_id:
        kwargs["data_dir"] = args.data_dir
    if args.max_steps is not None:
        kwargs["max_episode_steps"] = args.max_steps
    return kwargs


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl play``; returns the exit code."""
    args = parse_command_args(parser or make_parser(), Args, argv)
    import agentgym_rl  # noqa: F401 - registers the envs
    from agentgym_rl.agents import make_agent
    from agentgym_rl.episodes import start_episodes, step_episodes
    from agentgym_rl.registration import resolve_env_id
    from agentgym_rl.vector import GroupVectorEnv

    env_id = resolve_env_id(args.env)
    policies = [make_agent(name) for name in args.agents]  # an unknown name fails before any env starts
    # One slot in one worker: play runs the same loop as the leaderboard and the trainer.
    envs = GroupVectorEnv(env_id, num_tasks=1, group_size=1, workers=1, **_env_kwargs(args, env_id))
    results = []
    try:
        for policy in policies:
            for episode in range(args.episodes):
                seed = args.seed + episode
                # task None: the env picks one by the seed, as a plain env.reset(seed=...) does.
                observations, info = envs.reset(seed=seed, options={"tasks": [args.task]})
                records = start_episodes(info)
                record = records[0]
                policy.begin(envs, observations, info, [seed])
                print(f"\n=== {policy.name} · episode {episode + 1} · {record.task_id}")
                if not args.quiet:
                    print(observations[0])
                start = time.perf_counter()
                while envs.active.any():
                    actions = policy.act(observations, info)
                    format_valid = getattr(policy, "format_valid", None) or None
                    observations, _, _, _, info = step_episodes(envs, actions, records, format_valid)
                    if not args.quiet:
                        print(f"> {actions[0]}\n{observations[0]}")
                outcome = "WON" if record.won else "lost"
                score = f", score {record.score:.3f}" if "score" in info else ""
                seconds = time.perf_counter() - start
                print(
                    f"--- {policy.name}: {outcome} after {record.steps} steps "
                    f"(reward {record.env_return:.1f}{score}, {seconds:.2f} s)"
                )
                results.append((policy.name, record.task_id, record.won, record.steps))
    finally:
        envs.close()
    print("\nagent    won  steps  task")
    for agent_name, task_id, won, steps in results:
        print(f"{agent_name:<8} {'yes' if won else 'no':<4} {steps:>5}  {task_id}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

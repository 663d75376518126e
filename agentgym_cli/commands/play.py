"""``agentgym-rl play``: play episodes with a scripted agent and print what happens.

The README's first command runs it on the embedded default: an ALFWorld game played
by the expert and by a random agent.
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
    seed: int = field(default=0, metadata={"help": "Seed of the task choice and of the random agent."})
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
    import gymnasium as gym

    import agentgym_rl  # noqa: F401 - registers the envs
    from agentgym_rl.agents import make_agent
    from agentgym_rl.registration import resolve_env_id

    env_id = resolve_env_id(args.env)
    env = gym.make(env_id, **_env_kwargs(args, env_id))
    results = []
    try:
        for agent_name in args.agents:
            agent = make_agent(agent_name, seed=args.seed)
            for episode in range(args.episodes):
                options = {"task": args.task} if args.task else None
                observation, info = env.reset(seed=args.seed + episode, options=options)
                agent.reset(observation, info, env.unwrapped)
                print(f"\n=== {agent_name} · episode {episode + 1} · {info['task_id']}")
                if not args.quiet:
                    print(observation)
                start, steps, total_reward, done = time.perf_counter(), 0, 0.0, False
                while not done:
                    action = agent.act(observation, info)
                    observation, reward, terminated, truncated, info = env.step(action)
                    steps, total_reward, done = (
                        steps + 1,
                        total_reward + float(reward),
                        terminated or truncated,
                    )
                    if not args.quiet:
                        print(f"> {action}\n{observation}")
                outcome = "WON" if info.get("won") else "lost"
                score = f", score {info['score']:.3f}" if "score" in info else ""
                seconds = time.perf_counter() - start
                print(
                    f"--- {agent_name}: {outcome} after {steps} steps (reward {total_reward:.1f}{score}, {seconds:.2f} s)"
                )
                results.append((agent_name, info["task_id"], bool(info.get("won")), steps))
    finally:
        env.close()
    print("\nagent    won  steps  task")
    for agent_name, task_id, won, steps in results:
        print(f"{agent_name:<8} {'yes' if won else 'no':<4} {steps:>5}  {task_id}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

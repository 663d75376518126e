"""``agentgym-rl sft``: clone expert trajectories with ``trl.SFTTrainer`` (the RL warm start).

Every field of :class:`trainers.sft.AgentSFTConfig` (so of ``trl.SFTConfig`` and
``transformers.TrainingArguments``) is a flag; ``--config FILE.yaml`` sets defaults that
flags override (TRL's parser). Examples::

    agentgym-rl trajectories --env alfworld --data_dir generated --output runs/traj
    agentgym-rl sft --model tiny --dataset runs/traj --output_dir runs/sft --num_train_epochs 3
    agentgym-rl train --model runs/sft --env alfworld --data_dir generated --output_dir runs/rl

The model folder gets the dataset's ``prompt_config.json``, which ``train`` and
``leaderboard`` read, so the cloned model is prompted as it was trained.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from agentgym_rl.cli_args import make_passthrough_parser, with_default_output_dir
from trainers.checkpoints import MODEL_HELP

#: `agentgym-rl sft FLAGS` hands FLAGS to this module's own (TRL) parser unparsed.
PASSTHROUGH = True


@dataclass
class SFTScriptArguments:
    """Arguments of ``agentgym-rl sft`` beside the SFT config."""

    model: str = field(
        default="tiny",
        metadata={"help": MODEL_HELP},
    )
    dataset: str | None = field(
        default=None, metadata={"help": "Folder written by `agentgym-rl trajectories` (required)."}
    )


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl sft``: its flags are parsed by TRL's parser in :func:`main`."""
    return make_passthrough_parser(
        "sft",
        "Supervised warm start on expert trajectories (all AgentSFTConfig fields are flags).",
        subparsers,
        prog,
    )


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl sft``; returns the exit code."""
    import sys

    from trl import TrlParser

    from trainers.checkpoints import model_path
    from trainers.sft import AgentSFTConfig, run_sft

    argv = list(sys.argv[1:] if argv is None else argv)
    trl_parser = TrlParser((SFTScriptArguments, AgentSFTConfig), prog="agentgym-rl sft")
    argv = with_default_output_dir(argv, "runs/sft")
    script_args, config = trl_parser.parse_args_and_config(argv)
    if not script_args.dataset:
        trl_parser.error("--dataset DIR is required (make one with `agentgym-rl trajectories --output DIR`)")
    try:
        summary = run_sft(model_path(script_args.model), script_args.dataset, config)
    except (FileNotFoundError, ValueError) as error:
        trl_parser.error(str(error))
    print(
        f"\nSFT: {summary['examples']} examples, final train loss {summary['train_loss']:.4f}; "
        f"model in {summary['output_dir']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

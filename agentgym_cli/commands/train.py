"""``agentgym-rl train``: train an LLM agent with a step-level estimator, then evaluate it.

Every field of :class:`trainers.StepGRPOConfig` (and so of ``trl.GRPOConfig`` and
``transformers.TrainingArguments``) is a flag; ``--config FILE.yaml`` sets defaults that
flags override (TRL's parser). Examples::

    agentgym-rl train --env alfworld --estimator gigpo --model Qwen/Qwen2.5-1.5B-Instruct \\
        --output_dir runs/gigpo --num_tasks 16 --group_size 8 --learning_rate 1e-6 --beta 0.01
    agentgym-rl train --model tiny --env alfworld --data_dir generated --max_steps 2   # offline smoke run

``--model tiny`` builds (once) the tiny random-init Qwen2 with an offline tokenizer.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.cli_args import make_passthrough_parser, with_default_output_dir
from trainers.checkpoints import adopt_prompt_config, model_path

#: `agentgym-rl train FLAGS` hands FLAGS to this module's own (TRL) parser unparsed.
PASSTHROUGH = True


@dataclass
class TrainScriptArguments:
    """Arguments of ``agentgym-rl train`` beside the trainer config."""

    env: str | None = field(
        default=None, metadata={"help": "Env: alfworld, webshop, bandit or a registered id (sets env_id)."}
    )
    model: str = field(
        default="tiny",
        metadata={"help": "HF model path (or id in the local cache); 'tiny' for the offline test model."},
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "ALFWorld data folder ('generated' for the embedded games); goes into env_kwargs."},
    )
    eval_split: str | None = field(
        default="valid_unseen", metadata={"help": "Split evaluated after training ('none' to skip)."}
    )
    eval_tasks: int = field(
        default=8, metadata={"help": "Tasks evaluated after training (one sampled rollout each)."}
    )


def make_parser(
    subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``agentgym-rl train``: its flags are parsed by TRL's parser in :func:`main`."""
    return make_passthrough_parser(
        "train",
        "Train an LLM agent in a group env with a step-level estimator (all StepGRPOConfig fields are flags).",
        subparsers,
        prog,
    )


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``agentgym-rl train``; returns the exit code."""
    import sys

    from trl import TrlParser

    from trainers.config import StepGRPOConfig

    argv = list(sys.argv[1:] if argv is None else argv)
    trl_parser = TrlParser((TrainScriptArguments, StepGRPOConfig), prog="agentgym-rl train")
    argv = with_default_output_dir(argv, "runs/agentgym-rl")
    script_args, config = trl_parser.parse_args_and_config(argv)
    if script_args.env:
        from agentgym_rl.registration import resolve_env_id

        config.env_id = resolve_env_id(script_args.env)
    if script_args.data_dir:
        config.env_kwargs["data_dir"] = script_args.data_dir
    given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
    try:
        adopt_prompt_config(config, model_path(script_args.model), given)
    except ValueError as error:
        trl_parser.error(str(error))
    return run(script_args, config)


def run(script_args: TrainScriptArguments, config: object) -> int:
    """Train, save, evaluate; prints the evaluation and writes it beside the model."""
    from transformers import AutoTokenizer

    from trainers.trainer import StepGRPOTrainer

    path = model_path(script_args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    trainer = StepGRPOTrainer(model=path, args=config, processing_class=tokenizer)
    try:
        trainer.train()
        trainer.save_model(config.output_dir)
        tokenizer.save_pretrained(config.output_dir)
        if script_args.eval_split and script_args.eval_split != "none":
            metrics = trainer.evaluate_in_env(split=script_args.eval_split, num_tasks=script_args.eval_tasks)
            print(
                f"\nevaluation on {script_args.eval_split} ({script_args.eval_tasks} tasks, sampled as in training):"
            )
            for name, value in metrics.items():
                print(f"  {name:<28} {value:.3f}")
            Path(config.output_dir, "env_eval.json").write_text(json.dumps(metrics, indent=1))
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

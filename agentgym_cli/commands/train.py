"""``agentgym-rl train``: train an LLM agent with a step-level estimator, then evaluate it.

Every field of :class:`trainers.StepGRPOConfig` (and so of ``trl.GRPOConfig`` and
``transformers.TrainingArguments``) is a flag; ``--config FILE.yaml`` sets defaults that
flags override (TRL's parser). Examples::

    agentgym-rl train --env alfworld --estimator gigpo --model Qwen/Qwen2.5-1.5B-Instruct \\
        --output_dir runs/gigpo --num_tasks 16 --group_size 8 --learning_rate 1e-6 --beta 0.01
    agentgym-rl train --model tiny --env alfworld --data_dir generated --max_steps 2   # offline smoke run
    agentgym-rl train --estimator progpo_c --progpo_c_coverage_lambda 0.2 --progpo_c_base gigpo

``--model tiny`` builds (once) the tiny random-init Qwen2 with an offline tokenizer.

Estimator settings: each field of each registered estimator's config is a flag
``--<estimator>_<field>`` (``--gigpo_omega``, ``--spo3_alpha`` for ``3spo``), listed in
``--help`` in one group per estimator. They set the same fields as ``--estimator_kwargs``
(JSON); a field set both ways must have one value (else an error), and flags of an
estimator other than ``--estimator`` are an error. In a YAML config write
``gigpo_omega: 0.5`` or ``estimator_kwargs: {omega: 0.5}``, and the env as ``env_id:``
(``env:`` is TRL's mapping of environment variables; ``--env`` stays a flag alias).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.cli_args import add_prefixed_arguments, make_passthrough_parser, with_default_output_dir
from trainers.checkpoints import MODEL_HELP, adopt_prompt_config, model_path

#: `agentgym-rl train FLAGS` hands FLAGS to this module's own (TRL) parser unparsed.
PASSTHROUGH = True


@dataclass
class TrainScriptArguments:
    """Arguments of ``agentgym-rl train`` beside the trainer config (the env is ``--env`` / ``--env_id``)."""

    model: str = field(
        default="tiny",
        metadata={"help": MODEL_HELP},
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


def add_estimator_arguments(parser: argparse.ArgumentParser) -> dict[str, tuple[str, str]]:
    """One argument group per registered estimator: ``--<flag_prefix>_<field>`` for each config field.

    Returns:
        ``{dest: (estimator, field)}`` of every flag added.
    """
    from trainers.advantages import get_estimator, list_estimators

    flags: dict[str, tuple[str, str]] = {}
    for name in list_estimators():
        spec = get_estimator(name)
        config_cls = spec.config_cls
        group = parser.add_argument_group(
            f"estimator {name} (with --estimator {name})",
            f"Fields of {config_cls.__name__}, as --estimator_kwargs '{{\"<field>\": ...}}' sets them.",
        )
        for dest, field_name in add_prefixed_arguments(group, config_cls, spec.flag_prefix).items():
            flags[dest] = (name, field_name)
    return flags


def _same(a: Any, b: Any) -> bool:
    normal = [tuple(v) if isinstance(v, list) else v for v in (a, b)]
    return normal[0] == normal[1]


def apply_estimator_flags(config: Any, values: dict[str, Any], flags: dict[str, tuple[str, str]]) -> None:
    """Merge ``--<estimator>_<field>`` values into ``config.estimator_kwargs``, then check the result.

    Raises:
        ValueError: a flag of another estimator than ``config.estimator``, a field that the
            flag and ``estimator_kwargs`` set to different values, or a bad value.
    """
    from trainers.advantages import get_estimator

    prefix = get_estimator(config.estimator).flag_prefix
    other = sorted(dest for dest in values if flags[dest][0] != config.estimator)
    if other:
        owners = sorted({flags[dest][0] for dest in other})
        which = "a flag" if len(other) == 1 else "flags"
        raise ValueError(
            f"{', '.join('--' + d for d in other)}: {which} of estimator {' and '.join(map(repr, owners))}, but "
            f"--estimator is {config.estimator!r}: pass --estimator {owners[0]}, or drop "
            f"{'it' if len(other) == 1 else 'them'} ({config.estimator}'s flags are --{prefix}_<field>)"
        )
    for dest, value in values.items():
        field_name = flags[dest][1]
        if isinstance(value, list) and value == [None]:  # `--flag none` of a list field
            value = None
        if field_name in config.estimator_kwargs and not _same(config.estimator_kwargs[field_name], value):
            raise ValueError(
                f"--{dest} {value!r} and estimator_kwargs {{{field_name!r}: {config.estimator_kwargs[field_name]!r}}} "
                f"set {field_name} twice: keep one of them"
            )
        config.estimator_kwargs[field_name] = value
    config.make_estimator_config()  # the estimator config's own checks, with the flags in


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

    script_args, config = parse_args(list(sys.argv[1:] if argv is None else argv))
    return run(script_args, config)


def parse_args(argv: list[str]) -> tuple[TrainScriptArguments, Any]:
    """``argv`` (flags, ``--config``) as the script arguments and a checked ``StepGRPOConfig``.

    A bad value exits as argparse does (code 2, the message on stderr).
    """
    from trl import TrlParser

    from trainers.config import StepGRPOConfig

    trl_parser = TrlParser((TrainScriptArguments, StepGRPOConfig), prog="agentgym-rl train")
    flags = add_estimator_arguments(trl_parser)
    argv = with_default_output_dir(argv, "runs/agentgym-rl")
    yaml_settings = _yaml_settings(trl_parser, argv)
    try:
        script_args, config, *rest = trl_parser.parse_args_and_config(argv)
        # The estimator flags default to "not given": the namespace left over holds those passed (or set by YAML).
        apply_estimator_flags(config, vars(rest[0]) if rest else {}, flags)
    except ValueError as error:  # a config's __post_init__, an unknown YAML key, an estimator flag
        trl_parser.error(str(error))
    if ":" not in config.env_id:  # "module:Id" registers on import; other ids must be registered now
        import gymnasium as gym

        from agentgym_rl.registration import resolve_env_id

        if config.env_id not in gym.registry:
            try:
                resolve_env_id(config.env_id)
            except ValueError as error:
                trl_parser.error(f"--env_id: {error}")
    if script_args.data_dir:
        config.env_kwargs["data_dir"] = script_args.data_dir
    # Set on the command line or in the YAML: either wins over the model's prompt_config.json (with a warning)
    flags_given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
    given = flags_given | set(yaml_settings)
    try:
        adopt_prompt_config(config, model_path(script_args.model), given)
    except ValueError as error:
        trl_parser.error(str(error))
    return script_args, config


def _yaml_settings(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, Any]:
    """The ``--config`` YAML's settings ({} without one).

    An ``env:`` that is not a mapping meant the env: the parser exits saying how to set it.
    """
    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        return {}
    import yaml

    path = argv[argv.index("--config") + 1]
    try:
        with open(path) as handle:
            settings = yaml.safe_load(handle)
    except OSError:
        return {}  # TRL's parser reports the missing file
    if not isinstance(settings, dict):
        return {}
    if "env" in settings and not isinstance(settings["env"], dict):
        parser.error(
            f"env: {settings['env']!r} in {path}: TRL's parser reads a top-level `env:` as environment "
            f"variables (a mapping); set the env with `env_id: {settings['env']}`"
        )
    return settings


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

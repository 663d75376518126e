"""Supervised warm start: ``trl.SFTTrainer`` on expert trajectories (:mod:`trainers.trajectories`).

The loss covers the assistant reply only (TRL's completion-only masking of
prompt–completion data), and the trajectories' prompt settings are saved beside the
model as ``prompt_config.json``, so that ``agentgym-rl train`` and ``agentgym-rl
leaderboard`` prompt the model exactly as it was cloned.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl import SFTConfig, SFTTrainer

from trainers.lm_head import add_plain_label_head

__all__ = ["AgentSFTConfig", "AgentSFTTrainer", "run_sft"]


@dataclass
class AgentSFTConfig(SFTConfig):
    r"""``trl.SFTConfig`` for expert trajectories.

    Every ``SFTConfig`` (and ``TrainingArguments``) field applies; the defaults below
    differ from TRL's where an agent dataset needs it.

    > Parameters that control the data

    only_won (`bool`, *optional*, defaults to `False`):
        Keep only the steps of episodes the expert won.
    max_length (`int`, *optional*, defaults to `4096`):
        Longest example in tokens; a longer one would lose its reply to truncation, so it is
        an error rather than silently cut (see `run_sft`).
    completion_only_loss (`bool`, *optional*, defaults to `True`):
        Loss on the assistant reply only (the prompt tokens are masked).
    """

    only_won: bool = field(default=False, metadata={"help": "Train only on steps of episodes that were won."})
    max_length: int | None = field(
        default=4096, metadata={"help": "Longest example in tokens (longer ones are an error, not cut)."}
    )
    completion_only_loss: bool | None = field(
        default=True, metadata={"help": "Loss on the assistant reply only (prompt tokens masked)."}
    )
    # Typed as TrainingArguments' field: HfArgumentParser cannot convert a flag (nor this default) to `Any`.
    report_to: None | str | list[str] = field(
        default="none", metadata={"help": "Loggers (TRL's report_to): 'none', 'all' or integration names."}
    )

    def __post_init__(self) -> None:
        from trainers.config import _has_accelerator

        if self.bf16 is None and not self.fp16 and not _has_accelerator():
            # As StepGRPOConfig: transformers refuses bf16 on a CPU-only machine.
            self.bf16 = False
        super().__post_init__()


class AgentSFTTrainer(SFTTrainer):
    """``trl.SFTTrainer`` that scores only the labelled positions on CPU.

    TRL's fused LM head runs over every position in torch tiles off CUDA/XPU; on CPU this
    trainer's model scores the labelled positions in one pass instead
    (:func:`trainers.lm_head.add_plain_label_head`): the same loss, gradient and metrics up to
    float rounding, and on the bench's 2-layer tiny model 1.7× the steps a second with the loss on
    every token, 2.3× with the loss on the reply only (2 CPU cores).
    Everywhere else it is ``SFTTrainer`` unchanged.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        add_plain_label_head(self.model)


def _check_lengths(dataset: Any, tokenizer: Any, max_length: int | None) -> int:
    """The longest example in tokens; raises when one would be cut (its reply lost)."""
    longest = 0
    for example in dataset.select(range(min(len(dataset), 2000))):
        text = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=False)
        longest = max(longest, len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    if max_length is not None and longest > max_length:
        raise ValueError(
            f"an example has {longest} tokens > max_length {max_length}: its reply would be truncated; "
            f"raise --max_length or lower the dataset's --history_window"
        )
    return longest


def run_sft(model: str, dataset_dir: str, config: AgentSFTConfig, progress: bool = True) -> dict[str, Any]:
    """Clone the expert: SFT on a trajectory dataset, save the model, tokenizer and prompt config.

    Args:
        model: A model folder or id (``tiny`` is resolved by the CLI).
        dataset_dir: A folder written by ``agentgym-rl trajectories``.
        config: The SFT settings (``output_dir`` receives the model).
        progress: Show TRL's progress bar.

    Returns:
        ``{"train_loss", "examples", "longest_tokens", "output_dir"}``.
    """
    from transformers import AutoTokenizer

    from trainers.trainer import PROMPT_CONFIG_FILE
    from trainers.trajectories import load_trajectories

    dataset, meta = load_trajectories(dataset_dir)
    if config.only_won:
        dataset = dataset.filter(lambda won: won, input_columns="won")
    if len(dataset) == 0:
        raise ValueError(f"{dataset_dir} has no examples to train on (only_won={config.only_won})")
    dataset = dataset.select_columns(["prompt", "completion"])
    tokenizer = AutoTokenizer.from_pretrained(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    longest = _check_lengths(dataset, tokenizer, config.max_length)
    config.disable_tqdm = not progress
    trainer = AgentSFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    result = trainer.train()
    trainer.save_model(config.output_dir)
    tokenizer.save_pretrained(config.output_dir)
    prompt_config = dict(meta["prompt_config"])
    Path(config.output_dir, PROMPT_CONFIG_FILE).write_text(json.dumps(prompt_config, indent=1))
    summary = {
        "train_loss": float(result.training_loss),
        "examples": len(dataset),
        "longest_tokens": longest,
        "output_dir": str(config.output_dir),
        "dataset": os.fspath(dataset_dir),
        "env_id": meta["env_id"],
    }
    Path(config.output_dir, "sft_summary.json").write_text(json.dumps(summary, indent=1))
    return summary

"""A plain LM head for CPU runs, where TRL's fused head scores every position.

TRL 1.16 scores tokens through a fused LM head (``trl.trainer.utils.add_fused_lm_head``).
Where its Triton kernel runs (CUDA, XPU) it projects only the positions it needs; elsewhere
it runs the head, a log-softmax and its extra outputs over the vocabulary at *every*
position in torch tiles, and masks the unused ones afterwards. On CPU that is most of a
small model's step: GRPO's prompts are 20× longer than its replies, and SFT's tiles took
about 40% of the bench's tiny-model SFT step even with the loss on every token.

For a plain transformers model whose logits are the head's output as is, the functions
here run the backbone, then the head on the scored positions only, with one log-softmax:
the same values as TRL's head (tested), in a fraction of the time. Every other case (GPU,
PEFT, vision-language models, scaled or capped logits) keeps TRL's path.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

__all__ = ["add_plain_label_head", "completion_logps", "plain_head_applies"]

#: Text-config fields by which a model scales or caps its logits; TRL's fused head applies them, ours does not.
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def plain_head_applies(model: Any, device: torch.device, cast_lm_head_to_fp32: bool = False) -> bool:
    """Whether the plain head may stand in for TRL's fused head on ``model`` at ``device``.

    Only plain (unwrapped, non-PEFT, text-only) transformers models on CPU whose logits are
    the head's output as is.
    """
    from transformers import PreTrainedModel

    if device.type != "cpu" or cast_lm_head_to_fp32 or not isinstance(model, PreTrainedModel):
        return False
    if getattr(model, "peft_config", None):
        return False
    text_config = model.config.get_text_config()
    if text_config is not model.config:  # vision-language models: leave their inputs to TRL
        return False
    return all(getattr(text_config, name, None) is None for name in _LOGIT_TRANSFORMS)


def completion_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    keep: int,
    temperature: float,
    entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (and entropies) of the last ``keep`` tokens, the LM head run on those positions only.

    Same values as TRL's fused head in ``GRPOTrainer``: logits divided by ``temperature``,
    positions whose attention mask is 0 set to 0.
    """
    hidden = model.base_model(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False
    ).last_hidden_state
    logits = model.get_output_embeddings()(hidden[:, -keep - 1 : -1])
    logits = (
        logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
    )  # float32 at least, as TRL
    log_probs = logits.log_softmax(-1)
    padding = attention_mask[:, -keep:] == 0
    logps = log_probs.gather(-1, input_ids[:, -keep:].unsqueeze(-1)).squeeze(-1).masked_fill(padding, 0.0)
    entropies = -(log_probs.exp() * log_probs).sum(-1).masked_fill(padding, 0.0) if entropy else None
    return logps, entropies


def add_plain_label_head(model: Any) -> bool:
    """Make ``model(..., labels=..., fused_lm_head=True)`` score only the labelled positions, in one pass.

    Call it after ``trl.SFTTrainer`` has added its fused head (it wraps that forward). The
    call returns what TRL's returns (``FusedCausalLMOutput`` with ``log_probs``, ``entropy``,
    ``is_top1``, ``label_mask`` and the loss), so ``SFTTrainer.compute_loss`` and its metrics
    are unchanged; calls it does not cover (no labels, pre-shifted labels, MoE router
    outputs) go to TRL's head. It is added only to a model on CPU.

    Returns:
        Whether the head was added (:func:`plain_head_applies` at the model's device).
    """
    if not plain_head_applies(model, model.device):
        return False
    from trl.trainer.utils import FusedCausalLMOutput

    fused_forward = model.forward
    text_config = model.config.get_text_config()

    @functools.wraps(type(model).forward)  # generate() validates its kwargs against this signature
    def plain_forward(
        self: Any,
        *args: Any,
        fused_lm_head: bool = False,
        labels: torch.Tensor | None = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        covered = (
            fused_lm_head
            and labels is not None
            and not args
            and "shift_labels" not in kwargs
            and not kwargs.get("output_router_logits", getattr(text_config, "output_router_logits", False))
        )
        if not covered:
            return fused_forward(
                *args,
                fused_lm_head=fused_lm_head,
                labels=labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(**kwargs).last_hidden_state[:, :-1]
        labels = labels[:, 1:]
        mask = labels != -100
        targets = labels[mask]
        logits = self.get_output_embeddings()(hidden[mask])
        log_probs_all = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(-1)
        picked = log_probs_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():  # metrics only, as TRL's (it detaches them too)
            entropy = -(log_probs_all.exp() * log_probs_all).sum(-1)
            is_top1 = log_probs_all.argmax(-1) == targets
        # Scattered back to (batch, positions) with zeros elsewhere, as TRL returns them; masked_scatter
        # keeps an all-masked batch connected to the model (a differentiable zero).
        log_probs = picked.new_zeros(mask.shape).masked_scatter(mask, picked)
        loss = -log_probs.sum() / (
            mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        )
        return FusedCausalLMOutput(
            loss=loss,
            log_probs=log_probs,
            entropy=entropy.new_zeros(mask.shape).masked_scatter(mask, entropy),
            is_top1=is_top1.new_zeros(mask.shape).masked_scatter(mask, is_top1),
            label_mask=mask,
        )

    model.forward = types.MethodType(plain_forward, model)
    return True

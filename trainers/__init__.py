"""Trainers: step batches, step-level advantage estimators, rollouts and the TRL trainer.

Names are imported lazily on first access, so ``import trainers`` stays cheap (no
torch import until an estimator is used).
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> module that defines it.
_EXPORTS: dict[str, str] = {
    # Step rows
    "RECORD_FIELDS": "trainers.step_batch",
    "StepBatch": "trainers.step_batch",
    # Estimator registry
    "EstimatorSpec": "trainers.advantages",
    "compute_advantages": "trainers.advantages",
    "get_estimator": "trainers.advantages",
    "list_estimators": "trainers.advantages",
    "make_config": "trainers.advantages",
    "make_state": "trainers.advantages",
    "register_estimator": "trainers.advantages",
    # Estimator configs
    "EstimatorConfig": "trainers.estimator_configs",
    "GRPOEstimatorConfig": "trainers.estimator_configs",
    "GiGPOEstimatorConfig": "trainers.estimator_configs",
    "ProGPOCEstimatorConfig": "trainers.estimator_configs",
    "ProGPOREstimatorConfig": "trainers.estimator_configs",
    "SPO3EstimatorConfig": "trainers.estimator_configs",
    # Cross-iteration state and 3SPO helpers
    "ProGPORState": "trainers.estimators.progpo_r",
    "SPO3State": "trainers.estimators.spo3",
    "adaptive_group_sizes": "trainers.estimators.spo3",
    "spo3_step_rewards": "trainers.estimators.spo3",
    # Rollouts, prompts and the TRL trainer
    "PromptConfig": "trainers.prompting",
    "RolloutCollector": "trainers.rollout",
    "BranchingCollector": "trainers.branching",
    "PostStepCollector": "trainers.post_step",
    "StepGRPOConfig": "trainers.config",
    "StepGRPOTrainer": "trainers.trainer",
    # Offline models
    "build_tiny_qwen2": "trainers.tiny_models",
    "load_smollm2": "trainers.tiny_models",
    "smollm2_path": "trainers.tiny_models",
    "tiny_qwen2_path": "trainers.tiny_models",
    # Keys for the optional StepBatch fields
    "semantic_state_key": "trainers.semantic",
    "similarity_anchor_keys": "trainers.semantic",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

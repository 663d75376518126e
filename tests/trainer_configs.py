"""The small CPU trainer config that every real-TRL-step test starts from (each test sets what it is about)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def small_step_config(output_dir: str | Path, **overrides: Any) -> Any:
    """A ``StepGRPOConfig`` for one quick CPU step on generated ALFWorld games, with ``overrides``."""
    from trainers.config import StepGRPOConfig

    values: dict[str, Any] = dict(
        output_dir=str(output_dir),
        env_id="alfworld",
        env_kwargs={"data_dir": "generated"},
        env_workers=1,
        per_device_train_batch_size=4,
        max_steps=1,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    values.update(overrides)
    return StepGRPOConfig(**values)

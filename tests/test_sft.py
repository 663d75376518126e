"""Expert trajectories and the SFT warm start, on real envs, TRL and the tiny offline Qwen2.

What must hold for a cloned model to be worth RL-training:

- the dataset's prompts are the trainer's prompts, byte for byte (replayed through the real
  ``RolloutCollector`` in a real ``GroupVectorEnv``);
- the loss sees the expert's reply and nothing of the prompt (TRL's data preparation);
- SFT on a handful of steps memorises them (greedy decoding gives the expert's actions back);
- ``agentgym-rl train`` from the SFT folder prompts as the model was trained, and
  refuses a model cloned on another env;
- bad inputs fail with the command that fixes them; collection resumes.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from agentgym_rl import GroupVectorEnv
from trainers.prompting import PromptConfig, env_kind_of, parse_action
from trainers.rollout import GeneratedReply, RolloutCollector
from trainers.tiny_models import tiny_qwen2_path
from trainers.trajectories import (
    JSONL_FILE,
    TrajectoryConfig,
    collect_trajectories,
    expert_reply,
    load_trajectories,
)

# The walkthrough expert: its short, fixed episodes are what the known answers below count.
ALFWORLD = dict(env="alfworld", data_dir="generated", split="train", expert="walkthrough")
#: Every prompt setting away from its default, so that a setting lost on the way shows.
SYSTEM_PROMPT = "You are a careful household robot."


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # Two intra-op threads on a 2-core machine shared with other jobs spin against each other
    # (30x slower steps of the tiny model); one thread keeps SFT at ~0.1 s a step.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_path() -> str:
    return str(tiny_qwen2_path())


def _collect(folder: Path, **settings) -> Path:
    return collect_trajectories(TrajectoryConfig(output=str(folder), **settings), progress=False)


def _episodes(dataset) -> dict[int, list[dict]]:
    """The dataset's examples by episode, in step order."""
    by_episode: dict[int, list[dict]] = {}
    for example in dataset:
        by_episode.setdefault(example["episode"], []).append(example)
    return {e: sorted(rows, key=lambda r: r["step"]) for e, rows in sorted(by_episode.items())}


def _episode_seed(seed: int, episode: int) -> int:
    # collect_trajectories resets episode `e` with the first draw of default_rng([seed, e]); the
    # collector's reset(seed=s) gives a one-task group seed s. (ALFWorld's resets are the same for
    # any seed, WebShop's are not: the replay matches seeds anyway.)
    return int(np.random.default_rng([seed, episode]).integers(2**31 - 1))


# --------------------------------------------------------------------------------------------
# 1. The dataset's prompts are the trainer's
# --------------------------------------------------------------------------------------------

REPLAY_STEPS = 8  # ALFWorld episodes cut at 8 steps: some won, some truncated


@pytest.fixture(scope="module")
def alfworld_expert(tmp_path_factory) -> Path:
    """Expert only (epsilon 0): 3 episodes, a system prompt and the papers' reply format."""
    return _collect(
        tmp_path_factory.mktemp("traj") / "expert", **ALFWORLD, episodes="3", epsilon=0.0, seed=0,
        max_env_steps=REPLAY_STEPS, history_window=2, system_prompt=SYSTEM_PROMPT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def alfworld_noisy(tmp_path_factory) -> Path:
    """30% random steps; a history of 3 shows every random action in a later prompt."""
    return _collect(
        tmp_path_factory.mktemp("traj") / "noisy", **ALFWORLD, episodes="4", epsilon=0.3, seed=1,
        max_env_steps=REPLAY_STEPS, history_window=3, action_format="action_tag",
    )  # fmt: skip


@pytest.fixture(scope="module")
def replay_envs():
    """The trainer's env: one slot, same data and step limit as the trajectories."""
    envs = GroupVectorEnv(
        "AgentGymRL/ALFWorld-v0", num_tasks=1, group_size=1, workers=1, split="train", data_dir="generated",
        max_episode_steps=REPLAY_STEPS,
    )  # fmt: skip
    yield envs
    envs.close()


def _trainer_prompt_config(meta: dict) -> PromptConfig:
    """The PromptConfig the trainer builds from its config fields (StepGRPOTrainer.__init__)."""
    identity = meta["identity"]
    return PromptConfig(
        env_kind=env_kind_of(meta["env_id"]),
        history_window=identity["history_window"],
        system_prompt=identity["system_prompt"],
        action_format=identity["action_format"],
    )


def _replay(envs, config: PromptConfig, examples: list[dict], seed: int, episode: int, full: bool):
    """Play an episode's actions through the trainer's collector; returns its rollout.

    The actions are the examples' (expert steps) and, for the random steps that are no
    example, the ones the later prompts' history shows.
    """
    actions = {ex["step"]: ex["action"] for ex in examples}
    for ex in examples:
        for number, action in re.findall(r", Action (\d+): '([^'\n]*)'\]", ex["prompt"][-1]["content"]):
            assert actions.setdefault(int(number) - 1, action) == action
    last = max(actions)
    assert set(actions) == set(range(last + 1)), "a run of random steps longer than the history window"
    asked: list[list[dict]] = []

    def generate(conversations):
        asked.extend(conversations)  # one slot: one conversation a step
        reply = expert_reply(actions[len(asked) - 1], config)
        return [GeneratedReply(prompt_ids=[], completion_ids=[], text=reply)]

    collector = RolloutCollector(envs, config)
    rollout = collector.collect(
        generate,
        [examples[0]["task_id"]],
        seed=_episode_seed(seed, episode),
        max_steps=None if full else last + 1,
    )
    return rollout, last


def test_dataset_prompts_are_the_trainers_prompts(alfworld_expert, replay_envs):
    dataset, meta = load_trajectories(alfworld_expert)
    config = _trainer_prompt_config(meta)
    episodes = _episodes(dataset)
    assert len(episodes) == 3 and meta["episodes_done"] == 3 and meta["rows"] == len(dataset)
    assert 0 < meta["wins"] < 3, "want both a won and a truncated episode in the sample"
    for episode, examples in episodes.items():
        # epsilon 0: every step is an example, numbered from 0
        assert [ex["step"] for ex in examples] == list(range(len(examples)))
        rollout, _ = _replay(replay_envs, config, examples, seed=0, episode=episode, full=True)
        # the same episode: as long, same outcome
        (result,) = rollout.episodes
        assert result.length == len(examples) == len(rollout.rows)
        assert result.won == examples[0]["won"] and result.task_id == examples[0]["task_id"]
        for row, example in zip(rollout.rows, examples, strict=True):
            assert row.record["step"] == example["step"]
            assert row.messages == example["prompt"]  # byte-equal chat messages
            assert row.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
            assert row.action == example["action"] and row.format_valid
            assert example["completion"] == [{"role": "assistant", "content": row.completion}]
    # the history window shows (step >= 2: two past pairs, numbered from the episode's start)
    late = next(ex for ex in dataset if ex["step"] == 3)["prompt"][-1]["content"]
    assert "[Observation 2: " in late and "[Observation 3: " in late and "[Observation 1: " not in late


def test_random_steps_are_no_examples_and_prompts_still_match(alfworld_noisy, replay_envs):
    dataset, meta = load_trajectories(alfworld_noisy)
    config = _trainer_prompt_config(meta)
    skipped = 0
    for episode, examples in _episodes(dataset).items():
        rollout, last = _replay(replay_envs, config, examples, seed=1, episode=episode, full=False)
        present = {ex["step"] for ex in examples}
        skipped += last + 1 - len(present)
        rows = {row.record["step"]: row for row in rollout.rows}
        assert sorted(rows) == list(range(last + 1))
        for example in examples:
            # the prompt after random steps shows them in its history, as the trainer's does
            assert rows[example["step"]].messages == example["prompt"]
            assert rows[example["step"]].action == example["action"]
            assert example["completion"][0]["content"] == f"<action>{example['action']}</action>"
    assert skipped > 0, "epsilon 0.3 must have left some steps out"


# --------------------------------------------------------------------------------------------
# 2. The loss covers the reply only
# --------------------------------------------------------------------------------------------


def _labelled_text(trainer, tokenizer, count: int) -> list[tuple[str, str, str]]:
    """(text before, in and after the labelled span) of the collator's batch of ``count`` examples."""
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(count)])
    spans = []
    for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["attention_mask"], strict=True):
        ids, labels = ids[mask.bool()], labels[mask.bool()]
        kept = torch.nonzero(labels != -100).flatten()
        start, end = int(kept[0]), int(kept[-1]) + 1
        assert torch.equal(kept, torch.arange(start, end)), "one contiguous labelled span"
        assert torch.equal(labels[kept], ids[kept])
        spans.append(
            tuple(tokenizer.decode(ids[a:b]) for a, b in ((0, start), (start, end), (end, len(ids))))
        )
    return spans


def test_labels_mask_everything_but_the_reply(alfworld_expert, model_path, tmp_path):
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from trainers.sft import AgentSFTConfig

    dataset, _ = load_trajectories(alfworld_expert)
    dataset = dataset.select_columns(["prompt", "completion"]).select(range(4))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    args = AgentSFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, use_cpu=True)
    assert args.completion_only_loss and not args.assistant_only_loss
    trainer = SFTTrainer(model=model_path, args=args, train_dataset=dataset, processing_class=tokenizer)
    for (before, labelled, after), example in zip(
        _labelled_text(trainer, tokenizer, 4), dataset, strict=True
    ):
        reply = example["completion"][0]["content"]
        # the context is the prompt exactly as the trainer and the leaderboard render it
        assert before == tokenizer.apply_chat_template(
            example["prompt"], add_generation_prompt=True, tokenize=False
        )
        # TRL's completion mask covers all the template writes after the prompt: the reply, <|im_end|>
        # and the turn's closing newline (ChatML's, never generated: decoding stops at <|im_end|>)
        assert (labelled, after) == (reply + "<|im_end|>\n", "")

    # The same steps as whole conversations with assistant_only_loss: the template's {% generation %}
    # markers select the reply and <|im_end|>, nothing else.
    messages = dataset.map(
        lambda prompt, completion: {"messages": prompt + completion},
        input_columns=["prompt", "completion"],
        remove_columns=["prompt", "completion"],
    )
    args = AgentSFTConfig(
        output_dir=str(tmp_path / "sft-messages"), max_steps=1, use_cpu=True, assistant_only_loss=True
    )
    trainer = SFTTrainer(model=model_path, args=args, train_dataset=messages, processing_class=tokenizer)
    for (before, labelled, after), example in zip(
        _labelled_text(trainer, tokenizer, 4), dataset, strict=True
    ):
        assert (labelled, after) == (example["completion"][0]["content"] + "<|im_end|>", "\n")
        assert before == tokenizer.apply_chat_template(
            example["prompt"], add_generation_prompt=True, tokenize=False
        )


@pytest.mark.parametrize("completion_only", [True, False])
def test_cpu_label_head_gives_trls_loss_gradient_and_metrics(
    alfworld_expert, model_path, tmp_path, completion_only
):
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from trainers.sft import AgentSFTConfig, AgentSFTTrainer

    dataset, _ = load_trajectories(alfworld_expert)
    dataset = dataset.select_columns(["prompt", "completion"]).select(range(6))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    results = []
    for trainer_class in (SFTTrainer, AgentSFTTrainer):
        args = AgentSFTConfig(
            output_dir=str(tmp_path / trainer_class.__name__), max_steps=1, use_cpu=True,
            per_device_train_batch_size=6, completion_only_loss=completion_only,
        )  # fmt: skip
        trainer = trainer_class(
            model=model_path, args=args, train_dataset=dataset, processing_class=tokenizer
        )
        batch = next(iter(trainer.get_train_dataloader()))
        trainer.model.train()  # the metrics of a training step
        masked_tokens = (batch["labels"] == -100) & (batch["attention_mask"] == 1)
        assert masked_tokens.any() == completion_only  # the prompts masked, or every token scored
        loss = trainer.compute_loss(trainer.model, dict(batch))
        loss.backward()
        gradient = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
        metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
        results.append((loss.detach(), gradient, metrics))
    (trl_loss, trl_gradient, trl_metrics), (loss, gradient, metrics) = results
    assert loss.item() > 1.0  # a random-init model: far from zero, so a missing term would show
    torch.testing.assert_close(loss, trl_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gradient, trl_gradient, rtol=1e-4, atol=1e-6)
    assert metrics.keys() == trl_metrics.keys() >= {"entropy", "mean_token_accuracy", "num_tokens"}
    assert metrics == pytest.approx(trl_metrics, rel=1e-5)


# --------------------------------------------------------------------------------------------
# 3. SFT memorises a tiny dataset
# --------------------------------------------------------------------------------------------

SFT_STEPS = 100  # 10 examples, batches of 5: 50 epochs at lr 5e-3 make the tiny model recite them


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, model_path) -> dict:
    """One SFT run on 10 ALFWorld expert steps (action tags, one past step in the prompt)."""
    from trainers.sft import AgentSFTConfig, run_sft

    root = tmp_path_factory.mktemp("sft")
    data = _collect(
        root / "data", **ALFWORLD, episodes="2", epsilon=0.0, seed=0, max_env_steps=6,
        history_window=1, action_format="action_tag",
    )  # fmt: skip
    config = AgentSFTConfig(
        output_dir=str(root / "model"),
        max_steps=SFT_STEPS,
        learning_rate=5e-3,  # a random-init tiny model: large steps, or it needs thousands
        per_device_train_batch_size=5,
        logging_steps=1,
        save_strategy="steps",  # the one checkpoint keeps trainer_state.json (the loss curve)
        save_steps=SFT_STEPS,
        gradient_checkpointing=False,  # TRL's default; recomputation only slows a tiny model down
        use_cpu=True,
        seed=0,
    )
    summary = run_sft(model_path, str(data), config, progress=False)
    return {"data": data, "model": Path(config.output_dir), "summary": summary}


def test_sft_overfits_and_reproduces_the_expert(sft_run):
    from benchmarks.leaderboard.hf_policy import HFPolicy

    dataset, meta = load_trajectories(sft_run["data"])
    folder, summary = sft_run["model"], sft_run["summary"]
    assert summary["examples"] == len(dataset) == 10 and summary["env_id"] == "AgentGymRL/ALFWorld-v0"
    assert json.loads((folder / "prompt_config.json").read_text()) == meta["prompt_config"]
    state = json.loads((folder / f"checkpoint-{SFT_STEPS}" / "trainer_state.json").read_text())
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == SFT_STEPS
    assert losses[-1] < losses[0] / 10, f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"

    # The leaderboard's agent on the SFT folder: prompt settings from its prompt_config.json.
    policy = HFPolicy(str(folder), env_kind="alfworld", max_new_tokens=24, device="cpu")
    assert (policy.prompt_config.action_format, policy.prompt_config.history_window) == ("action_tag", 1)
    texts = [policy._render(example["prompt"]) for example in dataset]
    replies = policy._generate(texts)  # greedy, one left-padded batch
    exact = 0
    for reply, example in zip(replies, dataset, strict=True):
        action, valid = parse_action(reply, policy.prompt_config)
        assert valid, reply  # the format is learnt on every step
        exact += reply == example["completion"][0]["content"] and action == example["action"]
    assert exact >= 8, f"{exact}/10 replies are the expert's: {replies}"


def test_sft_command_trains_and_saves_the_prompt_config(sft_run, tmp_path, capsys):
    from agentgym_cli.main import main

    out = tmp_path / "cli-sft"
    code = main(
        ["sft", "--model", "tiny", "--dataset", str(sft_run["data"]), "--output_dir", str(out),
         "--max_steps", "2", "--per_device_train_batch_size", "5", "--gradient_checkpointing", "False",
         "--use_cpu", "True", "--disable_tqdm", "True"]
    )  # fmt: skip
    assert code == 0
    assert "SFT: 10 examples" in capsys.readouterr().out
    _, meta = load_trajectories(sft_run["data"])
    assert json.loads((out / "prompt_config.json").read_text()) == meta["prompt_config"]
    assert json.loads((out / "sft_summary.json").read_text())["examples"] == 10
    assert (out / "model.safetensors").is_file() and (out / "tokenizer_config.json").is_file()


# --------------------------------------------------------------------------------------------
# 4. RL from the SFT folder prompts as the model was trained
# --------------------------------------------------------------------------------------------


def _rl_config(tmp_path, **overrides):
    from trainer_configs import small_step_config

    values = dict(
        num_tasks=1,
        group_size=2,
        max_env_steps=2,  # plumbing, not score
        max_completion_length=16,  # an action tag and an action
        learning_rate=1e-3,
    )
    values.update(overrides)
    return small_step_config(tmp_path / "rl", **values)


def test_rl_from_an_sft_folder_adopts_its_prompt_config(sft_run, tmp_path):
    from transformers import AutoTokenizer

    from trainers.checkpoints import adopt_prompt_config
    from trainers.trainer import StepGRPOTrainer

    folder = str(sft_run["model"])
    # nothing given on the command line: the model's settings
    config = _rl_config(tmp_path)
    assert (config.action_format, config.history_window) == ("think_action", 2)  # the defaults differ
    saved = adopt_prompt_config(config, folder, given=set())
    assert saved["env_kind"] == "alfworld"
    assert (config.action_format, config.history_window, config.system_prompt) == ("action_tag", 1, None)

    # a flag that contradicts the model wins, with a warning naming it; the others are adopted
    given = _rl_config(tmp_path, history_window=3)
    with pytest.warns(UserWarning, match="history_window"):
        adopt_prompt_config(given, folder, given={"history_window"})
    assert (given.history_window, given.action_format) == (3, "action_tag")
    # a flag that agrees with the model: no warning
    agreeing = _rl_config(tmp_path, action_format="action_tag")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adopt_prompt_config(agreeing, folder, given={"action_format"})
    # a base model (no prompt_config.json) leaves the config alone
    assert adopt_prompt_config(_rl_config(tmp_path), str(tiny_qwen2_path()), given=set()) is None

    # a real RL step from the SFT folder, saved: the adopted prompt settings travel on
    trainer = StepGRPOTrainer(
        model=folder, args=config, processing_class=AutoTokenizer.from_pretrained(folder)
    )
    try:
        trainer.train()
        assert (
            trainer.prompt_config.action_format == "action_tag" and trainer.prompt_config.history_window == 1
        )
        assert trainer.last_rollout.rows
        out = tmp_path / "rl-model"
        trainer.save_model(str(out))
    finally:
        trainer.close()
    written = json.loads((out / "prompt_config.json").read_text())
    assert (written["env_kind"], written["action_format"], written["history_window"]) == (
        "alfworld",
        "action_tag",
        1,
    )


# --------------------------------------------------------------------------------------------
# 5. Bad input names its fix
# --------------------------------------------------------------------------------------------


def _cli_error(capsys, argv: list[str]) -> str:
    from agentgym_cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_missing_or_foreign_dataset_names_the_trajectories_command(tmp_path, capsys):
    from datasets import Dataset

    missing = tmp_path / "nowhere"
    foreign = tmp_path / "foreign"  # a saved HF dataset with a trajectories.json, but not our columns
    Dataset.from_dict({"text": ["hello"]}).save_to_disk(str(foreign))
    (foreign / "trajectories.json").write_text("{}")
    unrelated = tmp_path / "unrelated"  # some folder
    unrelated.mkdir()
    (unrelated / "notes.txt").write_text("not a dataset")

    with pytest.raises(FileNotFoundError, match="agentgym-rl trajectories"):
        load_trajectories(missing)
    with pytest.raises(FileNotFoundError, match="agentgym-rl trajectories"):
        load_trajectories(unrelated)
    with pytest.raises(ValueError, match=r"prompt.*agentgym-rl trajectories"):
        load_trajectories(foreign)
    for folder in (missing, unrelated, foreign):
        out = tmp_path / f"sft-{folder.name}"
        err = _cli_error(
            capsys, ["sft", "--dataset", str(folder), "--output_dir", str(out), "--use_cpu", "True"]
        )
        assert "agentgym-rl trajectories" in err and str(folder) in err
        assert not out.exists()
    assert "--dataset" in _cli_error(capsys, ["sft", "--output_dir", str(tmp_path / "x")])


def test_trajectories_cli_rejects_a_bad_epsilon(tmp_path, capsys):
    out = tmp_path / "traj"
    err = _cli_error(capsys, ["trajectories", "--env", "alfworld", "--epsilon", "1.5", "--output", str(out)])
    assert "epsilon" in err and "1.5" in err
    assert not out.exists()


def test_a_model_cloned_on_another_env_is_refused(sft_run, tmp_path, capsys):
    from benchmarks.leaderboard.hf_policy import prompt_config_for
    from trainers.checkpoints import adopt_prompt_config

    folder = str(sft_run["model"])
    with pytest.raises(
        ValueError, match="alfworld.*agentgym-rl trajectories --env webshop, then agentgym-rl sft"
    ):
        adopt_prompt_config(_rl_config(tmp_path, env_id="webshop"), folder, given=set())
    with pytest.raises(ValueError, match="alfworld"):
        prompt_config_for(folder, "webshop")
    assert prompt_config_for(folder, "alfworld").action_format == "action_tag"
    # the train command stops before building anything
    err = _cli_error(
        capsys, ["train", "--model", folder, "--env", "webshop", "--output_dir", str(tmp_path / "o")]
    )
    assert "alfworld" in err and "webshop" in err.lower()
    assert not (tmp_path / "o").exists()


def test_train_yaml_prompt_settings_win_over_the_models_with_a_warning(sft_run, tmp_path):
    """A prompt setting in ``--config`` counts as given, as a flag does: it is kept, and the mismatch is warned."""
    from agentgym_cli.commands.train import parse_args

    folder = str(sft_run["model"])  # cloned with history_window 1, action_tag
    config_file = tmp_path / "train.yaml"
    config_file.write_text("env_id: alfworld\nhistory_window: 3\n")
    argv = ["--model", folder, "--config", str(config_file), "--output_dir", str(tmp_path / "o")]
    with pytest.warns(UserWarning, match="--history_window 3 differs from the model's 1"):
        _, config = parse_args(argv)
    assert (config.history_window, config.action_format) == (3, "action_tag")  # the rest is the model's


# --------------------------------------------------------------------------------------------
# 6. WebShop: the expert recovers from random steps
# --------------------------------------------------------------------------------------------


def test_webshop_expert_recovers_and_every_completion_is_admissible(tmp_path):
    folder = _collect(
        tmp_path / "webshop", env="webshop", num_products=60, split="test", episodes="16", epsilon=0.3, seed=0,
        expert="walkthrough", max_env_steps=30,  # room to recover: 15 steps (the env's) can run out after many random ones
    )  # fmt: skip
    dataset, meta = load_trajectories(folder)
    assert meta["episodes_done"] == meta["wins"] == 16  # every episode won
    assert all(dataset["won"])
    config = PromptConfig(env_kind="webshop")
    skipped = 0
    for examples in _episodes(dataset).values():
        skipped += examples[-1]["step"] + 1 - len(examples)
        assert examples[-1]["action"] == "click[buy now]"  # the expert ends each episode
        for example in examples:
            text = example["prompt"][-1]["content"]
            listed = text.split("admissible actions of the current situation are: [\n", 1)[1].split(
                "\n].", 1
            )[0]
            admissible = [line.strip().rstrip(",").strip("'") for line in listed.split("\n")]
            action, valid = parse_action(example["completion"][0]["content"], config)
            assert valid and action == example["action"].lower()
            if action.startswith("search["):  # the search box is a template
                assert any(a.startswith("search[") for a in admissible), admissible
            else:
                assert action in admissible, (action, admissible)
    assert skipped > 0


# --------------------------------------------------------------------------------------------
# 7. Resuming
# --------------------------------------------------------------------------------------------


def _jsonl(folder: Path) -> list[str]:
    return (folder / JSONL_FILE).read_text().splitlines()


def test_collection_resumes_without_replaying(tmp_path):
    settings = dict(**ALFWORLD, epsilon=0.2, seed=5, max_env_steps=5)
    folder = tmp_path / "resumed"
    _collect(folder, episodes="2", **settings)
    first = _jsonl(folder)
    assert {json.loads(line)["episode"] for line in first} == {0, 1}
    # Mark a kept row: a replayed episode would be written afresh, a kept one stays as it is.
    marked = json.loads(first[0])
    marked["task_type"] = "MARKED"
    first[0] = json.dumps(marked)
    (folder / JSONL_FILE).write_text("".join(f"{line}\n" for line in first))

    _collect(folder, episodes="4", **settings)
    resumed = _jsonl(folder)
    assert resumed[: len(first)] == first
    assert {json.loads(line)["episode"] for line in resumed} == {0, 1, 2, 3}
    dataset, meta = load_trajectories(folder)
    assert meta["episodes_done"] == 4 and meta["rows"] == len(dataset) == len(resumed)
    assert dataset[0]["task_type"] == "MARKED"

    # the same data as one uninterrupted run (each episode draws from its own seed)
    fresh = _collect(tmp_path / "fresh", episodes="4", **settings)
    unmarked = [json.loads(line) for line in resumed]
    unmarked[0]["task_type"] = json.loads(_jsonl(fresh)[0])["task_type"]
    assert unmarked == [json.loads(line) for line in _jsonl(fresh)]

    # a crash mid-episode: the progress file says 3 done, a half-written line follows them
    done_3 = [line for line in resumed if json.loads(line)["episode"] < 3]
    (folder / JSONL_FILE).write_text("".join(f"{line}\n" for line in done_3) + '{"prompt": [{"ro')
    identity = json.loads((folder / "trajectories.json").read_text())["identity"]
    (folder / ".progress.json").write_text(json.dumps({"identity": identity, "episodes_done": 3, "wins": 0}))
    _collect(folder, episodes="4", **settings)
    assert _jsonl(folder) == resumed
    assert not (folder / ".progress.json").exists()

    # other settings into the same folder: refused, naming the way out
    with pytest.raises(ValueError, match="--overwrite"):
        _collect(folder, episodes="4", **{**settings, "epsilon": 0.5})
    assert _jsonl(folder) == resumed  # untouched
    _collect(folder, episodes="1", overwrite=True, **{**settings, "epsilon": 0.5})
    assert {json.loads(line)["episode"] for line in _jsonl(folder)} == {0}


def test_default_search_expert_wins_with_longer_episodes(tmp_path):
    settings = {**ALFWORLD, "expert": "search"}
    search = _collect(tmp_path / "search", **settings, episodes="3", epsilon=0.0, max_env_steps=30)
    walk = _collect(tmp_path / "walk", **ALFWORLD, episodes="3", epsilon=0.0, max_env_steps=30)
    (search_rows, search_meta), (walk_rows, walk_meta) = load_trajectories(search), load_trajectories(walk)
    assert search_meta["wins"] == walk_meta["wins"] == 3
    assert search_meta["identity"]["expert"] == "search" and TrajectoryConfig().expert == "search"
    # Same tasks (same seed): the search visits receptacles the walkthrough skips.
    assert sorted(set(search_rows["task_id"])) == sorted(set(walk_rows["task_id"]))
    assert len(search_rows) > len(walk_rows)


def test_random_search_expert_draws_its_places_and_is_alfworlds_only(tmp_path):
    rows, meta = load_trajectories(
        _collect(
            tmp_path / "rs",
            **{**ALFWORLD, "expert": "random_search"},
            episodes="3",
            epsilon=0.0,
            max_env_steps=30,
        )
    )
    assert meta["identity"]["expert"] == "random_search" and meta["wins"] >= 2
    ordered, _ = load_trajectories(
        _collect(
            tmp_path / "s", **{**ALFWORLD, "expert": "search"}, episodes="3", epsilon=0.0, max_env_steps=30
        )
    )
    assert list(rows["action"]) != list(ordered["action"])  # same tasks, other places
    with pytest.raises(ValueError, match="random_search"):
        TrajectoryConfig(env="webshop", expert="random_search")

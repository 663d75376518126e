"""The WebShop instruction expert: it shops from what the prompt shows, so a model can imitate it."""

from __future__ import annotations

import re
import statistics

import gymnasium as gym

import agentgym_rl  # noqa: F401  (registers the envs)
from agentgym_rl.webshop.instruction_expert import InstructionExpert
from trainers.prompting import PromptConfig, extract_task
from trainers.trajectories import TrajectoryConfig, collect_trajectories, load_trajectories


def test_it_clicks_the_named_options_in_page_order_then_buys():
    expert = InstructionExpert(
        "find me pillowcases with color: black, and size: king, price lower than 50.00 dollars"
    )
    page = ["click[back to search]", "click[< prev]", "click[description]", "click[buy now]",
            "click[full]", "click[king]", "click[beige]", "click[black]"]  # fmt: skip
    expert.observe("click[b0abc]", "")
    assert expert.act("", page) == "click[king]"  # page order, not the instruction's
    expert.observe("click[king]", "")
    assert expert.act("", page) == "click[black]"
    expert.observe("click[black]", "")
    assert expert.act("", page) == "click[buy now]"
    # After a step that is not its own (here another option), it starts again at the first.
    expert.observe("click[beige]", "")
    assert expert.act("", page) == "click[king]"
    # A sub-page goes back; a whole word only ("king" is not in "looking").
    assert expert.act("", ["click[back to search]", "click[< prev]"]) == "click[< prev]"
    assert not InstructionExpert("i am looking for a lamp").named("click[king]")


def test_it_scores_on_the_generated_shop():
    env = gym.make("AgentGymRL/WebShop-v0", split="test", num_products=60)
    scores = []
    try:
        for task in range(20):
            observation, info = env.reset(seed=task, options={"task": task})
            expert = InstructionExpert(extract_task(observation, PromptConfig(env_kind="webshop")))
            terminated = truncated = False
            while not (terminated or truncated):
                action = expert.act(observation, list(info["admissible_actions"]))
                observation, reward, terminated, truncated, info = env.step(action)
                expert.observe(action, observation)
            assert action == "click[buy now]"  # it always buys, within the env's 15 steps
            scores.append(float(info["score"]))
    finally:
        env.close()
    # The goal-seeking expert scores 1.0 on every goal; this one loses the goals whose product
    # BM25 does not rank first for the instruction.
    assert statistics.fmean(scores) > 0.7 and sum(s == 1.0 for s in scores) >= 10


def test_its_actions_are_a_function_of_the_prompt(tmp_path):
    """Rebuilt from the prompt's text alone (instruction, last action, admissible list), the expert
    chooses the dataset's action on every step, random steps included in the history."""
    folder = collect_trajectories(
        TrajectoryConfig(env="webshop", num_products=60, split="test", episodes="12", epsilon=0.3, seed=0,
                         history_window=1, action_format="action_tag", output=str(tmp_path / "ws"))
    )  # fmt: skip
    dataset, _ = load_trajectories(folder)
    assert len(dataset) > 40
    for example in dataset:
        text = example["prompt"][-1]["content"]
        instruction = text.split("Your task is to: ", 1)[1].split("\n", 1)[0]
        listed = text.split("admissible actions of the current situation are: [\n", 1)[1].split("\n].", 1)[0]
        admissible = [line.strip().rstrip(",").strip("'") for line in listed.split("\n")]
        expert = InstructionExpert(instruction)
        last = re.findall(r", Action \d+: '(.*)'\]\n", text)
        if last:
            expert.observe(last[-1], "")
        assert expert.act("", admissible) == example["action"], text

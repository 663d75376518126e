"""The searching ALFWorld expert: it wins the generated games from observations alone."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_rl  # noqa: F401  (registers the envs)
from agentgym_rl.alfworld.search_expert import SearchExpert, task_goal


def _play(
    env, task: str, max_steps: int = 40, order: str = "alphabetical", seed: int = 0
) -> tuple[bool, list[str]]:
    observation, info = env.reset(seed=seed, options={"task": task})
    expert, actions = SearchExpert(task, order=order, seed=seed), []
    for _ in range(max_steps):
        admissible = list(info["admissible_actions"])
        action = expert.act(observation, admissible)
        assert action in admissible, (task, action)
        actions.append(action)
        observation, _, terminated, truncated, info = env.step(action)
        expert.observe(action, observation)
        if terminated or truncated:
            break
    return bool(info["won"]), actions


@pytest.mark.parametrize("split", ["train", "valid_unseen"])
def test_search_expert_wins_every_generated_game(split):
    env = gym.make("AgentGymRL/ALFWorld-v0", split=split, data_dir="generated", max_episode_steps=40)
    try:
        results = {task: _play(env, task) for task in env.unwrapped.task_ids}
    finally:
        env.close()
    lost = [task for task, (won, _) in results.items() if not won]
    assert not lost
    # It searches: longer than the walkthrough, never longer than two sweeps of the room.
    lengths = [len(actions) for _, actions in results.values()]
    assert max(lengths) <= 30 and sum(lengths) / len(lengths) > 6


def test_search_order_and_decisions_follow_the_text():
    expert = SearchExpert("pick_clean_then_place_in_recep-Apple-None-Cabinet-12/trial_T1")
    places = ["go to cabinet 1", "go to countertop 1", "go to fridge 1", "go to sinkbasin 1"]
    assert expert.act("You are in the middle of a room.", [*places, "look"]) == "go to cabinet 1"
    expert.observe("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed.")
    here = [p for p in places if p != "go to cabinet 1"]
    assert expert.act("", [*here, "open cabinet 1"]) == "open cabinet 1"
    expert.observe("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing.")
    assert expert.act("", here) == "go to countertop 1"  # the next one in alphabetical order
    expert.observe(
        "go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 2."
    )
    # The target's kind holds the object: a transforming task still takes it.
    assert (
        expert.act("", ["take apple 2 from countertop 1", "go to cabinet 1"])
        == "take apple 2 from countertop 1"
    )
    expert.observe("take apple 2 from countertop 1", "You pick up the apple 2 from the countertop 1.")
    holding = ["examine apple 2", "go to cabinet 1", "go to fridge 1", "go to sinkbasin 1"]
    assert expert.act("", holding) == "go to sinkbasin 1"
    expert.observe("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.")
    assert (
        expert.act("", ["clean apple 2 with sinkbasin 1", "examine apple 2"])
        == "clean apple 2 with sinkbasin 1"
    )
    expert.observe("clean apple 2 with sinkbasin 1", "You clean the apple 2 using the sinkbasin 1.")
    assert (
        expert.act("", ["clean apple 2 with sinkbasin 1", "examine apple 2", "go to cabinet 1"])
        == "go to cabinet 1"
    )
    expert.observe(
        "go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is open. In it, you see nothing."
    )
    assert expert.act("", ["examine apple 2", "move apple 2 to cabinet 1"]) == "move apple 2 to cabinet 1"


def test_pick_two_leaves_the_first_object_at_the_target():
    expert = SearchExpert("pick_two_obj_and_place-Mug-None-Desk-301/trial_T1")
    expert.observe("move mug 1 to desk 1", "You move the mug 1 to the desk 1.")
    admissible = ["go to bed 1", "go to shelf 1", "take mug 1 from desk 1"]
    assert expert.act("", admissible) == "go to shelf 1"  # the first receptacle after desk 1
    assert task_goal("pick_two_obj_and_place-Mug-None-Desk-301/trial_T1") == (
        "pick_two_obj_and_place",
        "mug",
        "desk",
    )
    with pytest.raises(ValueError, match="not an ALFWorld task id"):
        task_goal("bandit-3")


def test_random_order_draws_among_the_go_to_actions_and_keeps_the_decisions():
    places = ["go to cabinet 1", "go to countertop 1", "go to fridge 1", "go to sinkbasin 1"]
    task = "pick_clean_then_place_in_recep-Apple-None-Cabinet-12/trial_T1"

    def searches(seed: int) -> list[str]:
        expert = SearchExpert(task, order="random", seed=seed)
        return [expert.act("", [*places, "look"]) for _ in range(40)]

    drawn = searches(0)
    assert drawn == searches(0)  # seeded
    assert drawn != searches(1)
    assert set(drawn) == set(places)  # every admissible place, and only those
    # The decisions other than the next place are the ordered expert's.
    expert = SearchExpert(task, order="random", seed=0)
    expert.observe(
        "go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 2."
    )
    assert expert.act("", [*places[:1], "take apple 2 from countertop 1"]) == "take apple 2 from countertop 1"
    with pytest.raises(ValueError, match="order must be one of"):
        SearchExpert(task, order="nearest")


def test_random_search_wins_most_generated_games():
    env = gym.make("AgentGymRL/ALFWorld-v0", split="valid_unseen", data_dir="generated", max_episode_steps=30)
    try:
        wins = [
            _play(env, task, max_steps=30, order="random", seed=seed)[0]
            for seed, task in enumerate(env.unwrapped.task_ids)
        ]
    finally:
        env.close()
    # 91% on the bench's 48 held-out games; a search that lost its way would win few.
    assert sum(wins) / len(wins) >= 0.7

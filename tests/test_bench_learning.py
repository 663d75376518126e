"""The learning benchmark's smoke mode: expert data, SFT, RL per estimator, held-out evaluation, report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from agentgym_rl.data import find_alfworld_root
from benchmarks.bench_learning import Args, main, smoke_args


def test_smoke_args_are_one_seed_two_steps() -> None:
    args = smoke_args(Args(seeds=[3, 4, 5]))
    assert args.seeds == [3] and args.rl_steps == 2 and args.eval_every == 2


@pytest.mark.timeout(900)
def test_smoke_mode_runs_the_whole_pipeline(tmp_path) -> None:
    args = Args(
        env=["alfworld", "webshop"],
        estimators=["gigpo"],  # one estimator keeps CI short; each has its own trainer test
        smoke=True,
        max_completion_length=16,  # the smoke run's SFT model babbles; short replies keep it fast
        eval_temperature=1.0,
        eval_group_size=2,  # two sampled rollouts per held-out task
        seen_games=3,  # and held-out games in the train scenes (ALFWorld valid_seen)
        output=str(tmp_path / "out"),
    )
    result = main(args)
    real_data = find_alfworld_root() is not None  # CI has ../shared: the real games are played by default
    for env in ("alfworld", "webshop"):
        run = result["envs"][env]
        assert ("real_success" in run["sft_eval"]) == (env == "alfworld" and real_data)
        assert run["sft"]["examples"] > 0 and 0.0 <= run["sft_eval"]["success"] <= 1.0
        assert 0.0 <= run["random_eval"]["score"] <= 1.0  # the reference the curves are read against
        assert run["sft_eval"]["episodes"] == 2 * 6  # 6 held-out tasks x 2 rollouts
        assert ("seen_success" in run["sft_eval"]) == (env == "alfworld")  # WebShop has no scenes
        for estimator in ("gigpo",):
            (seed_run,) = run["runs"][estimator]  # one seed in smoke mode
            assert [p["step"] for p in seed_run["points"]] == [2]  # evaluated after the 2 RL steps
            assert ("seen_success" in seed_run["points"][0]) == (env == "alfworld")
            assert ("real_success" in seed_run["points"][0]) == (env == "alfworld" and real_data)
            assert len(seed_run["diagnostics"]["all_zero"]) == 2  # one logged training step each
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert saved["args"]["rl_steps"] == 2
    report = (tmp_path / "out" / "result.md").read_text()
    assert "| gigpo |" in report and "all-zero groups" in report
    assert "SFT (alfworld)" in report and "SFT (webshop)" in report
    assert "Held-out games in the train scenes (generated valid_seen, 3 games × 2)" in report
    assert report.count("the random agent on the same tasks") == 2
    png = tmp_path / "out" / "learning_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("group_size", "temperature", "message"),
    [(0, 1.0, "at least 1"), (2, 0.0, "identical greedy episodes")],
)
def test_bad_eval_group_size_is_rejected(group_size, temperature, message, tmp_path) -> None:
    args = Args(eval_group_size=group_size, eval_temperature=temperature, output=str(tmp_path))
    with pytest.raises(ValueError, match=message):
        main(args)


@pytest.mark.parametrize("field_name", ["seen_games", "real_episodes"])
def test_negative_game_counts_are_rejected(field_name, tmp_path) -> None:
    args = Args(**{field_name: -1}, output=str(tmp_path))
    with pytest.raises(ValueError, match=f"--{field_name} must be 0"):
        main(args)


def test_unknown_env_is_rejected_before_any_work(tmp_path) -> None:
    args = Args(env=["alfwrld"], output=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="env must be one of \\['alfworld', 'webshop'\\], got 'alfwrld'"):
        main(args)
    assert not (tmp_path / "out").exists()


def test_random_search_on_webshop_is_rejected_before_any_work(tmp_path) -> None:
    args = Args(env=["alfworld", "webshop"], expert="random_search", output=str(tmp_path / "out"))
    with pytest.raises(
        ValueError, match="'random_search' is alfworld's; webshop's experts are search, walkthrough"
    ):
        main(args)
    assert not (tmp_path / "out").exists()


def _games_root(cache: str, queue) -> None:
    import os

    os.environ["AGENTGYM_RL_CACHE"] = cache
    from benchmarks.bench_learning import alfworld_games

    queue.put(str(alfworld_games(Args(train_games=3, heldout_games=1))))


def test_two_benches_at_once_make_the_game_set_once(tmp_path) -> None:
    # Two bench processes starting together once raced: the second rename hit the first's folder.
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_games_root, args=(str(tmp_path), queue)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=600)
    assert [worker.exitcode for worker in workers] == [0, 0]
    roots = {queue.get(timeout=5), queue.get(timeout=5)}
    assert len(roots) == 1
    (root,) = roots
    base = tmp_path / "bench-learning"
    assert [p.name for p in base.iterdir() if p.name.startswith(".games-")] == []  # no scratch left
    assert len(list((Path(root) / "train").iterdir())) == 3


def config_args(name: str, *flags: str) -> Args:
    """``configs/<name>`` parsed as ``bench_learning --config`` parses it, then ``flags``."""
    from agentgym_rl.cli_args import make_command_parser, parse_command_args

    config = Path(__file__).resolve().parents[1] / "configs" / name
    parser = make_command_parser(Args, name="bench_learning", description="bench_learning")
    return parse_command_args(parser, Args, ["--config", str(config), *flags])


def fields(args: Args, names: tuple[str, ...]) -> dict[str, object]:
    """The values of ``names`` in ``args``, to compare two configs on them."""
    return {name: getattr(args, name) for name in names}


def test_16_step_config_parses_into_the_readme_recipe() -> None:
    """``configs/alfworld_16steps.yaml`` holds the README's 16-step recipe and only bench flags.

    The main job's config is checked by ``test_readme_commands.test_main_job_config_parses``.
    """
    args = config_args("alfworld_16steps.yaml", "--seeds", "7")
    assert args.env == ["alfworld"] and args.seeds == [7]  # flags still override the file
    assert (args.expert, args.expert_episodes, args.sft_epochs) == ("search", 480, 4.0)
    assert args.sft_completion_only_loss is False and args.penalize_inadmissible is False
    assert (args.rl_steps, args.eval_every, args.group_size, args.max_env_steps) == (16, 8, 8, 30)
    assert (args.eval_group_size, args.eval_temperature, args.seen_games) == (4, 1.0, 48)


def test_small_room_config_parses_into_the_easy_setting() -> None:
    """``configs/alfworld_small.yaml``: small rooms, the two task types without a state change, 20 steps."""
    args = config_args("alfworld_small.yaml")
    assert args.room_size == "small" and args.max_env_steps == 20
    assert args.task_types == ["pick_and_place_simple", "look_at_obj_in_light"]
    assert (args.expert, args.expert_episodes, args.sft_epochs, args.rl_steps) == ("search", 480, 4.0, 16)


def test_webshop_tiny_config_parses_into_the_section_16_recipe() -> None:
    """``configs/webshop_tiny.yaml``: the tiny clone with its product-id tokens, 720 episodes, prompt loss."""
    from benchmarks.bench_learning import product_tokens

    args = config_args("webshop_tiny.yaml")
    assert args.env == ["webshop"] and product_tokens(args, "webshop")
    assert (args.expert, args.expert_episodes, args.sft_epochs, args.sft_completion_only_loss) == (
        "search",
        720,
        6.0,
        False,
    )
    assert (args.rl_steps, args.eval_every, args.num_tasks, args.group_size, args.learning_rate) == (
        4,
        2,
        4,
        4,
        2e-4,
    )


def test_45_minute_config_is_the_whole_grid_from_the_easy_settings_clone() -> None:
    """``configs/alfworld_bench.yaml``: every estimator × 3 seeds, the easy setting's clone, shorter runs."""
    from benchmarks.bench_learning import ESTIMATORS, SFT_RECIPE

    bench, small = config_args("alfworld_bench.yaml"), config_args("alfworld_small.yaml")
    assert bench.estimators == list(ESTIMATORS) and bench.seeds == [0, 1, 2]
    # The same clone: a checkpoint of either config is reused by the other (--sft_checkpoint).
    assert fields(bench, SFT_RECIPE) == fields(small, SFT_RECIPE)
    assert (bench.room_size, bench.task_types, bench.max_env_steps) == (small.room_size, small.task_types, 20)
    assert (bench.rl_steps, bench.eval_every, bench.num_tasks, bench.group_size) == (8, 8, 3, 8)
    assert (bench.learning_rate, bench.eval_group_size) == (2e-4, 4)  # x 2 was too noisy (docs section 13)
    assert (bench.seen_games, bench.real_episodes) == (0, 0)


def test_main_job_is_the_45_minute_benchs_clone_and_settings_for_4_steps() -> None:
    """``configs/main_job.yaml``: the bench's clone (its checkpoint starts the bench), GiGPO for 4 of its steps."""
    from benchmarks.bench_learning import SFT_RECIPE

    bench, job = config_args("alfworld_bench.yaml"), config_args("main_job.yaml")
    assert fields(job, SFT_RECIPE) == fields(bench, SFT_RECIPE)
    rl = ("room_size", "task_types", "max_env_steps", "num_tasks", "group_size", "learning_rate", "beta",
          "penalize_inadmissible", "eval_episodes", "eval_group_size", "eval_temperature", "real_episodes")  # fmt: skip
    assert fields(job, rl) == fields(bench, rl)
    assert (job.estimators, job.seeds, job.rl_steps, job.eval_every) == (["gigpo"], [0], 4, 4)


def test_sft_learning_rate_defaults_per_model() -> None:
    """The tiny random-init model needs 3e-3; a pretrained one gets 1e-4; a flag wins over both."""
    from benchmarks.bench_learning import sft_learning_rate

    assert sft_learning_rate(Args()) == 3e-3
    assert sft_learning_rate(Args(model="smollm2")) == sft_learning_rate(Args(model="org/model")) == 1e-4
    assert sft_learning_rate(Args(model="smollm2", sft_learning_rate=5e-4)) == 5e-4


def test_rl_learning_rate_defaults_per_model_the_checkpoints_recipe_first(tmp_path) -> None:
    """RL: 2e-4 for the tiny model, 1e-5 for a pretrained one; a bench-made checkpoint's recipe names its model."""
    from benchmarks.bench_learning import rl_learning_rate

    assert rl_learning_rate(Args()) == 2e-4
    assert rl_learning_rate(Args(model="smollm2")) == rl_learning_rate(Args(model="org/model")) == 1e-5
    assert rl_learning_rate(Args(model="smollm2", learning_rate=3e-5)) == 3e-5
    bench_clone, sft_clone = tmp_path / "bench", tmp_path / "sft"
    for folder, summary in ((bench_clone, {"recipe": {"model": "tiny"}}), (sft_clone, {"examples": 3})):
        folder.mkdir()
        (folder / "sft_summary.json").write_text(json.dumps(summary))
    assert rl_learning_rate(Args(model="smollm2", sft_checkpoint=str(bench_clone))) == 2e-4
    assert rl_learning_rate(Args(model="smollm2", sft_checkpoint=str(sft_clone))) == 1e-5


def test_the_tiny_webshop_clone_reads_product_ids_as_tokens(tmp_path, monkeypatch) -> None:
    """WebShop's tiny model has a token per id of its shop; ALFWorld's, a flag's and another model's do not."""
    from transformers import AutoTokenizer

    from benchmarks.bench_learning import model_path

    monkeypatch.setenv("AGENTGYM_RL_CACHE", str(tmp_path / "cache"))
    args = Args(num_products=60, tiny_hidden_size=32, tiny_layers=1)
    shop, alfworld = model_path(args, "webshop"), model_path(args, "alfworld")
    assert Path(shop).name == Path(alfworld).name.replace("-v", "-shop60-v")
    assert len(AutoTokenizer.from_pretrained(shop)) == len(AutoTokenizer.from_pretrained(alfworld)) + 2 * 60
    assert model_path(replace(args, tiny_product_tokens=False), "webshop") == alfworld
    assert model_path(replace(args, model="org/model"), "webshop") == "org/model"


def test_unknown_room_size_is_rejected_before_any_work(tmp_path) -> None:
    args = Args(room_size="tiny", output=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="--room_size must be one of full, small \\(got 'tiny'\\)"):
        main(args)
    assert not (tmp_path / "out").exists()


def test_bad_estimator_kwargs_are_rejected_before_any_work(tmp_path) -> None:
    args = Args(estimators=["3spo"], estimator_kwargs='{"add_episodes": true}', output=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="--estimator_kwargs for 3spo: .*'add_episodes' -> 'add_episode'"):
        main(args)
    assert not (tmp_path / "out").exists()
    from benchmarks.bench_learning import check_estimator_kwargs

    check_estimator_kwargs(
        Args(estimators=["3spo"], estimator_kwargs='{"add_episode": true}')
    )  # a real option


def test_small_rooms_get_a_game_set_of_their_own(tmp_path, monkeypatch) -> None:
    from benchmarks.bench_learning import alfworld_games

    monkeypatch.setenv("AGENTGYM_RL_CACHE", str(tmp_path))
    full = alfworld_games(Args(train_games=2, heldout_games=1))
    small = alfworld_games(Args(train_games=2, heldout_games=1, room_size="small"))
    assert full != small and "-small-" in small.name and "-small-" not in full.name
    assert len(list((small / "train").iterdir())) == 2


def test_a_shop_without_train_goals_is_rejected_before_any_work(tmp_path) -> None:
    """200 generated products leave the train split no goals: said before the ALFWorld clone, not after it."""
    args = Args(env=["alfworld", "webshop"], num_products=200, output=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="--num_products 200: split 'train' has no goals"):
        main(args)
    assert not (tmp_path / "out").exists()

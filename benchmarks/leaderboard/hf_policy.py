"""A Hugging Face causal LM as a batched agent, with the trainer's prompts and action parsing.

Prompts come from :func:`trainers.prompting.build_messages` (task, last ``history_window``
steps, current observation, admissible actions), rendered with the tokenizer's chat
template; replies are read by :func:`trainers.prompting.parse_action`. So a checkpoint
is evaluated on exactly the prompt it was trained on. Generation is one left-padded
``generate`` call per ``batch_size`` active episodes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PROMPT_CONFIG_FILE", "HFPolicy", "prompt_config_for", "resolve_checkpoint"]

#: The prompt settings a trainer run leaves beside its checkpoints (PromptConfig fields as JSON).
PROMPT_CONFIG_FILE = "prompt_config.json"

_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


def _has_model(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any((folder / name).is_file() for name in _WEIGHTS)


def resolve_checkpoint(directory: str | Path) -> Path:
    """The folder holding a trainer checkpoint's model files (``save_pretrained`` layout).

    ``directory`` itself when it holds ``config.json`` and weights, else its
    ``checkpoint-N`` folder with the highest N that does.

    Raises:
        FileNotFoundError: No model files there; the message lists what was looked at.
    """
    root = Path(directory)
    if _has_model(root):
        return root

    def step(path: Path) -> int:
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        return int(match.group(1)) if match else -1

    candidates = sorted(
        (p for p in root.glob("checkpoint-*") if p.is_dir() and step(p) >= 0), key=step, reverse=True
    )
    for candidate in candidates:
        if _has_model(candidate):
            return candidate
    looked = [str(root)] + [str(c) for c in candidates]
    raise FileNotFoundError(
        f"no model files (config.json and one of {list(_WEIGHTS)}) in {looked}; "
        "pass the output_dir of `agentgym-rl train` or one of its checkpoint-N folders"
    )


def _tokenizer_source(model_path: str) -> str:
    """The model folder, or its parent when a checkpoint was saved without tokenizer files."""
    folder = Path(model_path)
    if folder.is_dir() and not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        if any((folder.parent / name).is_file() for name in _TOKENIZER_FILES):
            return str(folder.parent)
    return model_path


def prompt_config_for(model_path: str, env_kind: str, overrides: dict[str, Any] | None = None) -> Any:
    """The trainer's :class:`~trainers.prompting.PromptConfig` for a model folder.

    Settings come from, last wins: PromptConfig's defaults, a ``prompt_config.json`` in
    the model folder or its parent (a trainer run's output dir), then ``overrides``.
    ``env_kind`` is always the env's.

    Raises:
        ValueError: The folder's ``prompt_config.json`` is another env's.
    """
    from trainers.prompting import PromptConfig

    settings: dict[str, Any] = {}
    folder = Path(model_path)
    for candidate in (folder / PROMPT_CONFIG_FILE, folder.parent / PROMPT_CONFIG_FILE):
        if candidate.is_file():
            settings = json.loads(candidate.read_text())
            break
    trained_on = settings.get("env_kind", env_kind)
    if trained_on != env_kind:
        raise ValueError(
            f"{model_path} was trained on {trained_on} prompts (its {PROMPT_CONFIG_FILE}) but is evaluated on "
            f"{env_kind}: evaluate it with --env {trained_on}, or clone a model on {env_kind} first"
        )
    known = {spec.name for spec in dataclasses.fields(PromptConfig)} - {"env_kind"}
    settings = {key: value for key, value in settings.items() if key in known}
    settings.update(overrides or {})
    return PromptConfig(env_kind=env_kind, **settings)


class HFPolicy:
    """A causal LM acting in every active slot, one batched ``generate`` per step.

    It speaks :class:`agentgym_rl.agents.BatchPolicy` (``begin`` / ``act``, and
    ``format_valid`` per slot after each ``act``), as the scripted agents do.

    Args:
        model_path: A local model folder or a Hub id (``from_pretrained``; no download
            when the folder exists).
        env_kind: ``"alfworld"``, ``"webshop"`` or ``"generic"`` (the prompt template; the
            env class's ``prompt_kind``, see :func:`agentgym_rl.registration.prompt_kind`).
        temperature: Sampling temperature; 0 decodes greedily.
        max_new_tokens: Tokens generated per step.
        batch_size: Prompts per ``generate`` call.
        seed: Seed of torch's sampling.
        device: Torch device (default: ``cuda`` if available, else ``cpu``).
        prompt_config: A :class:`trainers.prompting.PromptConfig` (default: built by
            :func:`prompt_config_for`).
        prompt_overrides: PromptConfig fields set by the caller (flags), over the model
            folder's ``prompt_config.json``.
    """

    def __init__(
        self,
        model_path: str,
        env_kind: str = "alfworld",
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        batch_size: int = 16,
        seed: int = 0,
        device: str | None = None,
        prompt_config: Any = None,
        prompt_overrides: dict[str, Any] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = f"hf:{model_path}"
        self.prompt_config = prompt_config or prompt_config_for(model_path, env_kind, prompt_overrides)
        self.temperature, self.max_new_tokens, self.batch_size = temperature, max_new_tokens, batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        local = Path(model_path).exists()
        self.tokenizer = AutoTokenizer.from_pretrained(
            _tokenizer_source(model_path), local_files_only=local, padding_side="left"
        )
        if self.tokenizer.pad_token is None:  # decoder-only models often ship without one
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=local, dtype=dtype)
        self.model.to(self.device).eval()
        self._generator_seed = seed
        torch.manual_seed(seed)
        self._tasks: dict[int, str] = {}
        self._history: dict[int, list[tuple[str, str]]] = {}
        self.format_valid: list[bool | None] = []

    # ------------------------------------------------------------------ episodes
    def begin(
        self, envs: Any, observations: np.ndarray, info: dict[str, Any], seeds: list[int | None]
    ) -> None:
        from trainers.prompting import extract_task

        active = np.flatnonzero(info["active"])
        self._tasks = {int(i): extract_task(str(observations[i]), self.prompt_config) for i in active}
        self._history = {int(i): [] for i in active}

    def act(self, observations: np.ndarray, info: dict[str, Any]) -> list[str | None]:
        from trainers.prompting import build_messages, parse_action

        active = [int(i) for i in np.flatnonzero(info["active"])]
        prompts = []
        for i in active:
            messages = build_messages(
                self._tasks[i],
                str(observations[i]),
                list(info["admissible_actions"][i] or []),
                self._history[i],
                self.prompt_config,
            )
            prompts.append(self._render(messages))
        replies: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            replies.extend(self._generate(prompts[start : start + self.batch_size]))
        actions: list[str | None] = [None] * len(observations)
        self.format_valid = [None] * len(observations)
        for i, reply in zip(active, replies, strict=True):
            action, valid = parse_action(reply, self.prompt_config)
            actions[i], self.format_valid[i] = action, valid
            self._history[i].append((str(observations[i]), action))
        return actions

    # ------------------------------------------------------------------ generation
    def _render(self, messages: list[dict[str, str]]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # A base model without a chat template: the messages' text, then the reply.
        return "\n\n".join(m["content"] for m in messages) + "\n\n"

    def _generate(self, prompts: list[str]) -> list[str]:
        import torch

        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )
        # Plain temperature sampling (as the papers' vLLM rollouts): override the model's
        # generation_config (Qwen2.5-Instruct ships top_k 20, top_p 0.8, repetition penalty 1.05).
        sampling = {"do_sample": True, "temperature": self.temperature, "top_p": 1.0, "top_k": 0}
        sampling["repetition_penalty"] = 1.0
        options = sampling if self.temperature > 0 else {"do_sample": False, "repetition_penalty": 1.0}
        with torch.no_grad():
            output = self.model.generate(
                **batch,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                **options,
            )
        completions = output[:, batch["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(completions, skip_special_tokens=True)

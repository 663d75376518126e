"""``StepGRPOTrainer``: TRL's GRPO trainer, trained on multi-turn env episodes with step-level advantages.

Each optimizer step: roll out ``num_tasks × group_size`` episodes in a
:class:`agentgym_rl.GroupVectorEnv` (one training row per env step: the prompt of that
step and the model's reply), build a :class:`~trainers.step_batch.StepBatch`, compute
one advantage per row with the configured estimator on the model's device, and feed
the rows to TRL's own loss (clipped ratio, KL to the reference with ``beta``).

Five hooks are overridden, one per concern (``DESIGN.md``, "Notes on TRL 1.16 internals"):

- ``_generate_and_score_completions``: the parent generates ``num_generations``
  completions per dataset prompt and scores them with reward functions; ours ignores
  the dataset rows and returns the rollout's K step rows (K varies with episode lengths).
- ``training_step``: the parent backpropagates one fixed-size batch; TRL's own split
  (``split_tensor_dict``) would silently drop ``K mod steps_per_generation`` rows, so ours
  cuts all K rows into chunks of ``per_device_train_batch_size`` (the last one topped up
  with zero-weight rows), one backward each, so that the summed gradient equals the
  one-shot batch's. Rows come sorted by length (``sort_by_length``) and each chunk is
  trimmed to its longest row, so chunks compute little padding.
- ``_save_checkpoint`` / ``_load_optimizer_and_scheduler``: the parent saves and restores
  model, optimizer and TRL state; ours also saves and restores the estimator's
  cross-iteration state (3SPO's table, ProGPO-R's averages) in each checkpoint.
- ``_save``: the parent writes the model; ours writes the prompt settings beside it, so that
  evaluation prompts the model as it was trained.

What an estimator needs from the rollouts (group sizes per task, a rollout mode other
than plain episodes, extra record fields) comes from its registration
(:class:`trainers.advantages.EstimatorSpec`): the trainer names no estimator.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from trl import GRPOTrainer

from trainers.advantages import RolloutRequest, compute_advantages, get_estimator, make_state
from trainers.config import StepGRPOConfig
from trainers.lm_head import completion_logps, plain_head_applies
from trainers.prompting import PromptConfig, env_kind_of
from trainers.rollout import GeneratedReply, Rollout, RolloutCollector
from trainers.step_batch import StepBatch

__all__ = ["StepGRPOTrainer"]

ESTIMATOR_STATE_FILE = "estimator_state.pt"
#: The prompt settings, saved with the model so that evaluation uses the training prompt.
PROMPT_CONFIG_FILE = "prompt_config.json"


def _pad(
    rows: list[list[int]], value: int, side: str, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    width = width or max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if not row:
            continue
        if side == "left":
            ids[i, width - len(row) :], mask[i, width - len(row) :] = torch.tensor(row), 1
        else:
            ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
    return ids, mask


def _trim_padding(chunk: dict[str, Any], real: torch.Tensor) -> dict[str, Any]:
    """Drop the columns that are padding in every real row of ``chunk``.

    Prompts are left-padded and completions right-padded, so the prompt keeps its last
    columns and every completion-aligned tensor (ids, masks, per-token log-probabilities)
    its first ones. The logits do not change: rotary attention sees relative positions only.
    """
    # At least one column each: logits_to_keep = 0 would mean "all positions" to the model.
    prompt_width = max(int(chunk["prompt_mask"][real].sum(1).max()), 1) if bool(real.any()) else 1
    used = chunk["completion_mask"].any(0).nonzero()
    completion_width = int(used.max()) + 1 if used.numel() else 1
    rows, full_prompt = chunk["prompt_ids"].shape
    full_completion = chunk["completion_ids"].size(1)
    trimmed: dict[str, Any] = {}
    for key, value in chunk.items():
        if key in ("prompt_ids", "prompt_mask"):
            value = value[:, full_prompt - prompt_width :]
        elif isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape == (rows, full_completion):
            value = value[:, :completion_width]
        trimmed[key] = value
    return trimmed


def env_reward(completions: list, **kwargs: Any) -> list[float]:
    """Placeholder reward function: TRL requires one, but StepGRPOTrainer's rewards come from the env."""
    return [0.0] * len(completions)


class StepGRPOTrainer(GRPOTrainer):
    """Trains an LLM agent in a group env with a step-level estimator (GRPO, GiGPO, ProGPO, 3SPO).

    Args:
        model: A model id/path or a ``PreTrainedModel`` (as ``trl.GRPOTrainer``).
        args: The :class:`~trainers.StepGRPOConfig`.
        processing_class: The tokenizer (loaded from the model when None).
        envs: An existing ``GroupVectorEnv`` (default: built from ``args``; it must hold
            ``num_tasks × group_size`` slots).
        train_dataset: Ignored rows that only drive TRL's step loop (default: a dummy).
        **kwargs: Other ``trl.GRPOTrainer`` arguments (``callbacks``, ``optimizers``,
            ``peft_config``, ...).

    Metrics (``self._metrics["train"]``, logged through ``report_to``):
    ``env/success_rate``, ``env/score``, ``env/episode_length``,
    ``env/invalid_format_rate``, ``env/inadmissible_rate``, ``env/truncated_rate``,
    ``env/distinct_states``, ``env/rows``, ``advantages/<diagnostic>`` (the estimator's
    diagnostics, e.g. ``advantages/groups/all_zero_frac``), ``advantages/mean``,
    ``advantages/abs_mean``, and ``time/rollout``, ``time/advantages``, ``time/loss``
    (seconds per step).
    """

    _tag_names = ["trl", "grpo", "agentgym-rl"]

    def __init__(
        self,
        model: Any,
        args: StepGRPOConfig,
        processing_class: Any = None,
        envs: Any = None,
        train_dataset: Any = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(args, StepGRPOConfig):
            raise TypeError(f"args must be a StepGRPOConfig, got {type(args).__name__}")
        if train_dataset is None:
            from datasets import Dataset

            # TRL's dataloader drives the step loop; each of its batches triggers one rollout.
            rows = max(64, args.per_device_train_batch_size * 4)
            train_dataset = Dataset.from_dict({"prompt": ["rollout"] * rows})
        super().__init__(
            model=model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            **kwargs,
        )
        # Env and rollouts
        if envs is None:
            from agentgym_rl import GroupVectorEnv

            env_kwargs = {"split": args.split, **args.env_kwargs}
            if args.max_env_steps is not None:
                env_kwargs["max_episode_steps"] = args.max_env_steps
            envs = GroupVectorEnv(
                args.env_id,
                num_tasks=args.num_tasks,
                group_size=args.group_size,
                workers=args.env_workers,
                worker_backend=args.env_backend,
                ray_address=args.ray_address,
                **env_kwargs,
            )
            self._owns_envs = True
        else:
            self._owns_envs = False
        self.envs = envs
        self.prompt_config = PromptConfig(
            env_kind=env_kind_of(args.env_id),
            history_window=args.history_window,
            system_prompt=args.system_prompt,
            action_format=args.action_format,
        )
        self.collector = RolloutCollector(
            envs,
            self.prompt_config,
            invalid_action_penalty=args.invalid_action_penalty,
            penalize_inadmissible=args.penalize_inadmissible,
            reward_scale=args.reward_scale,
        )
        # Estimator: its registration says what it needs from the rollouts
        self.estimator_spec = get_estimator(args.estimator)
        self.estimator_config = args.make_estimator_config()
        if self.estimator_spec.configure_collector is not None:  # e.g. GiGPO's similarity anchors
            self.estimator_spec.configure_collector(self.collector, self.estimator_config)
        self.estimator_state = make_state(args.estimator, self.estimator_config)
        self._task_rng = np.random.default_rng(args.seed + 7919 * self.accelerator.process_index)
        self._initial_keys: dict[str, int] = {}  # task -> k(o_0), for estimators' adaptive group sizes
        # Plain lockstep episodes, or a rollout mode of the estimator's (StepGRPOConfig checked it has it).
        if args.rollout_mode == "episodes":
            self._collect: Callable[[RolloutRequest], Rollout] = self._collect_episodes
        else:
            factory = self.estimator_spec.rollout_modes[args.rollout_mode]
            self._collect = factory(self.collector, self.estimator_state, self.estimator_config, args)
        self.last_rollout: Rollout | None = None

    @property
    def mode_collector(self) -> Any:
        """The rollout mode's own collector (e.g. ``BranchingCollector``), ``None`` for plain episodes."""
        return getattr(self._collect, "collector", None) if self.args.rollout_mode != "episodes" else None

    @property
    def branching(self) -> Any:
        """The collector of the ``branching`` rollout mode, when that is the mode."""
        return self.mode_collector if self.args.rollout_mode == "branching" else None

    @property
    def post_step(self) -> Any:
        """The collector of the ``post_step`` rollout mode, when that is the mode."""
        return self.mode_collector if self.args.rollout_mode == "post_step" else None

    # ------------------------------------------------------------------ rollouts
    def _generate_replies(self, conversations: list[list[dict[str, str]]]) -> list[GeneratedReply]:
        """Generate one reply per conversation with TRL's own generation path (HF, vLLM or paged)."""
        prompt_ids, _, _ = self._tokenize_prompts(conversations)
        completion_ids, _ = self._generate_single_turn(prompt_ids, None, {}, num_generations=1)
        texts = self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        return [
            GeneratedReply(prompt_ids=list(p), completion_ids=list(c), text=t)
            for p, c, t in zip(prompt_ids, completion_ids, texts, strict=True)
        ]

    def _choose_tasks(self) -> tuple[list[str], list[int] | None]:
        task_ids = self.envs.task_ids
        count = self.args.num_tasks
        picks = self._task_rng.choice(len(task_ids), size=count, replace=count > len(task_ids))
        tasks = [task_ids[int(i)] for i in picks]
        if self.estimator_spec.group_sizes is None:
            return tasks, None
        # A task not rolled out yet has no initial key: 0, the "unknown" key.
        keys = [self._initial_keys.get(t, 0) for t in tasks]
        sizes = self.estimator_spec.group_sizes(
            keys, self.estimator_state, self.estimator_config, self.args.group_size
        )
        return tasks, sizes

    def _collect_episodes(self, request: RolloutRequest) -> Rollout:
        """The plain rollout mode: one lockstep episode per slot of each task group."""
        return self.collector.collect(request.generate, request.tasks, request.group_sizes, seed=request.seed)

    def rollout(self) -> Rollout:
        """Collect one training step's episodes (also usable for evaluation)."""
        tasks, sizes = self._choose_tasks()
        seed = int(self._task_rng.integers(2**31 - 1))
        request = RolloutRequest(self._generate_replies, tasks, sizes, self._choose_tasks, seed)
        was_training = self.model.training
        self.model.eval()
        try:
            rollout = self._collect(request)
        finally:
            self.model.train(was_training)
        for episode in rollout.episodes:
            self._initial_keys[episode.task_id] = episode.initial_state_key
        return rollout

    def evaluate_in_env(
        self, split: str = "valid_unseen", num_tasks: int = 8, seed: int = 0
    ) -> dict[str, float]:
        """Play one episode of ``num_tasks`` tasks of ``split`` with the current policy; env metrics.

        Uses the training sampling settings (temperature) and a fresh ``GroupVectorEnv``.
        """
        from agentgym_rl import GroupVectorEnv

        env_kwargs = {**self.args.env_kwargs, "split": split}
        if self.args.max_env_steps is not None:
            env_kwargs["max_episode_steps"] = self.args.max_env_steps
        envs = GroupVectorEnv(
            self.args.env_id,
            num_tasks=num_tasks,
            group_size=1,
            workers=self.args.env_workers,
            worker_backend=self.args.env_backend,
            ray_address=self.args.ray_address,
            **env_kwargs,
        )
        try:
            rng = np.random.default_rng(seed)
            picks = rng.choice(len(envs.task_ids), size=num_tasks, replace=num_tasks > len(envs.task_ids))
            collector = RolloutCollector(envs, self.prompt_config, reward_scale=1.0)
            was_training = self.model.training
            self.model.eval()
            try:
                rollout = collector.collect(
                    self._generate_replies, [envs.task_ids[int(i)] for i in picks], seed=seed
                )
            finally:
                self.model.train(was_training)
        finally:
            envs.close()
        return rollout.metrics()

    # ------------------------------------------------------------------ TRL hooks
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        # The parent samples completions of dataset prompts and scores them with reward functions.
        # Ours plays the env: the dataset rows are ignored, and the rows returned are env steps.
        device = self.accelerator.device
        mode = "train" if self.model.training else "eval"
        start = time.perf_counter()
        rollout = self.rollout()
        self.last_rollout = rollout
        rollout_time = time.perf_counter() - start

        start = time.perf_counter()
        batch = StepBatch.from_records(rollout.records).to(device)
        advantages, diagnostics = compute_advantages(
            self.args.estimator, batch, self.estimator_config, self.estimator_state, return_diagnostics=True
        )
        if self.estimator_state is not None and mode == "train":
            if rollout.table_records is None:
                self.estimator_state.update(batch)
            elif rollout.table_records:  # post-step mode: whole episodes that ended
                self.estimator_state.update(StepBatch.from_records(rollout.table_records).to(device))
        advantage_time = time.perf_counter() - start

        rows = rollout.rows
        if self.args.sort_by_length and rows:  # rows of like length share a chunk: less padding
            order = sorted(
                range(len(rows)), key=lambda i: (len(rows[i].prompt_ids), len(rows[i].completion_ids))
            )
            rows = [rows[i] for i in order]
            advantages = advantages[torch.tensor(order, device=advantages.device)]
        pad_id = self.processing_class.pad_token_id
        prompt_ids, prompt_mask = _pad([r.prompt_ids for r in rows], pad_id, "left")
        completion_ids, completion_mask = _pad([r.completion_ids for r in rows], pad_id, "right")
        output: dict[str, Any] = {
            "prompt_ids": prompt_ids.to(device),
            "prompt_mask": prompt_mask.to(device),
            "completion_ids": completion_ids.to(device),
            "completion_mask": completion_mask.to(device),
            "advantages": advantages.to(device=device, dtype=torch.float32),
            # dapo/cispo/vespo normalize by every completion token of the step, on every process.
            "num_items_in_batch": self.accelerator.gather(completion_mask.sum().to(device)).sum(),
        }
        with torch.no_grad():
            chunk = self.args.per_device_train_batch_size
            if self.num_iterations > 1:  # the batch is reused: the ratio needs the sampling policy's logps
                output["old_per_token_logps"] = self._chunked_logps(self.model, output, chunk)
            if self.beta != 0.0:
                reference = self.ref_model if self.ref_model is not None else self.model
                context = contextlib.nullcontext()
                if self.ref_model is None:  # PEFT: the base model is the reference
                    from trl.models.utils import use_adapter

                    unwrapped = self.accelerator.unwrap_model(self.model)
                    context = use_adapter(
                        unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None
                    )
                with context:
                    output["ref_per_token_logps"] = self._chunked_logps(reference, output, chunk)

        metrics = self._metrics[mode]
        for name, value in rollout.metrics().items():
            metrics[name].append(value)
        for name, value in diagnostics.items():
            metrics[f"advantages/{name}"].append(value)
        metrics["advantages/mean"].append(float(advantages.mean()) if len(advantages) else 0.0)
        metrics["advantages/abs_mean"].append(float(advantages.abs().mean()) if len(advantages) else 0.0)
        metrics["time/rollout"].append(rollout_time)
        metrics["time/advantages"].append(advantage_time)
        metrics["completions/mean_length"].append(
            float(completion_mask.sum(1).float().mean()) if len(rollout.rows) else 0
        )
        return output

    def _chunk_weight(
        self, chunk_size: int, chunk_tokens: torch.Tensor, total_rows: int, total_tokens: torch.Tensor
    ) -> float | torch.Tensor:
        """How much a chunk's loss counts so that the chunks' gradients add up to the whole batch's."""
        loss_type = self.loss_type
        if loss_type in ("dapo", "cispo", "vespo"):
            return 1.0  # already normalized by the whole step's num_items_in_batch
        if loss_type == "bnpo":
            return chunk_tokens / total_tokens.clamp(min=1)  # a token mean over the chunk
        # grpo, dr_grpo, sapo, luspo: a mean over the chunk's rows, padding rows (loss 0) included
        return chunk_size / max(total_rows, 1)

    def training_step(
        self, model: torch.nn.Module, inputs: Any, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        # The parent backpropagates one fixed-size batch. A rollout gives K rows (K varies), so we cut them
        # into chunks of per_device_train_batch_size, one backward each (no gradient sync but on the last),
        # topping the last chunk up with zero-weight rows; the summed gradient equals the one-shot batch's.
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()
        batch = self._prepare_inputs(inputs)  # rolls out (or reuses the buffered rollout)
        start = time.perf_counter()
        total = self.backward_rows(model, batch, self.args.per_device_train_batch_size)
        self._step += 1
        self._metrics["train"]["time/loss"].append(time.perf_counter() - start)
        return total

    def backward_rows(self, model: torch.nn.Module, batch: dict[str, Any], chunk_size: int) -> torch.Tensor:
        """Backpropagate every row of ``batch`` in chunks of ``chunk_size``; returns the summed loss.

        The chunks' gradients add up to the gradient of the whole batch in one pass
        (each chunk's loss is weighted by :meth:`_chunk_weight`).
        """
        rows = batch["prompt_ids"].size(0)
        local_chunks = max(1, -(-rows // chunk_size))
        # Under DDP every rank must run the same number of backward passes.
        num_chunks = int(
            self.accelerator.gather(torch.tensor([local_chunks], device=self.accelerator.device)).max()
        )
        total_tokens = batch["completion_mask"].sum()
        total = torch.zeros((), device=self.accelerator.device)
        for c in range(num_chunks):
            chunk = self._chunk(batch, c * chunk_size, chunk_size)
            weight = self._chunk_weight(chunk_size, chunk["completion_mask"].sum(), rows, total_tokens)
            sync = c == num_chunks - 1
            context = contextlib.nullcontext() if sync else self.accelerator.no_sync(model)
            with context, self.compute_loss_context_manager():
                loss = self.compute_loss(model, chunk) * weight
                self.accelerator.backward(loss)
            total += loss.detach()
        return total

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **multimodal: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # The parent scores every position on CPU; ours scores the completion only (see trainers.lm_head).
        if (
            compute_aux_loss
            or any(value is not None for value in multimodal.values())
            or not plain_head_applies(model, input_ids.device, self.args.cast_lm_head_to_fp32)
        ):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal,
            )  # fmt: skip
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            with self.accelerator.autocast():
                chunk_logps, chunk_entropies = completion_logps(
                    model,
                    input_ids[rows],
                    attention_mask[rows],
                    logits_to_keep,
                    self.temperature,
                    compute_entropy,
                )
            logps.append(chunk_logps)
            entropies.append(chunk_entropies)
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None

    def _chunked_logps(self, model: torch.nn.Module, batch: dict[str, Any], chunk_size: int) -> torch.Tensor:
        """Per-token log-probabilities of every completion token of ``batch`` (rows × completion width),
        computed chunk by chunk on the chunks' trimmed widths, as the loss computes them."""
        rows, width = batch["completion_ids"].shape
        pieces = []
        for begin in range(0, rows, chunk_size):
            chunk = self._chunk(batch, begin, chunk_size)
            ids = torch.cat([chunk["prompt_ids"], chunk["completion_ids"]], dim=1)
            mask = torch.cat([chunk["prompt_mask"], chunk["completion_mask"]], dim=1)
            keep = chunk["completion_ids"].size(1)
            logps = self._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=chunk_size)[0]
            real_rows = logps[: rows - begin]  # without the zero-weight padding rows
            pieces.append(torch.nn.functional.pad(real_rows, (0, width - keep)))  # back to the full width
        if not pieces:
            return torch.zeros((0, width), device=batch["completion_ids"].device)
        return torch.cat(pieces)

    @staticmethod
    def _chunk(batch: dict[str, Any], begin: int, size: int) -> dict[str, Any]:
        """Rows [begin, begin + size) of the batch, padded to ``size`` with zero-weight rows, and
        trimmed to the widths of its longest prompt and completion (:func:`_trim_padding`)."""
        rows = batch["prompt_ids"].size(0)
        index = torch.arange(begin, begin + size, device=batch["prompt_ids"].device)
        real = index < rows
        index = torch.where(real, index, torch.full_like(index, begin))  # padding repeats the first row ...
        chunk: dict[str, Any] = {}
        for key, value in batch.items():
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == rows:
                chunk[key] = value.index_select(0, index)
            else:
                chunk[key] = value
        # ... with its completion masked out and a zero advantage (not NaN: prompt_mask stays valid).
        keep = real.to(chunk["completion_mask"].dtype).unsqueeze(1)
        chunk["completion_mask"] = chunk["completion_mask"] * keep
        chunk["advantages"] = chunk["advantages"] * real.to(chunk["advantages"].dtype)
        return _trim_padding(chunk, real)

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        # The parent saves model, optimizer and TRL state; the estimator's table goes beside them.
        super()._save_checkpoint(model, trial)
        if self.estimator_state is not None and self.args.should_save:
            from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            torch.save(self.estimator_state.state_dict(), os.path.join(folder, ESTIMATOR_STATE_FILE))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        # The parent restores the optimizer; on resume we also restore the estimator's table.
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and self.estimator_state is not None:
            path = os.path.join(checkpoint, ESTIMATOR_STATE_FILE)
            if os.path.exists(path):
                self.estimator_state.load_state_dict(torch.load(path, weights_only=False))

    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        # The parent writes the model (and tokenizer); the prompt settings go beside them, so that
        # `agentgym-rl leaderboard --agent checkpoint:DIR` prompts the model as it was trained.
        super()._save(output_dir, state_dict)
        if self.args.should_save:
            import dataclasses
            import json

            folder = output_dir if output_dir is not None else self.args.output_dir
            with open(os.path.join(folder, PROMPT_CONFIG_FILE), "w") as handle:
                json.dump(dataclasses.asdict(self.prompt_config), handle, indent=1)

    def close(self) -> None:
        """Stop the env workers this trainer started."""
        if self._owns_envs and self.envs is not None:
            self.envs.close()

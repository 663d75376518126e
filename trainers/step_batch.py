"""``StepBatch``: the flat tensors every advantage estimator reads (one row per env step).

The rollout collector turns finished (or, for 3SPO's post-step updates, running)
episodes into per-step records and calls :meth:`StepBatch.from_records`; rows may
come in any order. Keys are the int64 keys of :mod:`agentgym_rl.keys` (``0`` means
"no state").

>>> records = [
...     dict(group_id=0, traj_id=0, step=0, state_key=11, history_keys=[21, 31],
...          first_visit=True, reward=0.0, outcome=1.0, done=False),
...     dict(group_id=0, traj_id=0, step=1, state_key=12, history_keys=[22, 32],
...          first_visit=True, reward=1.0, outcome=1.0, done=True),
... ]
>>> batch = StepBatch.from_records(records)
>>> batch.num_rows, batch.history_keys.shape[1]
(2, 2)
>>> batch.next_state_key.tolist(), batch.next_first_visit.tolist()
([12, 0], [True, False])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from trainers.segment_ops import TrajectoryLayout

__all__ = ["RECORD_FIELDS", "StepBatch"]

#: Fields of one per-step record (a mapping or an object with these attributes).
RECORD_FIELDS: dict[str, str] = {
    "group_id": "required; the task group (all rollouts of one task in this batch); int or hashable",
    "traj_id": "required; the rollout, unique in the batch; int or hashable",
    "step": "required; t, the step index within the rollout",
    "state_key": "required; info['state_key'] of o_t (k(o_t), int64)",
    "history_keys": "required; info['history_keys'] of o_t: K_t^(d) per depth, last = exact prefix",
    "first_visit": "required; info['first_visit'] of o_t (f_t)",
    "reward": "required; env reward r_t after a_t, invalid-action penalty included",
    "outcome": "required; R_i of the record's rollout on the loss side: what the env paid (ALFWorld won, "
    "WebShop score), times the trainer's reward_scale",
    "done": "required; True on the rollout's last step (terminated or truncated)",
    "score": "optional (all records or none); the rollout's env score in [0, 1] (info['score'], else "
    "info['won']), never scaled: success and potentials read it; default: outcome",
    "penalty": "optional (all records or none); p_t, the shaping subtracted from the env's reward to give "
    "'reward' (the invalid-action penalty, 0 on a valid step): r_t = env reward (scaled) - p_t; read by "
    "episode_signal='verl_agent' and GiGPO's step_penalty='own_step'",
    "next_state_key": "optional; k(o_{t+1}); default: the next step's state_key, 0 after the last step",
    "next_first_visit": "optional; f_{t+1}; default: the next step's first_visit, False after the last "
    "(with next_state_key given: whether that key is new in the rollout)",
    "semantic_key": "optional (all records or none); coarser key of o_t for ProGPO-R's semantic expansion",
    "anchor_key": "optional (all records or none); anchor override for GiGPO's similarity option",
    "path_count": "optional (all records or none); finished root-to-leaf paths through the row (3SPO's "
    "branching DFS, where a row's branch shares it with the paths forked below); default: 1 if the "
    "row's rollout finished, else 0",
    "path_successes": "optional (with path_count); those of the paths that succeeded",
    "refused": "optional (all records or none); True when the env refused a_t (inadmissible or unparseable: "
    "ALFWorld's 'Nothing happens.'), so o_{t+1} is its refusal, not a new state; read by 3SPO",
}

_OPTIONAL_ROW_KEYS = ("semantic_key", "anchor_key", "path_count", "path_successes")
_REQUIRED = tuple(name for name, doc in RECORD_FIELDS.items() if doc.startswith("required"))


@dataclass
class StepBatch:
    """Flat tensors, one row per env step, all on one device.

    Attributes:
        group_id: int64 ``[rows]``, the task group of the row.
        traj_id: int64 ``[rows]``, the rollout (unique in the batch).
        step: int64 ``[rows]``, ``t``.
        state_key: int64 ``[rows]``, ``k(o_t)``.
        next_state_key: int64 ``[rows]``, ``k(o_{t+1})``; ``0`` when unknown (after the
            last step unless the collector supplies the terminal observation's key).
        history_keys: int64 ``[rows, D]``, ``K_t^(d)`` per configured depth; the last
            column is the exact-prefix key ``K_t^(∞)``.
        first_visit: bool ``[rows]``, ``f_t``.
        next_first_visit: bool ``[rows]``, ``f_{t+1}`` (False when unknown).
        reward: float32 ``[rows]``, ``r_t`` (invalid-action penalty included).
        outcome: float32 ``[rows]``, ``R_i`` of the row's rollout (loss side: scaled with the
            rewards).
        done: bool ``[rows]``, the rollout's last step.
        score: float32 ``[rows]``, the rollout's env score in ``[0, 1]``, never scaled: what
            success (3SPO), potentials (ProGPO-R) and score thresholds (ProGPO-C) read.
            Defaults to ``outcome`` (batches built by hand, at reward scale 1).
        penalty: optional float32 ``[rows]``, ``p_t``: what ``reward`` had subtracted from the
            env's reward (the invalid-action penalty), for verl-agent's placement of it
            (``episode_signal="verl_agent"``, GiGPO's ``step_penalty="own_step"``).
        semantic_key: optional int64 ``[rows]``, a coarser key of ``o_t`` (ProGPO-R).
        anchor_key: optional int64 ``[rows]``, replaces ``state_key`` as GiGPO's anchor
            (e.g. similarity-merged observations).
        path_count: optional int64 ``[rows]``, finished root-to-leaf paths through the row
            (3SPO's branching DFS: the rows before a fork belong to every path below it).
        path_successes: optional int64 ``[rows]``, how many of them succeeded.
        refused: optional bool ``[rows]``, the env refused ``a_t`` (its answer, such as
            ALFWorld's "Nothing happens.", is ``o_{t+1}``; the world did not change). 3SPO
            keeps the state where it was across a refusal.
    """

    group_id: torch.Tensor
    traj_id: torch.Tensor
    step: torch.Tensor
    state_key: torch.Tensor
    next_state_key: torch.Tensor
    history_keys: torch.Tensor
    first_visit: torch.Tensor
    next_first_visit: torch.Tensor
    reward: torch.Tensor
    outcome: torch.Tensor
    done: torch.Tensor
    score: torch.Tensor | None = None
    penalty: torch.Tensor | None = None
    semantic_key: torch.Tensor | None = None
    anchor_key: torch.Tensor | None = None
    path_count: torch.Tensor | None = None
    path_successes: torch.Tensor | None = None
    refused: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.score is None:  # hand-made batches: outcomes are scores (reward scale 1)
            self.score = self.outcome
        if (self.path_count is None) != (self.path_successes is None):
            raise ValueError("StepBatch.path_count and path_successes go together: give both or neither")
        rows = self.group_id.shape[0]
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if value.shape[0] != rows:
                raise ValueError(
                    f"StepBatch.{field.name} has {value.shape[0]} rows, group_id has {rows}: "
                    "every field needs one entry per step row"
                )
            if value.device != self.group_id.device:
                raise ValueError(
                    f"StepBatch.{field.name} is on {value.device}, group_id on {self.group_id.device}: "
                    "build the batch on one device, then call .to(device)"
                )
        if self.history_keys.dim() != 2 or self.history_keys.shape[1] < 1:
            raise ValueError(
                f"StepBatch.history_keys must be [rows, D] with D >= 1 (last column the exact prefix), "
                f"got shape {tuple(self.history_keys.shape)}"
            )

    # ------------------------------------------------------------------ building
    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any] | Any],
        *,
        device: torch.device | str | None = None,
        history_width: int = 1,
    ) -> StepBatch:
        """Build a batch from per-step records (see :data:`RECORD_FIELDS`).

        Args:
            records: mappings or objects (e.g. a dataclass with those fields) carrying the
                fields of :data:`RECORD_FIELDS`, in any order. Non-integer
                ``group_id``/``traj_id`` values (e.g. uuid strings) are numbered in
                order of first appearance.
            device: device of the tensors (default CPU).
            history_width: ``D`` of an empty batch (ignored otherwise).

        Returns:
            The batch; ``next_state_key`` / ``next_first_visit`` missing from a record
            are taken from the next step of the same rollout (0 / False after the last).
        """
        rows = [r if isinstance(r, Mapping) else _AttrView(r) for r in records]
        if not rows:
            return cls.empty(history_width=history_width, device=device)
        missing = [name for name in _REQUIRED if name not in rows[0]]
        if missing:
            raise ValueError(
                f"step record is missing {missing}; a record needs {list(_REQUIRED)} "
                "(see trainers.step_batch.RECORD_FIELDS)"
            )
        widths = {len(r["history_keys"]) for r in rows}
        if len(widths) != 1:
            raise ValueError(
                f"records disagree on len(history_keys): {sorted(widths)}; configure every env "
                "with the same history depths"
            )

        def ints(name: str) -> torch.Tensor:
            return torch.tensor([int(r[name]) for r in rows], dtype=torch.long)

        def ids(name: str) -> torch.Tensor:
            numbering: dict[Any, int] = {}
            values = [r[name] for r in rows]
            if all(isinstance(v, int) or hasattr(v, "__index__") for v in values):
                return torch.tensor([int(v) for v in values], dtype=torch.long)
            return torch.tensor([numbering.setdefault(v, len(numbering)) for v in values], dtype=torch.long)

        batch_fields: dict[str, Any] = dict(
            group_id=ids("group_id"),
            traj_id=ids("traj_id"),
            step=ints("step"),
            state_key=ints("state_key"),
            history_keys=torch.tensor([[int(k) for k in r["history_keys"]] for r in rows], dtype=torch.long),
            first_visit=torch.tensor([bool(r["first_visit"]) for r in rows]),
            reward=torch.tensor([float(r["reward"]) for r in rows], dtype=torch.float32),
            outcome=torch.tensor([float(r["outcome"]) for r in rows], dtype=torch.float32),
            done=torch.tensor([bool(r["done"]) for r in rows]),
        )
        for name in ("score", "penalty", "refused", *_OPTIONAL_ROW_KEYS):
            present = [r.get(name) is not None for r in rows]
            if any(present) and not all(present):
                raise ValueError(f"'{name}' is set on some records only: give it on every record or none")
            if not all(present):
                batch_fields[name] = None
            elif name in ("score", "penalty"):
                batch_fields[name] = torch.tensor([float(r[name]) for r in rows], dtype=torch.float32)
            elif name == "refused":
                batch_fields[name] = torch.tensor([bool(r[name]) for r in rows])
            else:
                batch_fields[name] = ints(name)

        # Next-state fields: supplied values win, the rest come from the next step.
        layout = TrajectoryLayout.build(batch_fields["traj_id"], batch_fields["step"])
        has_next = layout.next_row >= 0
        nxt = layout.next_row.clamp_min(0)
        derived_key = torch.where(has_next, batch_fields["state_key"][nxt], torch.zeros_like(nxt))
        derived_visit = has_next & batch_fields["first_visit"][nxt]
        given_key = [r.get("next_state_key") for r in rows]
        given_visit = [r.get("next_first_visit") for r in rows]
        if any(k is not None and v is None for k, v in zip(given_key, given_visit, strict=False)):
            given_visit = _visit_flags(rows, batch_fields, given_key, given_visit)
        batch_fields["next_state_key"] = torch.tensor(
            [
                int(g) if g is not None else int(d)
                for g, d in zip(given_key, derived_key.tolist(), strict=False)
            ],
            dtype=torch.long,
        )
        batch_fields["next_first_visit"] = torch.tensor(
            [
                bool(g) if g is not None else bool(d)
                for g, d in zip(given_visit, derived_visit.tolist(), strict=False)
            ]
        )
        batch = cls(**batch_fields)
        return batch if device is None else batch.to(device)

    @classmethod
    def empty(cls, *, history_width: int = 1, device: torch.device | str | None = None) -> StepBatch:
        """A batch with zero rows."""
        long = torch.zeros(0, dtype=torch.long, device=device)
        flag = torch.zeros(0, dtype=torch.bool, device=device)
        real = torch.zeros(0, dtype=torch.float32, device=device)
        return cls(
            group_id=long,
            traj_id=long.clone(),
            step=long.clone(),
            state_key=long.clone(),
            next_state_key=long.clone(),
            history_keys=torch.zeros(0, history_width, dtype=torch.long, device=device),
            first_visit=flag,
            next_first_visit=flag.clone(),
            reward=real,
            outcome=real.clone(),
            done=flag.clone(),
        )

    # ------------------------------------------------------------------ access
    @property
    def num_rows(self) -> int:
        """Number of step rows."""
        return int(self.group_id.shape[0])

    def __len__(self) -> int:
        return self.num_rows

    @property
    def device(self) -> torch.device:
        """The device every tensor lives on."""
        return self.group_id.device

    @property
    def prefix_key(self) -> torch.Tensor:
        """``K_t^(∞)``: the last column of ``history_keys``."""
        return self.history_keys[:, -1]

    def to(self, device: torch.device | str) -> StepBatch:
        """A copy of the batch on ``device`` (``self`` when already there)."""
        device = torch.device(device)
        if device == self.device:
            return self
        moved = {
            f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).to(device))
            for f in dataclasses.fields(self)
        }
        return StepBatch(**moved)


def _visit_flags(rows: list[Mapping[str, Any]], fields: dict[str, Any], next_keys: list, flags: list) -> list:
    """``f_{t+1}`` for records that give ``next_state_key`` but no flag: new in the rollout so far."""
    seen: dict[int, list[tuple[int, int]]] = {}
    for traj, step, key in zip(
        fields["traj_id"].tolist(), fields["step"].tolist(), fields["state_key"].tolist(), strict=False
    ):
        seen.setdefault(traj, []).append((step, key))
    out = list(flags)
    for i, (traj, step) in enumerate(zip(fields["traj_id"].tolist(), fields["step"].tolist(), strict=False)):
        if next_keys[i] is not None and flags[i] is None:
            earlier = {key for s, key in seen[traj] if s <= step}
            out[i] = int(next_keys[i]) != 0 and int(next_keys[i]) not in earlier
    return out


class _AttrView(Mapping):
    """Read-only mapping view of an object's attributes (records given as objects)."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self._obj, name)
        except AttributeError:
            raise KeyError(name) from None

    def __iter__(self):
        return iter(RECORD_FIELDS)

    def __len__(self) -> int:
        return len(RECORD_FIELDS)

"""A small int64-keyed table of float64 columns, kept sorted for ``torch.searchsorted`` lookups.

The cross-iteration state of 3SPO (visit and success counts) and ProGPO-R (moving
averages of visits and outcomes) are such tables. Lookups and merges are vectorized.

>>> import torch
>>> table = KeyTable.empty(2).merge(torch.tensor([5, 3]), torch.tensor([[1.0, 0.0], [2.0, 1.0]]))
>>> table.lookup(torch.tensor([3, 4, 5])).tolist()
[[2.0, 1.0], [0.0, 0.0], [1.0, 0.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["KeyTable"]


@dataclass(frozen=True)
class KeyTable:
    """Sorted unique ``keys`` (int64 ``[K]``) and their ``values`` (float64 ``[K, C]``)."""

    keys: torch.Tensor
    values: torch.Tensor

    @classmethod
    def empty(cls, columns: int, device: torch.device | str | None = None) -> KeyTable:
        """A table with no keys and ``columns`` value columns."""
        return cls(
            torch.zeros(0, dtype=torch.long, device=device),
            torch.zeros(0, columns, dtype=torch.float64, device=device),
        )

    def __len__(self) -> int:
        return int(self.keys.numel())

    def to(self, device: torch.device | str) -> KeyTable:
        """The table on ``device``."""
        return KeyTable(self.keys.to(device), self.values.to(device))

    def lookup(self, query: torch.Tensor) -> torch.Tensor:
        """Values of ``query`` keys (float64 ``[len(query), C]``); missing keys give zeros."""
        table = self.to(query.device)
        out = torch.zeros(query.shape[0], table.values.shape[1], dtype=torch.float64, device=query.device)
        if len(table) == 0 or query.numel() == 0:
            return out
        query = query.contiguous()
        pos = torch.searchsorted(table.keys, query).clamp_max(len(table) - 1)
        found = table.keys.index_select(0, pos) == query
        return torch.where(found[:, None], table.values.index_select(0, pos), out)

    def merge(self, keys: torch.Tensor, values: torch.Tensor, *, decay: float = 1.0) -> KeyTable:
        """A new table: ``decay · self + Σ values`` per key (``keys`` may repeat)."""
        device = keys.device
        table = self.to(device)
        all_keys = torch.cat([table.keys, keys])
        all_values = torch.cat([table.values * decay, values.to(torch.float64)])
        if all_keys.numel() == 0:
            return KeyTable.empty(table.values.shape[1], device)
        uniques, inverse = torch.unique(all_keys, return_inverse=True)
        summed = torch.zeros(uniques.numel(), all_values.shape[1], dtype=torch.float64, device=device)
        return KeyTable(uniques, summed.index_add_(0, inverse, all_values))

    def prune(self, column: int, below: float) -> KeyTable:
        """Drop keys whose ``values[:, column]`` is below ``below`` (decayed to nothing)."""
        keep = self.values[:, column] >= below
        return KeyTable(self.keys[keep], self.values[keep])

    def state_dict(self) -> dict[str, torch.Tensor]:
        """CPU tensors for a checkpoint."""
        return {"keys": self.keys.cpu(), "values": self.values.cpu()}

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> KeyTable:
        """Inverse of :meth:`state_dict`."""
        keys = torch.as_tensor(state["keys"], dtype=torch.long)
        values = torch.as_tensor(state["values"], dtype=torch.float64)
        if values.dim() != 2 or values.shape[0] != keys.shape[0]:
            raise ValueError(
                f"corrupt table state: {keys.shape[0]} keys but values of shape {tuple(values.shape)}"
            )
        return cls(keys, values)

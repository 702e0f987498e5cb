"""The interface every hidden-state backend implements (transformers is the reference one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from draftgen_contracts import hidden_state_layout

if TYPE_CHECKING:  # torch is imported by the backends only
    import torch

FINAL_STATES = tuple(hidden_state_layout.FINAL_STATES)


@dataclass
class SampleStates:
    """One sample's states, unpadded, on the CPU: `aux` [L, K, H] and `final` [L, H]."""

    aux: torch.Tensor
    final: torch.Tensor


class Backend(Protocol):
    num_layers: int
    hidden_size: int
    dtype: str  # the run's storage dtype; the returned states are in it, or in bf16 for fp8

    def extract(self, sequences: list[list[int]]) -> list[SampleStates]:
        """States of each sequence, in input order, each exactly as long as its sequence."""
        ...

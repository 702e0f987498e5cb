"""The drafters an extraction serves, the target layers each reads, and which trainer's export takes
which (docs/eagle3.md#drafters).

Layer numbers are 0-based decoder layers: layer i's output (transformers' `output_hidden_states`
index i + 1; speculators and vLLM number the same states i + 1). Every extraction stores the final
state besides (spec.extraction.finalState), once, whatever the drafters.

- eagle3: three layers {1, N/2-1, N-4}: SpecForge's EAGLE-3 capture default, and speculators'
  `resolve_target_layer_ids` default [2, N//2, N-3] in its numbering (speculators/models/utils.py,
  speculators 0.9.0), the same layers.
- dflash: five layers spread from 1 to N-4, SpecForge's `build_target_layer_ids(N, 5)`
  (specforge/modeling/draft/dflash.py, specforge 0.2.0): one target layer per draft layer, five as
  in the published DFlash drafters; speculators' converter documents the same set for a 36-layer
  target, [2, 10, 18, 26, 34] in its numbering (speculators/convert/entrypoints.py).
- mtp: no auxiliary layer: an MTP head reads the last layer's output, the pre-norm final state
  (speculators/models/mtp/core.py `target_layer_ids` = [N] in its numbering).
"""

from __future__ import annotations

DRAFTERS = ("eagle3", "dflash", "mtp")
DFLASH_TARGET_LAYERS = 5
# The drafters each trainer's state export writes a layout for, at the installed versions: SpecForge
# 0.2.0 registers eagle3 and dflash (specforge/algorithms/), no MTP; speculators 0.9.0 all three.
EXPORT_DRAFTERS = {"specforge": ("eagle3", "dflash"), "speculators": ("eagle3", "dflash", "mtp")}
# The one export that never reads the final state: SpecForge's DFlash reads `hidden_states` alone
# (specforge/algorithms/common/dflash_family_data.py), so it takes states of either final state.
IGNORES_FINAL_STATE = {("specforge", "dflash")}


def eagle3_layers(num_layers: int) -> list[int]:
    return [1, num_layers // 2 - 1, num_layers - 4]


def dflash_layers(num_layers: int) -> list[int]:
    """SpecForge's `build_target_layer_ids(num_layers, 5)`: Python's round, as it rounds."""
    start, end = 1, num_layers - 3
    return [int(round(start + i * (end - start) / (DFLASH_TARGET_LAYERS - 1))) for i in range(DFLASH_TARGET_LAYERS)]


def drafter_layers(drafter: str, num_layers: int, explicit: list[int] | None = None) -> list[int]:
    """The auxiliary layers `drafter` reads: an explicit list replaces every default but MTP's (none)."""
    if drafter not in DRAFTERS:
        raise ValueError(f"drafter {drafter!r}: expected one of {DRAFTERS}")
    if drafter == "mtp":
        return []
    if explicit:
        return list(explicit)
    return eagle3_layers(num_layers) if drafter == "eagle3" else dflash_layers(num_layers)


def layers_to_store(drafters: list[str], num_layers: int, explicit: list[int] | None = None) -> list[int]:
    """What one forward stores: an explicit list as given, else every auxiliary layer some drafter reads,
    once, in layer order."""
    if explicit:
        return list(explicit)
    return sorted({layer for d in drafters for layer in drafter_layers(d, num_layers)})


def exports_for(kind: str, drafters: list[str]) -> list[str]:
    """The drafters `kind`'s export writes a layout for, of those served, in DRAFTERS' order."""
    return [d for d in DRAFTERS if d in drafters and d in EXPORT_DRAFTERS[kind]]


def export_folder(kind: str, drafter: str) -> str:
    """Under OUT/exports/: EAGLE-3's export keeps the trainer's name, the others add the drafter's."""
    return kind if drafter == "eagle3" else f"{kind}-{drafter}"


def export_aux_count(kind: str, drafter: str, layers: list[int]) -> int:
    """Auxiliary states per token in `kind`'s export for `drafter`, which reads `layers` (the final state
    aside): speculators' MTP layout repeats the final state as its one auxiliary state (its loader takes
    the last of `hidden_states` as the final state and the others as the drafter's input)."""
    return 1 if (kind, drafter) == ("speculators", "mtp") else len(layers)


def problem(drafters: list[str], explicit: list[int] | None) -> str | None:
    """Why this choice cannot be extracted, or None."""
    if not drafters:
        return "name at least one drafter"
    unknown = [d for d in drafters if d not in DRAFTERS]
    if unknown:
        return f"drafters {unknown}: expected some of {list(DRAFTERS)}"
    if set(drafters) == {"mtp"} and not explicit:
        # Both backends capture at least one auxiliary layer alongside the final state.
        return "mtp reads the final state alone; serve it with eagle3 or dflash, or list layers explicitly"
    return None

"""`specforge train --config <file>` with one change, for a machine without an accelerator.

SpecForge 0.2.0 computes its EAGLE-3 loss with a Triton kernel only (`LogSoftmaxLoss`,
specforge/core/loss.py, launched at line 185), which needs a GPU driver. The same file keeps the
loss's reference implementation (`_compute_loss`, "Reference implementation", the same formula in
torch, wrapped in `torch.compile`); this runs SpecForge's own command line with that reference in
the kernel's place. Everything else is SpecForge's: its config, assembly, offline reader, collation,
DDP wrapping (`training.fsdp_sharding: NO_SHARD`; FSDP itself needs an accelerator), BF16 optimizer,
evaluation and checkpoints.

Run as `python specforge_on_cpu.py run.yaml` with the trainer packages on PYTHONPATH.
"""

import sys

import specforge.core.loss as loss


def reference_loss(logits, target_p, position_mask):
    """SpecForge's reference, without torch.compile (no C++ toolchain is assumed)."""
    return loss._compute_loss._torchdynamo_orig_callable(logits, target_p, position_mask)


if __name__ == "__main__":
    loss.LogSoftmaxLoss.apply = staticmethod(reference_loss)
    from specforge.cli import main

    sys.exit(main(["train", "--config", sys.argv[1]]))

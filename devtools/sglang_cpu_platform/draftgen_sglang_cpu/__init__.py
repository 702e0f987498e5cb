"""An SGLang platform plugin: SGLang's own CPU platform, with every fused op on its pure-torch path.

Why: the PyPI sgl-kernel holds CUDA builds only, so SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1)
fails at import on its CPU kernels, and plain `--device cpu` reaches ops whose fallback imports vLLM.
SGLang picks a platform from the entry points of the group `sglang.srt.platforms`
(sglang 0.5.23, python/sglang/srt/platforms/__init__.py `_resolve_platform`): with
SGLANG_PLATFORM=draftgen_cpu it calls `activate()` and instantiates the class it names. An
out-of-tree platform whose dispatch key is "native" makes each `CustomOp` run `forward_native`.
No SGLang file is changed.
"""

from sglang.srt.platforms.cpu import CpuSRTPlatform
from sglang.srt.platforms.device_mixin import PlatformEnum


class NativeCpuPlatform(CpuSRTPlatform):
    _enum = PlatformEnum.OOT

    def get_dispatch_key_name(self) -> str:
        return "native"


def activate() -> str:
    return f"{__name__}.NativeCpuPlatform"

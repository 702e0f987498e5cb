"""A config built like Kimi-K2.5's (`model_type: kimi_k25`, a vision-language wrapper with the
language model's config under `text_config`), loaded through `auto_map` as custom code. Copied into
the test model's folder; it runs only as remote code.

The language model is a Llama: SGLang 0.5.23 serves Kimi-K2.5 with its own `KimiK25ForConditionalGeneration`
(a DeepSeek-V3 with a MoonViT tower, sglang/srt/models/kimi_k25.py), which is not a model the CPU
tests can run, so `architectures` names the `LlamaForCausalLM` SGLang knows. SGLang builds that
class from the top-level config (sglang/srt/model_loader/loader.py `_initialize_model` passes
`hf_config`), so this config answers the text model's attributes it does not hold itself from
`text_config`, as the Llama in the wrapper needs.
"""

from transformers import LlamaConfig, PretrainedConfig


class KimiLikeConfig(PretrainedConfig):
    model_type = "kimi_like"
    sub_configs = {"text_config": LlamaConfig}

    def __init__(self, text_config=None, **kwargs):
        if isinstance(text_config, dict):
            text_config = LlamaConfig(**text_config)
        self.text_config = text_config if text_config is not None else LlamaConfig()
        super().__init__(**kwargs)

    def __getattr__(self, name):
        # Only for what normal lookup did not find; never while the object is half-built (copy, pickle).
        text = self.__dict__.get("text_config")
        if text is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(text, name)

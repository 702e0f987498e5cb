"""The test model's transformers class, loaded through `auto_map` as custom code: the Llama of the
config's `text_config`, whose weights keep Llama's names (`model.layers.N...`), so SGLang's
`LlamaForCausalLM` and this class load the same checkpoint. Copied into the model's folder."""

from transformers import LlamaForCausalLM

from .configuration_kimi import KimiLikeConfig


class KimiLikeForCausalLM(LlamaForCausalLM):
    config_class = KimiLikeConfig

"""A slow tokenizer over tiktoken, built the way Kimi-K2 / K2.5 ship theirs: loaded through
`auto_map` (`tokenization_kimi.TikTokenTokenizer`) from a `tiktoken.model` file of base64 BPE ranks,
its special tokens numbered after the ranks (the named ones from `added_tokens_decoder`, the rest
reserved), a `PreTrainedTokenizer` subclass whose `apply_chat_template` sorts the tools' keys before
rendering. This file is copied into the test model's folder and runs only as remote code
(`trust_remote_code=True`), as the real one does; it is draftgen's own, written for the tests.
"""

import os
from shutil import copyfile

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers.tokenization_utils import PreTrainedTokenizer

VOCAB_FILES_NAMES = {"vocab_file": "tiktoken.model"}
NUM_RESERVED_SPECIAL_TOKENS = 64
# Han runs first, then words, numbers of up to three digits, punctuation and whitespace runs (the
# shape of Kimi's pattern; tiktoken's regex engine supports the classes used).
PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?\p{L}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def bytes_to_unicode():
    """Each byte as a printable character (GPT-2's mapping), so a token's bytes are a str."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    characters, extra = [], 0
    for b in range(256):
        if b in printable:
            characters.append(chr(b))
        else:
            characters.append(chr(256 + extra))
            extra += 1
    return dict(zip(range(256), characters))


def sorted_keys(value):
    """Dicts with their keys sorted, at every depth: the tools render the same whatever their order."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


class TikTokenTokenizer(PreTrainedTokenizer):
    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, bos_token="[BOS]", eos_token="[EOS]", unk_token=None, pad_token=None,
                 additional_special_tokens=None, added_tokens_decoder=None, **kwargs):
        self.vocab_file = vocab_file
        ranks = load_tiktoken_bpe(vocab_file)
        base = len(ranks)
        named = {int(i): getattr(t, "content", t) for i, t in (added_tokens_decoder or {}).items()}
        self.special_tokens = {named.get(i, f"<|reserved_token_{i}|>"): i
                               for i in range(base, base + NUM_RESERVED_SPECIAL_TOKENS)}
        self.model = tiktoken.Encoding(name=os.path.basename(vocab_file), pat_str=PATTERN,
                                       mergeable_ranks=ranks, special_tokens=self.special_tokens)
        byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in byte_encoder.items()}
        self.decoder = {i: "".join(byte_encoder[b] for b in self.model.decode_single_token_bytes(i))
                        for i in range(base)}
        self.decoder.update({i: t for t, i in self.special_tokens.items()})
        self.encoder = {t: i for i, t in self.decoder.items()}
        super().__init__(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, pad_token=pad_token,
                         additional_special_tokens=additional_special_tokens,
                         added_tokens_decoder=added_tokens_decoder, **kwargs)

    @property
    def vocab_size(self):
        return self.model.n_vocab

    def get_vocab(self):
        return dict(self.encoder)

    def _tokenize(self, text, **kwargs):
        # Called on the text between special tokens, which the base class has split off.
        return [self.decoder[t] for t in self.model.encode_ordinary(text)]

    def _convert_token_to_id(self, token):
        return self.encoder.get(token)

    def _convert_id_to_token(self, index):
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens):
        text = "".join(tokens)
        return bytearray(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")

    def save_vocabulary(self, save_directory, filename_prefix=None):
        name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES["vocab_file"]
        target = os.path.join(save_directory, name)
        if os.path.abspath(self.vocab_file) != os.path.abspath(target):
            copyfile(self.vocab_file, target)
        return (target,)

    def apply_chat_template(self, conversation, tools=None, tokenize=False, add_generation_prompt=True, **kwargs):
        return super().apply_chat_template(conversation, tools=sorted_keys(tools), tokenize=tokenize,
                                           add_generation_prompt=add_generation_prompt, **kwargs)

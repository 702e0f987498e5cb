"""The tokenizer preflight relies on: it loads, has a chat template where any dataset needs one, and
has the special tokens generation relies on (an end-of-sequence token, and ids inside the model's
vocabulary)."""

from __future__ import annotations

from dataclasses import dataclass

from jobrunner.shared.prompts import load_tokenizer

from .problem import PreflightProblem
from .remote_code import is_remote_code_refusal, refusal


@dataclass(frozen=True)
class TokenizerFacts:
    path: str
    vocab_size: int  # len(tokenizer): the base vocabulary and the added tokens
    eos_token: str
    eos_token_id: int
    has_chat_template: bool


def check_tokenizer(path: str, model_vocab_size: int, needs_template: bool, trust_remote_code: bool = False):
    """(the tokenizer, its facts); a PreflightProblem naming the path when it cannot serve the run."""
    try:
        tokenizer = load_tokenizer(path, trust_remote_code)
    except Exception as e:
        if is_remote_code_refusal(e):
            raise refusal(path) from None
        raise PreflightProblem(path, f"the tokenizer does not load: {type(e).__name__}: {e}"[:500]) from None
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if needs_template and not has_template:
        raise PreflightProblem(path, "the tokenizer has no chat template (chat_template in tokenizer_config.json, "
                                     "or chat_template.jinja), and a dataset of chat rows needs one")
    if tokenizer.eos_token_id is None:
        raise PreflightProblem(path, "the tokenizer has no eos_token: generation could never stop at a stop token")
    if tokenizer.eos_token_id >= model_vocab_size:
        raise PreflightProblem(path, f"eos_token {tokenizer.eos_token!r} has id {tokenizer.eos_token_id}, outside "
                                     f"the model's vocabulary of {model_vocab_size}")
    return tokenizer, TokenizerFacts(path=path, vocab_size=len(tokenizer), eos_token=str(tokenizer.eos_token),
                                     eos_token_id=int(tokenizer.eos_token_id), has_chat_template=has_template)

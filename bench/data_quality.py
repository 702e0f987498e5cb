"""Is the data any good: EAGLE-3 drafters trained with speculators' own code on four corpora of the
same prompts, each measured against the target on held-out prompts.

    .venv/bin/python bench/data_quality.py [--seeds 3] [--steps 200] [--json OUT]

The questions (issue 44, item 4): does regenerating the responses with the target help, against the
datasets' original responses (SpecForge PR #223 reported +10 % acceptance length on Qwen2.5-72B)? Do
responses cut at the budget (atBudget: cut) hurt, against the same corpus without them?

The setup, all on the CPU, all in this process:
- The target: the tiny Llama of the tests (8 layers, hidden 64, the tiny byte-level tokenizer),
  trained first on the "original" answers so that it is a language model with preferences of its
  own, as a released target is (a random one would make every comparison noise).
- The prompts: questions on the demo's topics; the original answers: templated human-style
  sentences (a different writer than the target, as a dataset's responses are).
- (a) regenerated: the target's own answers, sampled at temperature 0.7 (what draftgen asks SGLang
  for); (b) original: the dataset's answers; (c) regenerated with the last wave cut at the budget:
  the final `--wave` responses kept as prefixes of a uniformly random length, as `atBudget: cut`
  keeps the requests in flight; (d) = (c) without the cut responses.
- States: draftgen's own extraction backend (jobrunner/hidden_states/transformers_backend.py):
  EAGLE-3's three layers and the pre-norm final state, as speculators trains on.
- Drafters: speculators 0.9.0's EAGLE-3 draft (`build_draft_model`), `CollateFn` with its
  `shift_batch`, the loss and TTT steps its CLI configures (`get_trainer_kwargs`, eager loss), AdamW;
  the same steps, batch size and seed for every corpus. The draft vocabulary is the target's whole
  vocabulary (512), so no vocabulary map differs between corpora.
- The measure: speculators' own metrics on held-out prompts whose continuations are the target's
  greedy decoding: `full_acc_k`, the share of positions whose first k+1 draft tokens all equal the
  target's greedy tokens (k = 0 is top-1 agreement); the acceptance length is
  1 + sum_k full_acc_k, the mean tokens a greedy verification accepts per step with a 3-token draft
  chain (the verifier's bonus token included, vLLM's convention as speculators' metrics.py counts it).

Prints each corpus's acceptance and top-1 per seed, their means, and the two ratios: regenerated /
original, and with cut / without cut.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from draftgen_dev.tiny_model import build_tiny_llama, build_tiny_tokenizer
from draftgen_dev.trainer_packages import use_trainer_packages

TOPICS = ["sorting a list", "the boiling point of water", "binary search", "a haiku about rain", "prime numbers",
          "HTTP status codes", "the Pythagorean theorem", "unit tests", "a packing list", "recursion"]
OPENERS = ["In short,", "Well,", "Put simply,", "Here is the idea:", "To begin,"]
VERBS = ["explains", "shows", "describes", "covers", "teaches"]
ENDINGS = ["That is the whole story.", "Try it yourself.", "It is simpler than it looks.", "Ask if unsure."]
VOCAB = 512
TEMPERATURE = 0.7
MAX_LEN = 2048


def questions(n: int, rng: random.Random) -> list[str]:
    return [f"Question {rng.randrange(1000)}: explain {rng.choice(TOPICS)} in {rng.randint(2, 6)} steps."
            for _ in range(n)]


def original_answer(question: str, rng: random.Random) -> str:
    topic = next(t for t in TOPICS if t in question)
    return (f"{rng.choice(OPENERS)} {topic} {rng.choice(VERBS)} a small idea. "
            f"First, look at {topic}. Then {rng.choice(VERBS).rstrip('s')} it again. {rng.choice(ENDINGS)}")


def encode(tok, question: str, answer: str | None) -> tuple[list[int], int]:
    """(ids, prompt length): the chat-templated prompt, and the answer with its end-of-turn."""
    prompt = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                     tokenize=True, return_dict=False)
    if answer is None:
        return list(prompt), len(prompt)
    full = tok.apply_chat_template([{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
                                   tokenize=True, return_dict=False)
    return list(full), len(prompt)


def train_target(model_dir: Path, tok, pairs: list[tuple[list[int], int]], steps: int, seed: int) -> None:
    """The tiny Llama fitted to the original answers (loss on answer tokens), saved in place."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(seed)
    for _ in range(steps):
        batch = rng.sample(pairs, 32)
        longest = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), longest), tok.pad_token_id)
        labels = torch.full((len(batch), longest), -100)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, (seq, prompt_len) in enumerate(batch):
            ids[row, :len(seq)] = torch.tensor(seq)
            labels[row, prompt_len:len(seq)] = torch.tensor(seq[prompt_len:])
            mask[row, :len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(model_dir)
    print(f"target: trained {steps} steps on the original answers, last loss {float(loss):.3f}", flush=True)


def generate(model_dir: Path, tok, prompts: list[list[int]], greedy: bool, seed: int, max_new: int) -> list[list[int]]:
    """The target's answers (prompt + response ids, up to its end of turn), left-padded batches."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos = tok.convert_tokens_to_ids(tok.eos_token)
    out = []
    for start in range(0, len(prompts), 32):
        chunk = prompts[start:start + 32]
        longest = max(map(len, chunk))
        ids = torch.tensor([[tok.pad_token_id] * (longest - len(p)) + p for p in chunk])
        mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in chunk])
        with torch.no_grad():
            made = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=not greedy,
                                  temperature=TEMPERATURE if not greedy else None, top_p=None, top_k=None,
                                  eos_token_id=eos, pad_token_id=tok.pad_token_id)
        for p, row in zip(chunk, made[:, longest:].tolist()):
            response = row[:row.index(eos) + 1] if eos in row else row
            out.append(p + response)
    return out


def states(model_dir: Path, samples: list[tuple[list[int], int]]) -> list[dict]:
    """speculators' dataset items (what its BaseDataset.__getitem__ returns, speculators/train/data.py),
    from draftgen's extraction backend."""
    from jobrunner.hidden_states.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(model_dir), None, final_state="pre-norm", dtype="fp32")
    items = []
    for start in range(0, len(samples), 32):
        chunk = samples[start:start + 32]
        for (ids, prompt_len), s in zip(chunk, backend.extract([ids for ids, _ in chunk])):
            mask = torch.zeros(len(ids), dtype=torch.long)
            mask[prompt_len:] = 1
            items.append({"hidden_states": s.aux.flatten(1).float(), "input_ids": torch.tensor(ids),
                          "verifier_last_hidden_states": s.final.float(), "loss_mask": mask,
                          "lengths": torch.tensor([len(ids)]), "position_ids": torch.arange(len(ids))})
    return items


def cut_last_wave(samples: list[tuple[list[int], int]], wave: int, rng: random.Random):
    """The last `wave` responses kept as prefixes of a uniform random length (at least one token):
    what atBudget: cut keeps of the requests in flight at the budget."""
    kept = samples[:-wave]
    cut = []
    for ids, prompt_len in samples[-wave:]:
        response = len(ids) - prompt_len
        cut.append((ids[:prompt_len + rng.randint(1, max(1, response - 1))], prompt_len))
    return kept + cut, kept


class Drafter:
    """speculators' EAGLE-3 draft, built and trained as its CLI builds and trains it (CPU steps)."""

    def __init__(self, target: Path, work: Path, train_items: list[dict], seed: int):
        import argparse as ap

        from speculators.model import SpeculatorModel
        from speculators.models.eagle3.data import shift_batch
        from speculators.train.cli import build_draft_model, parse_vocab_mappings
        from speculators.train.config import TrainConfig
        from speculators.train.data import CollateFn
        from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

        torch.manual_seed(seed)
        counts: dict[int, int] = {}
        for item in train_items:
            for t in item["input_ids"][item["loss_mask"].bool()].tolist():
                counts[t] = counts.get(t, 0) + 1
        d2t, t2d = build_vocab_mappings_from_distribution(counts, VOCAB, VOCAB)
        work.mkdir(parents=True, exist_ok=True)
        np.save(work / f"d2t-{VOCAB}.npy", d2t.numpy())
        np.save(work / f"t2d-{VOCAB}.npy", t2d.numpy())
        cfg = TrainConfig.from_flat({"verifier_name_or_path": str(target), "data_path": str(work),
                                     "draft_vocab_size": VOCAB, "save_path": str(work / "draft"),
                                     "draft_attn_impl": "sdpa", "hidden_states_dtype": "float32",
                                     "loss_implementation": "eager"})
        args = ap.Namespace(**cfg.flatten())
        d2t, t2d, size = parse_vocab_mappings(args)
        self.model = build_draft_model(args, SpeculatorModel.registry[args.speculator_type], t2d, d2t, size)
        self.kwargs, _ = type(self.model).get_trainer_kwargs(**vars(args))
        self.collate = CollateFn(MAX_LEN, hidden_size=self.model.config.transformer_layer_config.hidden_size,
                                 num_target_layers=len(self.model.target_layer_ids), dtype=torch.float32,
                                 preprocess=shift_batch)
        self.items = train_items

    def train(self, steps: int, batch: int, seed: int) -> float:
        rng = random.Random(seed)
        opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.model.train()
        for _ in range(steps):
            _, loss, _ = self.model(**self.collate(rng.sample(self.items, batch)), **self.kwargs)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return float(loss)

    def measure(self, items: list[dict]) -> dict:
        """speculators' own full_acc_k over the held-out items: top-1 and the acceptance length."""
        self.model.eval()
        sums: dict[str, float] = {}
        with torch.no_grad():
            for start in range(0, len(items), 8):
                _, _, metrics = self.model(**self.collate(items[start:start + 8]), **self.kwargs)
                for key, value in metrics.items():
                    sums[key] = sums.get(key, 0.0) + float(value)
        steps = sorted(int(k.split("_")[2]) for k in sums if k.startswith("full_acc_") and k.endswith("_sum"))
        full = [sums[f"full_acc_{k}_sum"] / sums[f"full_acc_{k}_total"] for k in steps]
        return {"top1": full[0], "acceptance": 1 + sum(full), "full_acc": full}


def run_seed(seed: int, args, base: Path) -> dict:
    rng = random.Random(seed)
    target = base / f"target-{seed}"
    tok_path = build_tiny_tokenizer(target)
    build_tiny_llama(target, vocab_size=VOCAB, seed=seed)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tok_path)
    train_q, eval_q = questions(args.prompts, rng), questions(args.eval_prompts, rng)
    originals = [encode(tok, q, original_answer(q, rng)) for q in train_q]
    train_target(target, tok, originals, args.target_steps, seed)
    prompts = [encode(tok, q, None) for q in train_q]
    regenerated = [(ids, p_len) for ids, (_, p_len) in zip(
        generate(target, tok, [p for p, _ in prompts], greedy=False, seed=seed, max_new=args.max_new), prompts)]
    held_out = [encode(tok, q, None) for q in eval_q]
    greedy = [(ids, p_len) for ids, (_, p_len) in zip(
        generate(target, tok, [p for p, _ in held_out], greedy=True, seed=seed, max_new=args.max_new), held_out)]
    with_cut, without_cut = cut_last_wave(regenerated, args.wave, rng)
    eval_items = states(target, greedy)
    corpora = {"original": originals, "regenerated": regenerated, "with cut": with_cut, "without cut": without_cut}
    result = {}
    for name, samples in corpora.items():
        items = states(target, samples)
        started = time.perf_counter()
        drafter = Drafter(target, base / f"draft-{seed}-{name.replace(' ', '-')}", items, seed)
        last = drafter.train(args.steps, args.batch, seed)
        result[name] = {**drafter.measure(eval_items), "train_loss": last, "samples": len(samples),
                        "response_tokens": sum(len(ids) - p for ids, p in samples),
                        "seconds": round(time.perf_counter() - started, 1)}
        r = result[name]
        print(f"seed {seed} {name:12s} samples {r['samples']:4d} response tokens {r['response_tokens']:6d} "
              f"top-1 {r['top1']:.3f} acceptance {r['acceptance']:.3f} ({r['seconds']} s)", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=400, help="training prompts")
    parser.add_argument("--eval-prompts", type=int, default=64, help="held-out prompts")
    parser.add_argument("--target-steps", type=int, default=300, help="steps fitting the target to the originals")
    parser.add_argument("--steps", type=int, default=200, help="drafter training steps, every corpus")
    parser.add_argument("--batch", type=int, default=8, help="samples per drafter step")
    parser.add_argument("--max-new", type=int, default=128, help="longest response the target writes (its "
                        "answers end before; the original answers are about 95 tokens)")
    parser.add_argument("--wave", type=int, default=64, help="responses in flight at the budget (cut)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    use_trainer_packages()
    from loguru import logger  # speculators' logging: its loading messages would bury the table

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    results = {}
    with tempfile.TemporaryDirectory(prefix="data-quality-") as tmp:
        for seed in range(args.seeds):
            results[seed] = run_seed(seed, args, Path(tmp))
    names = list(results[0])
    mean = {n: {m: float(np.mean([results[s][n][m] for s in results])) for m in ("top1", "acceptance")}
            for n in names}
    print("\nmean over seeds:")
    for n in names:
        print(f"  {n:12s} top-1 {mean[n]['top1']:.3f}  acceptance {mean[n]['acceptance']:.3f}")
    regen = mean["regenerated"]["acceptance"] / mean["original"]["acceptance"]
    cut = mean["with cut"]["acceptance"] / mean["without cut"]["acceptance"]
    per_seed_regen = [results[s]["regenerated"]["acceptance"] / results[s]["original"]["acceptance"] for s in results]
    per_seed_cut = [results[s]["with cut"]["acceptance"] / results[s]["without cut"]["acceptance"] for s in results]
    print(f"regenerated / original acceptance: {regen:.3f} (per seed {', '.join(f'{r:.3f}' for r in per_seed_regen)})")
    print(f"with cut / without cut acceptance: {cut:.3f} (per seed {', '.join(f'{r:.3f}' for r in per_seed_cut)})")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results, "mean": mean,
                                               "regenerated_over_original": regen, "cut_over_uncut": cut}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

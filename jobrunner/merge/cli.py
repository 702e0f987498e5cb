"""`jobrunner merge`'s command line: the settings from defaults, a config file and the options; the
exports; a full volume said as such."""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import fields
from pathlib import Path

from draftgen_contracts import exit_codes
from jobrunner.shared.config import CONFIGURATION_ERRORS
from jobrunner.shared.full_volume import full_at, ran_out_of_room, say_on_stderr
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import TRUNCATED_POLICIES, MergeSettings
from jobrunner.preflight.model_facts import model_facts
from jobrunner.preflight.problem import PreflightProblem


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-root", required=True, help="the generation output root (holds generate/)")
    parser.add_argument("--corpus-dir", help="where the corpus goes (default: OUTPUT_ROOT/corpus)")
    parser.add_argument("--config", help="YAML or JSON file with merge settings (command-line options win)")
    parser.add_argument("--truncated", choices=TRUNCATED_POLICIES, help="policy for finish_reason 'length' (default mark)")
    parser.add_argument("--dedupe", action=argparse.BooleanOptionalAction, default=None,
                        help="remove exact duplicates by token content (default on)")
    parser.add_argument("--seed", type=int, help="shuffle, dedupe-hash and split seed (default 0)")
    parser.add_argument("--eval-fraction", type=float, help="share of samples in the eval split (default 0.01)")
    parser.add_argument("--shard-records", type=int, help="records per shard (default 100000; 0: no limit)")
    parser.add_argument("--shard-bytes", type=int, help="bytes per shard (default 1 GiB; 0: no limit)")
    parser.add_argument("--memory-limit-mb", type=int, help="memory the shuffle may use (default 512)")
    parser.add_argument("--export", action="append", default=None, choices=["hf-parquet", "speculators-jsonl"],
                        help="also write an export under CORPUS_DIR/exports/ (repeatable)")
    parser.add_argument("--draft-vocab-size", type=int,
                        help="the EAGLE-3 draft vocabulary's size for the d2t/t2d maps (default 32000; 0: none)")
    parser.add_argument("--model", help="the target model's folder: its config.json's vocab_size sizes the maps")


def settings_from(args: argparse.Namespace) -> tuple[MergeSettings, list[str]]:
    """Defaults, overridden by the config file, overridden by the command line."""
    values: dict = {}
    exports: list[str] = []
    if args.config:
        import yaml  # JSON is YAML too

        loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{args.config}: expected a mapping of merge settings")
        known = {f.name for f in fields(MergeSettings)}
        unknown = set(loaded) - known - {"export"}
        if unknown:
            raise ValueError(f"{args.config}: unknown settings {sorted(unknown)}; known: {sorted(known | {'export'})}")
        exports = list(loaded.pop("export", []) or [])
        values.update(loaded)
    for f in fields(MergeSettings):
        v = getattr(args, f.name, None)
        if v is not None:
            values[f.name] = v or None if f.name.startswith("shard_") else v
    if args.export is not None:
        exports = args.export
    return MergeSettings(**values), exports


def target_vocab_size(model: str | None) -> int | None:
    """The model's vocabulary size from its config.json, or None (the corpus is still merged, with the
    token counts but no draft maps: the manifest's `vocabulary.note` says why)."""
    if not model:
        return None
    try:
        return model_facts(model).vocab_size
    except PreflightProblem as e:
        print(f"jobrunner merge: no draft vocabulary maps: {e}", file=sys.stderr)
        return None


def main(args: argparse.Namespace) -> int:
    corpus_dir = Path(args.corpus_dir or Path(args.output_root) / "corpus")
    try:
        settings, exports = settings_from(args)
        merge_corpus(args.output_root, corpus_dir, settings, target_vocab_size=target_vocab_size(args.model))
        if exports:
            from jobrunner.merge.exports import export_corpus

            for kind in exports:
                path = export_corpus(corpus_dir, kind)
                print(f"merge: export {kind} -> {path}")
    except CONFIGURATION_ERRORS as e:
        print(f"jobrunner merge: error: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    except Exception as e:
        if not ran_out_of_room(e, Path(args.output_root)):
            raise
        # The corpus's manifest goes last (commit): the last whole corpus and the records stay as they were.
        shutil.rmtree(corpus_dir / ".merge-work", ignore_errors=True)  # its room back
        say_on_stderr(f"jobrunner merge: {full_at(Path(args.output_root))}; the merge stopped, the records untouched")
        return exit_codes.VOLUME_FULL
    return exit_codes.OK

"""`jobrunner <command>`: one entry point, one module per command.

Each command module defines `add_arguments(parser)` and `main(args) -> int`; it is imported only
when its command runs, so `jobrunner simulate` never pays for torch and `jobrunner merge` never
for transformers. `dispatch` serves `draftgen`'s commands the same way.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from draftgen_contracts import exit_codes, provenance
from jobrunner.shared import tokenizers_only

COMMANDS = {
    "preflight": ("jobrunner.preflight.cli", "check a run on the CPU before any GPU: model, tokenizer, datasets"),
    "generate": ("jobrunner.generate.cli", "generate responses through SGLang /generate within token budgets"),
    "stats": ("jobrunner.stats.cli", "render per-dataset statistics as a table and PNG histograms"),
    "merge": ("jobrunner.merge.cli", "merge every dataset's output into one shuffled, split, sharded corpus"),
    "extract": ("jobrunner.hidden_states.cli", "extract the target model's EAGLE-3 hidden states over the corpus"),
    "copy-code": ("jobrunner.copy_code.cli", "copy jobrunner's packages for another image's Python (SGLang extraction)"),
    "validate": ("jobrunner.validate.cli", "check a corpus and its hidden states: ids, lengths, masks, values, samples"),
    "resolve-leader": ("jobrunner.group.leader_address", "write a multi-node replica's leader IP (an init container)"),
    "rank": ("jobrunner.group.rank", "a multi-node replica pod's main container: generate on rank 0, follow on others"),
    "simulate": ("draftgen_simulator.cli", "run the SGLang simulator (tests, demos, benchmarks)"),
}
# Commands that load a tokenizer and never a tensor: they run transformers without torch
# (jobrunner.shared.tokenizers_only), two CPU seconds less per start. `rank` runs generate.
TOKENIZERS_ONLY = {"preflight", "generate", "rank"}


def dispatch(prog: str, description: str, commands: dict[str, tuple[str, str]], argv: list[str]) -> int:
    """Run `prog COMMAND ARGS...`: import the command's module, parse its own arguments, call main.
    `prog --version`: the installed package's version (the image tag and the chart's appVersion)."""
    if argv[:1] == ["--version"]:
        print(f"{prog} {provenance.draftgen_version()}")
        return exit_codes.OK
    if not argv or argv[0] not in commands:
        parser = argparse.ArgumentParser(prog=prog, description=description)
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for name, (_, help_text) in commands.items():
            sub.add_parser(name, help=help_text, add_help=False)
        parser.parse_args(argv[:1])  # prints usage or the error, and exits
        return exit_codes.BAD_CONFIG
    module_name, help_text = commands[argv[0]]
    module = importlib.import_module(module_name)
    command_parser = argparse.ArgumentParser(prog=f"{prog} {argv[0]}", description=help_text)
    module.add_arguments(command_parser)
    return int(module.main(command_parser.parse_args(argv[1:])) or exit_codes.OK)


def main(argv: list[str] | None = None) -> int:
    """The `jobrunner` process. Only a process of its own (no argv given) hides torch from the commands
    that only tokenize: a caller in the same process may need torch after them."""
    if argv is None and sys.argv[1:2] and sys.argv[1] in TOKENIZERS_ONLY:
        tokenizers_only.hide_torch()
    return dispatch("jobrunner", __doc__.splitlines()[0], COMMANDS, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

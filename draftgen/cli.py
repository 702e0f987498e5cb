"""`draftgen <command>`: the operator, the local runner, and the CRD.

    draftgen operator            run the Kubernetes operator (kopf)
    draftgen run spec.yaml       run a DatasetGeneration on this machine (SGLang URL or the simulator)
    draftgen crd                 print the CustomResourceDefinition
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "operator": ("draftgen_operator.main", "run the Kubernetes operator"),
    "run": ("draftgen.local_run", "run a DatasetGeneration on this machine"),
    "crd": ("draftgen.crd_cli", "print the DatasetGeneration CRD"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="draftgen", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("command", choices=list(COMMANDS))
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv[:1])
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    sub = argparse.ArgumentParser(prog=f"draftgen {argv[0]}", description=COMMANDS[argv[0]][1])
    module.add_arguments(sub)
    return int(module.main(sub.parse_args(argv[1:])) or 0)


if __name__ == "__main__":
    sys.exit(main())

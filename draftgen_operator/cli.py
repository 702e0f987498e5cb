"""`draftgen <command>`: the operator, the local runner, and the CRD.

    draftgen operator            run the Kubernetes operator (kopf)
    draftgen run spec.yaml       run a DatasetGeneration on this machine (SGLang URL or the simulator)
    draftgen crd                 print the CustomResourceDefinition
"""

from __future__ import annotations

import sys

from jobrunner.cli import dispatch

COMMANDS = {
    "operator": ("draftgen_operator.main", "run the Kubernetes operator"),
    "run": ("draftgen.local.cli", "run a DatasetGeneration on this machine"),
    "crd": ("draftgen.crd_cli", "print the DatasetGeneration CRD"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("draftgen", __doc__.splitlines()[0], COMMANDS, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

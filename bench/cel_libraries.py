"""Can `draftgen run` evaluate the CRD's own CEL rules instead of restating them in Python?

    .venv/bin/python bench/cel_libraries.py [--examples 2000]

Two maintained CEL implementations on PyPI, `cel-python` 0.5.0 (`celpy`, pure Python, RE2 for
`matches`) and `common-expression-language` 0.10.0 (`cel`, the Rust `cel` crate), each evaluate
every rule draftgen writes into the CRD's spec (draftgen.admission.SPEC_RULES) on the specs of the
differential admission test's manifests (draftgen_dev.manifest_mutations, seeded) whose field types
hold, as the API server sees them (defaults applied, draftgen.admission.as_applied). The reference
is the API server itself, a local one started here: each spec goes to it as a strict server-side
dry run, and a rule is refused there when its message is among the refusal's causes. Kubernetes' own
CEL libraries are in neither: the rules use `isQuantity` (Kubernetes' quantity library) and `split`
(cel-go's strings extension), given to each as the Python functions of draftgen.cel_rules. Per
rule: the verdicts equal to the API server's, the evaluation errors, and the microseconds per
evaluation (the spec converted, the rule compiled and run).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftgen import api  # noqa: E402
from draftgen.admission import SPEC_RULES, as_applied  # noqa: E402
from draftgen.cel_rules import is_quantity, split  # noqa: E402
from draftgen.local.spec_file import SPEC_SCHEMA, as_the_api_server_reads  # noqa: E402
from draftgen_contracts import names  # noqa: E402


def with_cel_python(spec_json: dict):
    import celpy
    import celpy.celtypes as ct

    env = celpy.Environment()
    functions = {"isQuantity": lambda s: ct.BoolType(is_quantity(str(s))),
                 "split": lambda s, sep: ct.ListType([ct.StringType(p) for p in split(str(s), str(sep))])}
    activation = {"self": celpy.json_to_cel(spec_json)}
    return lambda rule: bool(env.program(env.compile(rule), functions=functions).evaluate(activation))


def with_common_expression_language(spec_json: dict):
    import cel

    context = cel.Context()
    context.add_function("isQuantity", is_quantity)
    context.add_function("split", split)
    context.add_variable("self", spec_json)
    return lambda rule: cel.compile(rule).execute(context) is True


LIBRARIES = {"cel-python 0.5.0": with_cel_python, "common-expression-language 0.10.0": with_common_expression_language}


def refused_rules(custom, spec_json: dict) -> set[str]:
    """The messages of the rules the API server refuses this spec by (none when it admits it)."""
    import json

    from kubernetes import client

    body = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "bench"}, "spec": spec_json}
    try:
        custom.create_namespaced_custom_object(names.GROUP, names.VERSION, "bench", names.PLURAL, body,
                                               dry_run="All", field_validation="Strict")
        return set()
    except client.ApiException as e:
        causes = (json.loads(e.body).get("details") or {}).get("causes") or []
    return {rule.message for rule in SPEC_RULES for c in causes
            if c.get("field") == f"spec{rule.field_path}" and rule.message in c.get("message", "")}


def generated_specs(examples: int) -> list[api.DatasetGenerationSpec]:
    """The specs of the differential test's manifests whose field types hold (the rules' input)."""
    from hypothesis import HealthCheck, given, settings
    from pydantic import ValidationError

    from draftgen_dev.manifest_mutations import mutated_manifests

    specs = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_manifests())
    def collect(case):
        manifest, _ = case
        read, refused = as_the_api_server_reads(manifest["spec"], SPEC_SCHEMA)
        try:
            spec = api.DatasetGenerationSpec.model_validate(read, strict=True)
        except (ValidationError, TypeError):
            return
        if not refused:  # an integer beyond 64 bits: a type the API server refuses before any rule
            specs.append(spec)

    collect()
    return specs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    args = parser.parse_args()
    import tempfile

    from kubernetes import client

    from draftgen.crd import crd
    from draftgen_dev.cluster.controlplane import LocalCluster

    specs = [as_applied(s) for s in generated_specs(args.examples)]
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="cel-bench-")))
    cluster.start()
    try:
        api_client = cluster.api_client()
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd())
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "bench"}})
        custom = client.CustomObjectsApi(api_client)
        time.sleep(3)  # the CRD served
        server = [refused_rules(custom, s) for s in specs]
    finally:
        cluster.stop()
    print(f"{len(specs)} specs whose field types hold, of {args.examples} generated manifests; "
          f"{sum(bool(r) for r in server)} refused by the API server's rules")
    print(f"{len(SPEC_RULES)} rules; per library: verdicts equal to the API server's / errors / us per evaluation")
    identical, differ, seconds = Counter(), [], Counter()
    for i, rule in enumerate(SPEC_RULES):
        row = [f"{i:2d} {rule.field_path:21s} {rule.cel[:50]:50s}"]
        for name, library in LIBRARIES.items():
            equal = errors = 0
            started = time.perf_counter()
            for spec, refused in zip(specs, server):
                try:
                    same = library(spec)(rule.cel) == (rule.message not in refused)
                except Exception:
                    errors += 1
                    continue
                equal += same
                if not same:
                    differ.append((name, i, spec, refused))
            seconds[name] += time.perf_counter() - started
            micros = (time.perf_counter() - started) / max(len(specs), 1) * 1e6
            identical[name] += equal == len(specs)
            row.append(f"{name.split()[0]}: {equal}/{len(specs)}, {errors} err, {micros:.0f} us")
        print(" | ".join(row))
    for name in LIBRARIES:
        print(f"{name}: {identical[name]} of {len(SPEC_RULES)} rules identical to the API server on every spec")
    (peer, peer_s), (chosen, chosen_s) = seconds.items()
    print(f"{chosen} takes {chosen_s / peer_s:.2f} of {peer}'s time over every rule and spec")
    for name, i, spec, refused in differ:
        print(f"differs: {name}, rule {i}, the API server refusing by {sorted(refused) or 'none'}: {spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`jobrunner preflight --config F --model DIR`: check a run on the CPU before any GPU (jobrunner.preflight)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from draftgen_contracts import exit_codes, names
from jobrunner.shared.config import ConfigError, load_config

from .run import run_preflight, write_findings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the run's GenerateConfig (YAML or JSON)")
    parser.add_argument("--model", required=True, help="the model folder (its config.json)")
    parser.add_argument("--output", default=None, help=f"findings JSON; default <output_root>/{names.PREFLIGHT_KEY}")


def main(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return exit_codes.BAD_CONFIG
    findings = run_preflight(config, args.model)
    output = args.output or str(Path(config.output_root) / names.PREFLIGHT_KEY)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    write_findings(findings, output)
    if config.coordination.kind == "kubernetes":  # a pod: the operator reads them from the ConfigMap
        from jobrunner.shared.report_patch import patch_report

        patch_report(names.preflight_report_name(config.coordination.name), names.PREFLIGHT_KEY, findings.to_json())
    for d in findings.datasets:
        reach = "" if d.budget_reachable else (f"; the budget looks out of reach: about {d.expected_response_tokens:,} "
                                               f"tokens from its rows")
        ignored = f"; not honoured (rows): {d.ignored_fields}" if d.ignored_fields else ""
        print(f"{d.name}: {d.rows} rows, {d.usable_rows} usable, {d.prompt_tokens:,} prompt tokens, "
              f"skipped {d.skipped_by_reason or 'none'}, {d.files} file(s){reach}{ignored}")
    if findings.problem is not None:
        print(f"preflight: {findings.problem.says()}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    print(f"preflight: ok in {findings.seconds:.2f} s ({findings.rows_per_second:,.0f} rows/s); "
          f"findings in {output}")
    return exit_codes.OK

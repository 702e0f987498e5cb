"""`jobrunner preflight`: everything about a run that can be checked on a CPU, before any GPU is taken
(docs/preflight.md). It reads the model's config.json, loads the tokenizer, and scans every dataset once
with it, as generation will read it; the findings go to a JSON file on the volume (and, in a pod, to
the operator). Anything that makes the run impossible is one PreflightProblem naming the file, the row
and the field, and the exit status says BAD_CONFIG."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import Field

from draftgen_contracts.preflight_report import PreflightReport
from draftgen_contracts.sglang_auth import ServerKeys
from jobrunner.shared.atomic import write_bytes_atomically
from jobrunner.shared.config import GenerateConfig, missing_inputs
from jobrunner.shared.prompts import PromptPreparer

from .dataset_scan import DatasetFindings, scan_dataset
from .model_facts import ModelFacts, model_facts
from .problem import PreflightProblem
from .remote_code import check_config_trust
from .served_model import check_served_model
from .tokenizer_check import TokenizerFacts, check_tokenizer


class Findings(PreflightReport):
    """The findings document its readers parse (draftgen_contracts.preflight_report), with the
    writer's details for people: the tokenizer's facts, the context length the scan used, and what
    each dataset's scan saw beyond its report."""

    model: ModelFacts | None = None
    datasets: list[DatasetFindings] = Field(default_factory=list)
    tokenizer: TokenizerFacts | None = None
    context_length: int | None = None

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def run_preflight(config: GenerateConfig, model_dir: str) -> Findings:
    """The findings; `problem` set (and the scan stopped) at the first thing that makes the run impossible."""
    started = time.monotonic()
    findings = Findings()
    try:
        _check(config, model_dir, findings)
    except PreflightProblem as e:
        findings.problem = e.problem
    seconds = time.monotonic() - started
    findings.seconds = round(seconds, 3)
    findings.rows_per_second = round(sum(d.rows for d in findings.datasets) / seconds, 1) if seconds else 0.0
    return findings


def _check(config: GenerateConfig, model_dir: str, findings: Findings) -> None:
    missing = missing_inputs(config)
    if missing:  # a typo in a path, a volume holding something else
        raise PreflightProblem("the run's inputs", "; ".join(missing))
    findings.model = model = model_facts(model_dir)
    if not config.server_is_ours:  # a server that already runs: the model the spec names, or nothing
        check_served_model(config.server_url, config.served_model_name, ServerKeys.from_env(os.environ))
    check_config_trust(model_dir, config.trust_remote_code)
    findings.context_length = context = config.context.length or model.context_length
    if not context:
        raise PreflightProblem(f"{model_dir}/config.json", "no max_position_embeddings, and the spec sets no "
                                                           "context length")
    tokenizer = None
    if config.tokenizer_path:
        needs_template = any(not d.pretokenized for d in config.datasets)
        tokenizer, findings.tokenizer = check_tokenizer(config.tokenizer_path, model.vocab_size, needs_template,
                                                        config.trust_remote_code)
    classes = config.prompt_classes
    wanted = {c.name: c.max_new_tokens for c in classes}
    end_ids = end_token_ids(tokenizer, model_dir)
    for d in config.datasets:
        preparer = PromptPreparer(tokenizer, config.template_kwargs_for(d), classes, context, config.context.policy,
                                  config.context.min_room_tokens, d.prompt_class, d.max_new_tokens)
        findings.datasets.append(scan_dataset(
            d.name, d.path, preparer, d.budget_tokens, model.vocab_size, fmt=d.format, pretokenized=d.pretokenized,
            traces=d.kind == "traces", end_ids=end_ids, fields=d.fields,
            wanted_max_new={c: d.max_new_tokens or w for c, w in wanted.items()}))


def end_token_ids(tokenizer, model_dir: str) -> frozenset:
    """The ids a response of this model ends with: the tokenizer's eos and generation_config.json's
    eos_token_id (an int or a list: chat models end turns with their own token)."""
    ids = set()
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    try:
        eos = json.loads((Path(model_dir) / "generation_config.json").read_text()).get("eos_token_id")
    except (OSError, ValueError):
        eos = None
    ids.update(int(t) for t in (eos if isinstance(eos, list) else [eos]) if isinstance(t, int))
    return frozenset(ids)


def write_findings(findings: Findings, path: str) -> None:
    write_bytes_atomically(path, (findings.to_json() + "\n").encode())

"""`jobrunner generate --config F`: the generate config read from its file (YAML or JSON) into its
one model, draftgen_contracts.generate_config.GenerateConfig, where its schema and its rules are.
Every error names the file and the field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from draftgen_contracts.generate_config import DatasetConfig, GenerateConfig
from draftgen_contracts.validation import error_lines
from jobrunner.shared.dataset_files import DatasetRefused, files_outside

# The config's two models are this module's too: jobrunner's code reads them from where it loads them.
__all__ = ["ConfigError", "DatasetConfig", "GenerateConfig", "load_config", "missing_inputs", "parse_config"]


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the fields."""


# Errors a stage fails at once on (exit BAD_CONFIG): a bad value, a path that is missing or not what it
# should be, a permission. Any other OSError (EIO, ESTALE on NFS, a time-out) is the volume's and may pass:
# the pod fails and its Job retries it.
CONFIGURATION_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def _format_validation_error(path: str, e: ValidationError) -> str:
    return "\n  ".join([f"{path}: invalid generate config", *error_lines(e, "config")])


def parse_config(data: Any, source: str = "<config>") -> GenerateConfig:
    try:
        return GenerateConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(source, e)) from None


def load_config(path: str | os.PathLike) -> GenerateConfig:
    """Read a YAML or JSON config file (YAML is a superset of JSON, so one parser serves both)."""
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: not valid YAML/JSON: {e}") from None
    return parse_config(data, str(path))


def missing_inputs(config: GenerateConfig) -> list[str]:
    """Inputs the config names that are not there: problems no schema can see (a PVC holding a
    different model, a typo in a path), found before any request is sent."""
    problems = []
    needs_tokenizer = any(not d.pretokenized for d in config.datasets)
    if needs_tokenizer and config.tokenizer_path and not Path(config.tokenizer_path).is_dir():
        problems.append(f"tokenizer_path {config.tokenizer_path}: no such directory")
    for i, d in enumerate(config.datasets):
        try:
            outside = files_outside(d.path, config.input_roots)
        except DatasetRefused as e:  # no such file, or a folder or glob of none
            problems.append(f"datasets[{i}] ({d.name}): {e}")
            continue
        problems.extend(f"datasets[{i}] ({d.name}): {path} is {real}, outside the volumes "
                        f"{', '.join(config.input_roots)}: datasets are read from the run's volumes only"
                        for path, real in outside)
    return problems

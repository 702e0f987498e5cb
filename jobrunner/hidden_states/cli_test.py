"""How the extraction's command ends on an error: a configuration error fails its Job at once, an I/O
error of the volume is a failed pod that the Job retries."""

import argparse
import errno

import pytest

from draftgen_contracts import exit_codes
from jobrunner.hidden_states import cli


def args(tmp_path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(["--corpus", str(tmp_path / "corpus"), "--model", str(tmp_path / "model"),
                              "--out", str(tmp_path / "out")])


@pytest.mark.parametrize("error, code", [
    (FileNotFoundError(errno.ENOENT, "No such file", "model/config.json"), exit_codes.BAD_CONFIG),
    (ValueError("--aux-layers: layer 99 of 8"), exit_codes.BAD_CONFIG),
    (PermissionError(errno.EACCES, "Permission denied", "out"), exit_codes.BAD_CONFIG),
    (OSError(errno.EIO, "Input/output error"), None),  # raised: exit 1, retried by the Job
    (OSError(errno.ESTALE, "Stale file handle"), None),
])
def test_configuration_errors_fail_at_once_and_io_errors_are_retried(tmp_path, monkeypatch, error, code):
    def fails(*_args, **_kwargs):
        raise error
    monkeypatch.setattr(cli, "extract", fails)
    monkeypatch.setattr(cli, "ran_out_of_room", lambda e, path: False)
    if code is None:
        with pytest.raises(OSError):
            cli.main(args(tmp_path))
    else:
        assert cli.main(args(tmp_path)) == code

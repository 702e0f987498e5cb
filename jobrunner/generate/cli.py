"""`jobrunner generate --config F`: generate responses within token budgets (see jobrunner.generate)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

from draftgen_contracts import exit_codes
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.sglang_protocol import KeysRefused, SGLangError
from jobrunner.shared.config import ConfigError, load_config, missing_inputs
from jobrunner.shared.datasets import DatasetRefused
from jobrunner.shared.full_volume import full_at, ran_out_of_room, say_on_stderr
from jobrunner.generate.run import configure_logging, make_coordinator, run_generate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML or JSON GenerateConfig (see jobrunner.shared.config)")
    parser.add_argument("--replica", type=int, default=None, help="override the config's replica index")
    parser.add_argument("--server-url", default=None,
                        help="override the config's server_url (a pod passes http://$(POD_IP):PORT)")
    parser.add_argument("--metrics-address", default=None, metavar="HOST:PORT",
                        help="serve Prometheus metrics there (a pod passes $(POD_IP):9400); off by default")


def main(args: argparse.Namespace) -> int:
    configure_logging()
    try:
        config = load_config(args.config)
        if args.server_url is not None:
            config = config.model_copy(update={"server_url": args.server_url})
        if args.replica is not None:
            config = config.model_copy(update={"replica": args.replica})
            if config.replica >= config.replicas:
                raise ConfigError(f"--replica {config.replica} must be < replicas {config.replicas}")
    except ConfigError as e:
        print(e, file=sys.stderr)
        return exit_codes.BAD_CONFIG
    problems = missing_inputs(config)
    if problems:
        message = "; ".join(problems)
        print(f"{args.config}: {message}", file=sys.stderr)
        report_error(config, message)
        return exit_codes.BAD_CONFIG
    try:
        return asyncio.run(run_generate(config, metrics_address=args.metrics_address))
    except (KeysRefused, DatasetRefused) as e:  # a wrong key or file stays wrong: fail at once, said on the object
        logging.getLogger("jobrunner.generate").error("%s", e)
        report_error(config, str(e))
        return exit_codes.BAD_CONFIG
    except SGLangError as e:
        logging.getLogger("jobrunner.generate").error("%s", e)
        return exit_codes.FAILED
    except Exception as e:
        if not ran_out_of_room(e, Path(config.output_root)):
            raise
        # The records written stay (a new pod resumes from them, as after any crash).
        message = f"{full_at(Path(config.output_root))}; generation stopped, keeping every response written"
        say_on_stderr(f"jobrunner generate: {message}")
        report_error(config, message)
        return exit_codes.VOLUME_FULL


def report_error(config, message: str) -> None:
    """Tell the coordinator (the operator, in a pod) why this replica cannot run; best effort."""
    try:
        make_coordinator(config).publish(ProgressDocument(replica=config.replica, replicas=config.replicas,
                                                          updated_at=time.time(), finished=True, error=message))
    except Exception as e:  # the exit code still says it
        logging.getLogger("jobrunner.generate").warning("could not report the error: %s", e)

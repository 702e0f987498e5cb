"""Names the parts agree on: the API, labels, child objects, files, with a parser for each name
that is read back (never a hand-counted slice)."""

from __future__ import annotations

import hashlib
import posixpath
import re

# --- the API ---------------------------------------------------------------------------------------

GROUP = "draftgen.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DatasetGeneration"
PLURAL = "datasetgenerations"
SHORT_NAME = "dsgen"
# Child names are "<name>-<suffix>" with suffixes up to 12 characters ("-report-r007"), and a Job's
# pods add 6 more; 45 keeps every one a valid 63-character label value.
MAX_NAME_LENGTH = 45
# A DNS subdomain, as the API server checks metadata.name.
NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# A dataset's name, in the spec and in the generate config alike: a DNS label of at most 40, so it
# is safe as a folder of the output (generate/<dataset>/), in every sample id and in a label value.
DATASET_NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"

# --- labels and annotations on children ---------------------------------------------------------------

LABEL_NAME = "draftgen.io/name"
LABEL_COMPONENT = "draftgen.io/component"
LABEL_REPLICA = "draftgen.io/replica"
LABEL_REPORT = "draftgen.io/report"
LABEL_OUTPUT_LOCK = "draftgen.io/output-lock"  # on the ConfigMap that says which run owns an output folder
CONFIG_HASH_ANNOTATION = "draftgen.io/config-hash"
# On a DatasetGeneration: a new value retries a Failed run as it is (docs/reliability.md#retrying-a-failed-run).
RETRY_ANNOTATION = "draftgen.io/retry"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# A generation pod's `jobrunner generate` serves its Prometheus metrics here (container port `metrics`).
GENERATE_METRICS_PORT = 9400

# --- mounts and keys inside the pods ---------------------------------------------------------------

DATA_MOUNT = "/data"
CONFIG_MOUNT = "/etc/draftgen"
# The server's keys: the run's Secret, mounted into the generation pod's server, which reads them
# with SGLang's own `--config FILE` (a YAML of flags: the keys never appear in its arguments).
KEYS_MOUNT = "/etc/draftgen-keys"
KEYS_CONFIG_FILE = "sglang-keys.yaml"
API_KEY_SECRET_KEY = "api-key"
ADMIN_API_KEY_SECRET_KEY = "admin-api-key"
# The SGLang extraction pod: jobrunner's packages, copied here by an init container from draftgen's
# image, imported by the SGLang image's Python (PYTHONPATH).
CODE_MOUNT = "/opt/draftgen-code"
GENERATE_CONFIG_KEY = "generate.yaml"
# A multi-node replica's pods: the leader's IP, as an init container resolved it, in this emptyDir;
# rank 0 listens for the other ranks on DIST_INIT_PORT (SGLang's --dist-init-addr; it derives its
# other ports from this one upwards).
RANK_MOUNT = "/etc/draftgen-rank"
LEADER_FILE = "leader"
DIST_INIT_PORT = 20000
# The index of a pod in its Indexed Job, which the Job controller puts in every container's environment.
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # the same, on the pod
REPORT_KEY = "progress.json"
PREFLIGHT_KEY = "preflight.json"  # the preflight's findings: its report ConfigMap's key, and a file on the volume
LABEL_PREFLIGHT = "draftgen.io/preflight"
# The extraction's progress (draftgen_contracts.extraction_progress): its report ConfigMap's key,
# and a file beside the states in HIDDEN_STATES_DIR.
EXTRACTION_KEY = "extraction.json"
LABEL_EXTRACTION = "draftgen.io/extraction"
HIDDEN_STATES_DIR = "hidden-states"  # under the run's output folder

# --- child objects ----------------------------------------------------------------------------------


def service_account_name(name: str) -> str:
    return f"{name}-runner"


def keys_secret_name(name: str) -> str:
    """The run's server keys (docs/security.md#the-servers-keys)."""
    return f"{name}-server-keys"


def network_policy_name(name: str) -> str:
    """Who reaches the run's generation pods (docs/security.md#the-network)."""
    return f"{name}-generation"


def config_map_name(name: str, digest: str) -> str:
    return f"{name}-config-{digest}"


def report_name(name: str, replica: int) -> str:
    return f"{name}-report-r{replica:03d}"


def preflight_job_name(name: str) -> str:
    return f"{name}-preflight"


def preflight_report_name(name: str) -> str:
    return f"{name}-preflight"


def extraction_report_name(name: str) -> str:
    return f"{name}-extraction"


def generation_job_name(name: str, replica: int) -> str:
    return f"{name}-gen-r{replica:03d}"


def ranks_service_name(name: str) -> str:
    """The headless Service under which a multi-node replica's pods find their leader by name
    (<job>-0.<service>); a DNS label, as admission requires the run's name to be for such runs."""
    return f"{name}-ranks"


def merge_job_name(name: str) -> str:
    return f"{name}-merge"


def extract_job_name(name: str) -> str:
    return f"{name}-extract"


def output_folder(claim_name: str, path: str) -> str:
    """An output folder as one string, the same however its path is spelt ("a/b/", "./a//b")."""
    return f"{claim_name}:/{posixpath.normpath('/' + path).lstrip('/')}"


def output_lock_name(claim_name: str, path: str) -> str:
    """The output lock of a folder: the same name for every run that would write there."""
    return "draftgen-output-" + hashlib.sha256(output_folder(claim_name, path).encode()).hexdigest()[:20]


# --- files a generate process writes ------------------------------------------------------------------

GENERATE_DIR = "generate"  # <output root>/generate/<dataset>/part-rNNN.*
PART_FILE = re.compile(r"^part-r(\d{3})\.jsonl$")
SUMMARY_FILE = re.compile(r"^part-r(\d{3})\.summary\.json$")
PROGRESS_FILE = re.compile(r"^progress-r(\d{3})\.json$")


def part_file_name(replica: int) -> str:
    """One replica's records of one dataset, append-only."""
    return f"part-r{replica:03d}.jsonl"


def skipped_file_name(replica: int) -> str:
    return f"part-r{replica:03d}.skipped.jsonl"


def summary_file_name(replica: int) -> str:
    return f"part-r{replica:03d}.summary.json"


def progress_file_name(replica: int) -> str:
    """A replica's progress document in file coordination."""
    return f"progress-r{replica:03d}.json"


def provenance_file_name(replica: int) -> str:
    """A replica's generation sessions (draftgen_contracts.provenance), in <output root>/generate/."""
    return f"provenance-r{replica:03d}.json"


PROVENANCE_FILE = re.compile(r"^provenance-r(\d{3})\.json$")


def _replica_of(pattern: re.Pattern, file_name: str) -> int | None:
    match = pattern.match(file_name)
    return int(match.group(1)) if match else None


def replica_of_part_file(file_name: str) -> int | None:
    """The replica whose records a file holds, None when the file is no part file (its skipped-rows
    log or summary included)."""
    return _replica_of(PART_FILE, file_name)


def replica_of_summary_file(file_name: str) -> int | None:
    return _replica_of(SUMMARY_FILE, file_name)


def replica_of_progress_file(file_name: str) -> int | None:
    return _replica_of(PROGRESS_FILE, file_name)


def sample_id(dataset: str, row: int) -> str:
    """The id of one source row's sample, unique across replicas (the row index is global)."""
    return f"{dataset}/{row:09d}"



# --- the corpus and the hidden states ---------------------------------------------------------------

STATES_SHARD = re.compile(r"^shard-(?P<number>\d{6})\.safetensors$")


def corpus_shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.jsonl"



def states_shard_name(number: int) -> str:
    return f"shard-{number:06d}.safetensors"


def parse_states_shard_name(file_name: str) -> int | None:
    match = STATES_SHARD.match(file_name)
    return int(match["number"]) if match else None

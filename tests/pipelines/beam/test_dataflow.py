"""Dataflow, offline: the worker package and the jobs prepare, vocab and encode submit.

Nothing here reaches Google. The worker package is what Beam's Stager builds from
pyproject.toml (`--setup_file`, added by `pipeline_options`), installed the way a worker
installs it, with nmtpipe from nowhere else. The jobs are built by the commands' own
functions (`run_prepare`, `run_vocab`, `run_encode`) with Beam's `--dry_run`: the
Dataflow runner builds the pipeline proto, the worker package and the `Job`, and
returns before it makes its API client; the runner is stopped right there, before
nmtpipe would wait for the job and read its results. The job's environment (worker
pool, the options the workers get) is built as the client builds it after uploading.
The gs:// inputs and outputs live in an in-process stand-in for GCS, which only the
driver reads, since no worker runs.

What this cannot show: that Dataflow accepts the job, that workers start, install the
package and its dependencies, or read and write gs://; that needs a project and money.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from apache_beam.internal import pickler
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.transforms import environments
from fsspec.implementations.memory import MemoryFileSystem
from fsspec.registry import _registry as fsspec_registry
from google.protobuf.message import Message
from packaging.requirements import Requirement

from nmtpipe.pipelines.beam.options import DATAFLOW_REQUIREMENTS, pipeline_options
from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.transforms.beam.prepare_fns import PlanChunksFn
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.kinds.t2t import T2tConfig
from tests.helpers import IN_MEMORY, example_lines, one_sdist_build_at_a_time

try:  # what DataflowRunner imports when it builds a job: Google's clients
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
    from apache_beam.runners.dataflow.internal import apiclient

    _NO_GCP = ""
except ImportError as e:  # apache_beam.runners.dataflow itself imports without them
    DataflowRunner = apiclient = None
    _NO_GCP = f"{e}: the Dataflow runner needs Beam's GCP extras (pip install 'nmtpipe[dataflow]')"
needs_gcp = pytest.mark.skipif(apiclient is None, reason=_NO_GCP)

ROOT = Path(__file__).resolve().parents[3]
BUCKET = "gs://nmtpipe-test-bucket"
# A malformed bucket name makes Beam look for a default bucket on GCS, which hangs
# offline for two minutes; this one is well formed.
DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=nmtpipe-test",
    "--region=europe-west4",
    f"--temp_location={BUCKET}/tmp",
    "--dry_run=True",
]


class FakeGCS(MemoryFileSystem):
    """gs:// in this process's memory (its own store, not the memory:// one)."""

    protocol = ("gs", "gcs")
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, str):
            path = re.sub(r"^(gs|gcs)://", "", path)
        return super()._strip_protocol(path)

    def unstrip_protocol(self, name: str) -> str:
        return "gs://" + name.lstrip("/")


@pytest.fixture(scope="module")
def gcs() -> Iterator[str]:
    """The bucket, with a corpus (`corpus/train.{en,zh}`), that corpus prepared on the
    local runner (`prepared`) and a vocabulary of it (`vocab`)."""
    with pytest.MonkeyPatch.context() as mp:
        for protocol in FakeGCS.protocol:
            mp.setitem(fsspec_registry, protocol, FakeGCS)
        FakeGCS.store.clear()
        for lang in ("en", "zh"):
            lines = example_lines("tatoeba-cmn", lang)[::32]
            fsio.write_bytes(f"{BUCKET}/corpus/train.{lang}", ("\n".join(lines) + "\n").encode())
        run_prepare(_prepare_config(f"{BUCKET}/prepared"), IN_MEMORY)
        vocab = VocabConfig(
            f"{BUCKET}/prepared",
            f"{BUCKET}/vocab",
            model="bpe-hf",
            vocab_size=600,
            joined=True,
            hf=HfConfig(pre_tokenizer="byte-level"),
        )
        run_vocab(vocab, IN_MEMORY)
        yield BUCKET
        FakeGCS.store.clear()


def _prepare_config(output: str) -> PrepareConfig:
    return PrepareConfig("en", "zh", output, trainpref=(f"{BUCKET}/corpus/train",), langid=False)


class _Built(Exception):
    """What the Dataflow runner built, raised where it would have been submitted."""

    def __init__(self, job: Any) -> None:
        super().__init__("stopped before submission")
        self.job = job


@pytest.fixture
def dataflow_job(monkeypatch, tmp_path) -> Callable[[Callable[[], Any]], Any]:
    """`build(call)`: run `call` (a command's function with DATAFLOW's options) until its
    Beam job is built; that job (`apiclient.Job`: `.proto`, `.proto_pipeline`)."""
    real = DataflowRunner.run_pipeline

    def run_until_built(self, pipeline, options, pipeline_proto=None):
        raise _Built(real(self, pipeline, options, pipeline_proto).job)

    monkeypatch.setattr(DataflowRunner, "run_pipeline", run_until_built)
    # Where Beam builds the worker package (and any other temporary file): here, so that
    # a path of it in the job is found, and nothing is left behind.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def build(call: Callable[[], Any]) -> Any:
        with one_sdist_build_at_a_time(), pytest.raises(_Built) as built:
            call()
        return built.value.job

    return build


# -- reading a job -------------------------------------------------------------------------


def _decoded(blob: bytes) -> Iterator[bytes]:
    """`blob` and, recursively, every payload pickled into it (Beam pickles are base64 of
    zlib- or bz2-compressed bytes)."""
    yield blob
    for run in re.finditer(rb"[A-Za-z0-9+/]{24,}={0,2}", blob):
        try:
            raw = base64.b64decode(run.group(), validate=True)
        except (binascii.Error, ValueError):
            continue
        for decompress in (zlib.decompress, bz2.decompress):
            try:
                inner = decompress(raw)
            except (zlib.error, OSError, ValueError):
                continue
            yield from _decoded(inner)


def _blobs(message: Message) -> Iterator[bytes]:
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            values = list(value.values())
        else:
            values = list(value) if field.is_repeated else [value]
        for v in values:
            if isinstance(v, Message):
                yield from _blobs(v)
            elif isinstance(v, bytes):
                yield from _decoded(v)
            elif isinstance(v, str):
                yield v.encode()


def _graph_strings(job: Any) -> tuple[set[str], set[str]]:
    """The gs:// URLs and the local paths in the job's graph: its transforms, coders and
    pickled functions, without the environment's artifacts (local files until the
    runner uploads them; see test_the_job_ships_nmtpipe_as_an_sdist)."""
    graph = beam_runner_api_pb2.Pipeline()
    graph.CopyFrom(job.proto_pipeline)
    for env in graph.components.environments.values():
        del env.dependencies[:]
    top = "|".join(re.escape(name) for name in sorted(os.listdir("/")) if name.isidentifier())
    urls, local = set(), set()
    for blob in _blobs(graph):
        urls.update(url.decode() for url in re.findall(rb"gs://[\x21-\x7e]*", blob))
        blob = re.sub(rb"[a-z][a-z0-9+.-]*://[\x21-\x7e]*", b" ", blob)
        local.update(p.decode() for p in re.findall(rb"/(?:%s)/[\x21-\x7e]*" % top.encode(), blob))
    return urls, local


def _labels(job: Any) -> set[str]:
    return {t.unique_name for t in job.proto_pipeline.components.transforms.values()}


def _do_fns(job: Any) -> dict[str, Any]:
    """The DoFn of every ParDo in the job, by label, unpickled as a worker would."""
    found = {}
    for t in job.proto_pipeline.components.transforms.values():
        if t.spec.urn == common_urns.primitives.PAR_DO.urn:
            fn = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload).do_fn
            if fn.urn == python_urns.PICKLED_DOFN_INFO:
                found[t.unique_name] = pickler.loads(fn.payload)[0]
    return found


def _check_job(job: Any, tmp_path: Path, labels: set[str], urls: set[str]) -> None:
    """What every nmtpipe job on Dataflow must be: a batch job with nmtpipe's stable
    labels, reading and writing only `urls` (regular expressions) and no local path."""
    # (Beam's newer releases hold protobuf messages, the lowest it takes apitools')
    types = (
        getattr(apiclient.dataflow, "JobType", None) or apiclient.dataflow.Job.TypeValueValuesEnum
    )
    assert job.proto.type == types.JOB_TYPE_BATCH
    assert labels <= _labels(job), sorted(labels - _labels(job))
    # A label naming a line of nmtpipe's code (an unlabelled lambda) would change with
    # every edit, and Dataflow keys job updates and metrics on labels.
    assert not [name for name in _labels(job) if re.search(r"(graph|summary)\.py:\d", name)]
    found, local = _graph_strings(job)
    assert found and all(any(re.fullmatch(u, f) for u in urls) for f in found), found
    assert all(any(re.fullmatch(u, f) for f in found) for u in urls), (urls, found)
    # Only the source files of functions pickled by value (what tracebacks name); never
    # a file or folder a worker would open, like a spill directory.
    assert all(path.endswith(".py") for path in local), local
    assert not any(str(tmp_path) in path for path in local)


def _job_options(job: Any) -> dict[str, Any]:
    """The pipeline options the Dataflow service would get in the job's environment
    (built as the runner's client builds it once the package is uploaded)."""
    environment = apiclient.Environment(
        packages=["workflow.tar.gz"],
        options=job.options,
        environment_version=apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION,
        proto_pipeline_staged_url=f"{BUCKET}/tmp/staging/pipeline.pb",
        proto_pipeline=job.proto_pipeline,
    )
    proto = environment.proto
    if hasattr(proto, "sdk_pipeline_options"):  # a protobuf Struct
        return dict(proto.sdk_pipeline_options["options"])
    from apache_beam.internal.gcp.json_value import from_json_value  # apitools messages

    found = {p.key: p.value for p in proto.sdkPipelineOptions.additionalProperties}
    return dict(from_json_value(found["options"]))


# -- the worker package ----------------------------------------------------------------------


def _staged(artifacts: Iterable[beam_runner_api_pb2.ArtifactInformation]) -> dict[str, Path]:
    """The local files of the artifacts a job stages, by the name they are staged as."""
    return {
        beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(a.role_payload).staged_name: (
            Path(beam_runner_api_pb2.ArtifactFilePayload.FromString(a.type_payload).path)
        )
        for a in artifacts
    }


@pytest.fixture(scope="module")
def worker_package(tmp_path_factory) -> dict[str, Path]:
    """nmtpipe as a Dataflow worker gets it: what Beam's Stager stages for nmtpipe's
    Dataflow options (by staged name: `workflow.tar.gz` is the sdist), and `site`, that
    sdist pip-installed (without its dependencies, which this environment has) into a
    folder of its own."""
    folder = tmp_path_factory.mktemp("worker")
    options = pipeline_options(DATAFLOW[:-1])
    with one_sdist_build_at_a_time(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(folder))  # Beam's requirements cache: here too
        staged = _staged(environments.python_sdk_dependencies(options, str(folder)))
    assert staged["workflow.tar.gz"].name == "nmtpipe-0.1.0.tar.gz"
    site = folder / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run(
        [*pip, "--no-build-isolation", "--target", str(site), str(staged["workflow.tar.gz"])],
        check=True,
        cwd=folder,
    )
    return {**staged, "site": site}


@pytest.fixture(scope="module")
def worker_site(worker_package) -> Path:
    return worker_package["site"]


def _on_worker(site: Path, code: str) -> str:
    """Run `code` in a Python that finds nmtpipe only in `site`; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=site.parent,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_the_worker_package_holds_every_package_and_its_data(worker_site):
    installed = worker_site / "nmtpipe"
    for folder in ("nmtpipe", "pipelines", "transforms", "trainers"):
        for source in (ROOT / folder).rglob("*.py"):
            if (source.parent / "__init__.py").is_file():  # a module of a package
                name = source.relative_to(ROOT / folder)
                where = installed if folder == "nmtpipe" else installed / folder
                assert (where / name).is_file(), f"{folder}/{name} is not in the worker package"
    example = {p.name for p in (ROOT / "pipelines" / "example").iterdir() if p.is_file()}
    assert {p.name for p in (installed / "pipelines" / "example").iterdir()} == example


def test_a_worker_unpickles_nmtpipe_functions_from_the_package(worker_site):
    payload = pickler.dumps(PlanChunksFn(5000)).decode()
    out = _on_worker(
        worker_site,
        "from apache_beam.internal import pickler\n"
        "import sys\n"
        f"fn = pickler.loads({payload!r})\n"
        "print(sys.modules[type(fn).__module__].__file__, fn.chunk_lines)\n"
        "import nmtpipe.transforms.beam.prepare_fns as m\n"
        "print(m.__file__)\n",
    )
    pickled_from, prepare_fns = out.split("\n")[:2]
    assert pickled_from.startswith(str(worker_site)) and pickled_from.endswith(" 5000")
    assert prepare_fns == str(worker_site / "nmtpipe" / "transforms" / "beam" / "prepare_fns.py")


def test_what_a_worker_installs_opens_gs_urls(worker_package):
    """What a worker pip-installs: the sdist's unconditional requirements (no extras:
    gcsfs is not one) and the requirements file nmtpipe stages beside it."""
    dist = importlib.metadata.Distribution.at(worker_package["site"] / "nmtpipe-0.1.0.dist-info")
    wanted = [Requirement(r) for r in dist.requires or []]
    names = {r.name.lower() for r in wanted if r.marker is None}
    if "requirements.txt" in worker_package:
        lines = worker_package["requirements.txt"].read_text().splitlines()
        names |= {
            Requirement(line).name.lower() for line in lines if line.strip()[:1] not in ("", "#")
        }
    assert "fsspec" in names
    assert "gcsfs" in names


# -- the jobs --------------------------------------------------------------------------------


@needs_gcp
def test_the_job_ships_nmtpipe_as_an_sdist(gcs, dataflow_job, tmp_path):
    job = dataflow_job(lambda: run_prepare(_prepare_config(f"{gcs}/prepared-df"), DATAFLOW))
    (env,) = job.proto_pipeline.components.environments.values()
    assert env.urn == common_urns.environments.DOCKER.urn
    sdist = _staged(env.dependencies)["workflow.tar.gz"]
    assert sdist.name == "nmtpipe-0.1.0.tar.gz" and sdist.is_relative_to(tmp_path)
    options = _job_options(job)
    for where in ("temp_location", "staging_location"):  # the job's own folder in both
        assert options[where].startswith(f"{gcs}/tmp/beamapp-"), options[where]
    assert options["setup_file"] == str(ROOT / "pyproject.toml")
    assert options["requirements_file"] == str(DATAFLOW_REQUIREMENTS)
    assert _staged(env.dependencies)["requirements.txt"].read_text() == (
        DATAFLOW_REQUIREMENTS.read_text()
    )
    # The only local paths among the options are those the submitting machine reads.
    local = {k for k, v in options.items() if isinstance(v, str) and v.startswith("/")}
    assert local <= {"setup_file", "requirements_file"}, local


@needs_gcp
def test_prepare_job(gcs, dataflow_job, tmp_path):
    out = f"{gcs}/prepared-df"
    job = dataflow_job(lambda: run_prepare(_prepare_config(out), DATAFLOW))
    labels = {
        "Prepare/ListInputs",
        "Prepare/CleanChunks/PlanChunks",
        "Prepare/CleanChunks/Redistribute",
        "Prepare/CleanChunks/Clean",
        "Prepare/ProtectSplits/MergeProtected",
        "Prepare/WritePairShards/GroupByShard",
        "Prepare/WritePairShards/WritePairShards",
        "Prepare/WriteRejectFiles/WriteRejects",
        "Prepare/CountTokens/GroupBuckets",
        "Prepare/CountTokens/WriteCounts",
        "Prepare/CountTokens/WriteChars",
        "Prepare/Summarize",
    }
    urls = {
        f"{gcs}/corpus/train.en",
        f"{gcs}/corpus/train.zh",
        out,
        rf"{out}/\.nmtpipe/summary-[0-9a-f]{{32}}\.json",
        rf"{out}/\.nmtpipe/read-[0-9a-f]{{32}}",  # where its readers tell their progress
        rf"{out}/\.nmtpipe/learned",  # what the pair scorers learn: tables of megabytes
    }
    _check_job(job, tmp_path, labels, urls)
    # Remote workers shuffle through the runner, never through a spill folder.
    fns = _do_fns(job)
    assert fns["Prepare/CleanChunks/Clean/ParDo(CleanChunksFn)"].spill_dir is None
    assert fns["Prepare/WritePairShards/WritePairShards/ParDo(WritePairShardsFn)"].spill_dir is None


@needs_gcp
@pytest.mark.parametrize(
    ("model", "options", "sizes"),
    [("unigram", {}, False), ("t2t", {"t2t": T2tConfig(file_byte_budget=1e5)}, True)],
    ids=["sample", "byte-budget"],
)
def test_vocab_job(gcs, dataflow_job, tmp_path, model, options, sizes):
    out = f"{gcs}/vocab-{model}"
    config = VocabConfig(f"{gcs}/prepared", out, model=model, **options)
    job = dataflow_job(lambda: run_vocab(config, DATAFLOW))
    labels = {"SampleTrainText/ListShards", "SampleTrainText/Sample"}
    if sizes:
        labels |= {"SampleTrainText/ShardBytes", "SampleTrainText/SideBytes"}
    urls = {
        f"{gcs}/prepared/train-00000-of-00001.parquet",
        rf"{out}/\.nmtpipe/sample-[0-9a-f]{{32}}",  # both sides' sample, one job
        rf"{out}/\.nmtpipe/read-[0-9a-f]{{32}}",
    }
    _check_job(job, tmp_path, labels, urls)


@needs_gcp
def test_encode_job(gcs, dataflow_job, tmp_path):
    out = f"{gcs}/encoded"
    config = EncodeConfig(f"{gcs}/prepared", f"{gcs}/vocab", out)
    job = dataflow_job(lambda: run_encode(config, DATAFLOW))
    labels = {"Encode/ListShards", "Encode/Redistribute", "Encode/Encode", "Encode/Summarize"}
    urls = {
        f"{gcs}/prepared",
        f"{gcs}/vocab",
        out,
        rf"{out}/\.nmtpipe/summary-[0-9a-f]{{32}}\.json",
        rf"{out}/\.nmtpipe/read-[0-9a-f]{{32}}",
    }
    _check_job(job, tmp_path, labels, urls)
    # One encoding thread per worker: a Dataflow worker runs a process per core.
    (encode,) = [fn for label, fn in _do_fns(job).items() if label.startswith("Encode/Encode")]
    assert encode.spec.threads == 1

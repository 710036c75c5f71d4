"""Remote data trees from Python: ``aicsql.register(ctx, data="s3://...",
data_options={...})`` against a real S3 server (moto's server mode, which
the test command installs into the virtualenv; ``AICSQL_MOTO`` names
another) on 127.0.0.1. Both paths read the mirror, and answer as from the
same files on disk; errors come as the Python exceptions the docstring of
``register`` promises. (Every golden through S3 and HTTP mirrors is the
Rust test ``crates/tables/tests/remote_goldens.rs``.)"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import aicsql

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens")
RELEASE = "aiconfigurator-0.10.0/aiconfigurator"
DB = "h200_sxm/vllm/0.19.0"


def _moto_server() -> str:
    path = os.environ.get("AICSQL_MOTO") or str(Path(sys.prefix) / "bin" / "moto_server")
    if not Path(path).is_file():
        pytest.fail(f"moto_server not found at {path}; run scripts/test (it installs moto[server]) or set AICSQL_MOTO")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto's S3 server on 127.0.0.1 at a free port; stopped by ``stop``."""

    def __init__(self, **env: str):
        self.port = _free_port()
        self.process = subprocess.Popen(
            [_moto_server(), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    pytest.fail(f"moto_server did not listen on {self.port} within 30 s")
                time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.options = {
            "aws.endpoint": self.endpoint,
            "aws.allow_http": "true",
            "aws.region": "us-east-1",
            "aws.access_key_id": "testing",
            "aws.secret_access_key": "testing",
        }

    def upload(self, bucket: str, prefix: str, tree: Path) -> int:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket=bucket)
        n = 0
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(tree).as_posix()}")
                n += 1
        return n

    def stop(self):
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def published_subset(tmp_path_factory) -> Path:
    """One system of the published release (h200_sxm, every backend and
    version, with its yaml) and the model configs, as a local tree."""
    source = aicsql.default_data_dir() / RELEASE
    if not (source / "systems" / "h200_sxm.yaml").is_file():
        pytest.fail(f"the published data is not in {aicsql.default_data_dir()}; run `cargo run -- data fetch`")
    tree = tmp_path_factory.mktemp("published") / "aic"
    (tree / "systems" / "data").mkdir(parents=True)
    shutil.copy(source / "systems" / "h200_sxm.yaml", tree / "systems" / "h200_sxm.yaml")
    shutil.copytree(source / "systems" / "data" / "h200_sxm", tree / "systems" / "data" / "h200_sxm")
    shutil.copytree(source / "model_configs", tree / "model_configs")
    return tree


@pytest.fixture(scope="module")
def bucket(published_subset):
    moto = Moto()
    try:
        files = moto.upload("team-perf", "aic", published_subset)
        assert files > 100
        yield moto
    finally:
        moto.stop()


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """A cache of the test's own, so mirrors never land in the user's."""
    monkeypatch.setenv("AICSQL_DATA", str(tmp_path))
    return tmp_path


def _gemm_rows(ctx) -> list:
    ctx.register_parquet("goldens", str(GOLDENS / "gemm_goldens.parquet"))
    ctx.sql("SET aic.shared_layer = false").collect()
    return (
        ctx.sql(
            f"""SELECT row_id, latency_ms AS want,
                       gemm_latency('{DB}', quant, m, n, k) AS rust,
                       py_gemm_latency('{DB}', quant, m, n, k) AS py
                FROM goldens
                WHERE system || '/' || backend || '/' || version = '{DB}'
                ORDER BY row_id"""
        )
        .to_arrow_table()
        .to_pylist()
    )


def test_a_bucket_mounts_and_both_paths_read_its_mirror(bucket, published_subset, cache):
    remote = aicsql.context(data="s3://team-perf/aic", data_options=bucket.options)
    rows = _gemm_rows(remote)
    assert len(rows) > 1_500
    # Both paths equal the spec's own-file column bit for bit (NULL where it misses).
    assert [(r["row_id"], r["rust"], r["py"]) for r in rows] == [(r["row_id"], r["want"], r["want"]) for r in rows]
    # The mirror is in the cache given by $AICSQL_DATA, hidden from its own mounting.
    mirrors = list((cache / ".remote").iterdir())
    assert len(mirrors) == 1 and (mirrors[0] / "tree" / "systems" / "h200_sxm.yaml").is_file()

    # A step (several tables and a model config) equals the same files read from disk.
    local = aicsql.context(data=str(published_subset), shared_layer="false")  # as _gemm_rows set it
    step = f"""SELECT step_latency('Qwen/Qwen3-32B-FP8', '{DB}', phase, 8, 4, 1024, 128) AS rust,
                      py_step_latency('Qwen/Qwen3-32B-FP8', '{DB}', phase, 8, 4, 1024, 128) AS py
               FROM (VALUES ('context'), ('generation')) AS t(phase) ORDER BY phase"""
    here = local.sql(step).to_arrow_table().to_pylist()
    there = remote.sql(step).to_arrow_table().to_pylist()
    assert here == there and all(r["rust"] == r["py"] and r["rust"] > 0 for r in there)


def test_a_second_mount_fetches_nothing_and_says_so(bucket, cache, caplog):
    with caplog.at_level("INFO", logger="aicsql"):
        aicsql.context(data="s3://team-perf/aic", data_options=bucket.options)
        aicsql.context(data="s3://team-perf/aic/", data_options=bucket.options)
    messages = [r.getMessage() for r in caplog.records if r.name == "aicsql"]
    assert any(m.startswith("mirroring s3://team-perf/aic/: ") for m in messages), messages
    lines = [m for m in messages if m.startswith("s3://team-perf/aic/: ")]
    assert len(lines) == 2, messages
    assert ", 0 fetched" not in lines[0] and ", 0 fetched (0.0 MB), 0 removed" in lines[1], lines


def test_errors_are_python_exceptions_naming_the_url(bucket, cache):
    with pytest.raises(ValueError, match="unknown scheme 'ftp'"):
        aicsql.context(data="ftp://host/aic")
    with pytest.raises(ValueError, match="aws.no_such_option"):
        aicsql.context(data="s3://team-perf/aic", data_options={**bucket.options, "aws.no_such_option": "1"})
    with pytest.raises(FileNotFoundError, match="s3://no-such-bucket/aic/"):
        aicsql.context(data="s3://no-such-bucket/aic", data_options=bucket.options)
    nowhere = {**bucket.options, "aws.endpoint": f"http://127.0.0.1:{_free_port()}"}
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="s3://team-perf/aic/"):
        aicsql.context(data="s3://team-perf/aic", data_options=nowhere)
    assert time.monotonic() - started < 60
    assert not (cache / ".remote").exists() or not any(
        (m / "complete").exists() for m in (cache / ".remote").iterdir()
    )


def test_refused_credentials_are_a_permission_error(cache):
    # moto checking every request's credentials knows no access key.
    moto = Moto(INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        with pytest.raises(PermissionError, match="AWS_ACCESS_KEY_ID.*data_options"):
            aicsql.context(data="s3://team-perf/aic", data_options=moto.options)
    finally:
        moto.stop()


def test_an_unreachable_store_with_a_complete_mirror_works_offline(published_subset, cache):
    moto = Moto()
    try:
        moto.upload("offline", "aic", published_subset)
        aicsql.context(data="s3://offline/aic", data_options=moto.options)
    finally:
        moto.stop()
    with pytest.warns(RuntimeWarning, match="offline"):
        ctx = aicsql.context(data="s3://offline/aic", data_options=moto.options)
    got = ctx.sql(f"SELECT gemm_latency('{DB}', 'fp8_block', 1, 1280, 5120) AS v").to_arrow_table().to_pylist()
    assert got == [{"v": 0.021895413193058825}]

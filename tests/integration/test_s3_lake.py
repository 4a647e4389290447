"""A lake on object storage: pools, commits, readers and one-line errors on a real S3 API
(moto's server on 127.0.0.1, started once for this module and stopped by its PID)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from engine.lake import maintenance
from engine.lake.commit_guard import LakeAccessError, UnsafeLakeError, forget_probes
from engine.lake.location import resolve_lake
from engine.lake.pool_record import POOL_SCHEMA
from engine.lake.pools import Lake
from engine.settings.errors import ConfigError
from tests.integration.test_pools import rows
from tests.s3 import SECRET_KEY, MotoServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def offsets(pool_uri: str, moto: MotoServer) -> list[tuple[str, int, int]]:
    options = {k: v for k, v in moto.env().items()}
    table = DeltaTable(pool_uri, storage_options=options).to_pyarrow_table()
    return sorted((k["topic"], k["partition"], k["offset"]) for k in table.column("kafka").to_pylist())


def test_pools_on_s3_append_exactly_once_and_list(s3_url: str, moto: MotoServer) -> None:
    lake = Lake(s3_url)
    assert not lake.location.is_local
    assert lake.pool_names() == []
    pool = lake.create_pool("raw")
    lake.create_pool("staging", "staging")
    first = pool.append_records(rows("t", 0, range(0, 10)), {("t", 0): 9})
    assert (first.version, first.rows, first.first_seqno) == (1, 10, 0)
    again = pool.append_records(rows("t", 0, range(5, 15)), {("t", 0): 14})
    assert (again.rows, again.skipped, again.first_seqno) == (5, 5, 10)
    assert lake.pool_names() == ["raw", "staging"]
    reopened = Lake(s3_url).open_pool("raw")
    assert reopened.position("t", 0) == 14
    assert reopened.last_seqno() == 14
    assert offsets(pool.uri, moto) == [("t", 0, o) for o in range(15)]
    assert pool.uri == f"{s3_url}/raw"
    assert any(key.endswith("raw/_delta_log/00000000000000000002.json") for key in moto.keys(s3_url))


def test_concurrent_writers_on_s3_commit_every_offset_once(s3_url: str, moto: MotoServer) -> None:
    """Three writers (own DeltaTable objects) race over the same offsets: each offset
    lands once and seqnos stay contiguous, because S3 refuses the second writer of a
    Delta version (conditional writes)."""
    lake = Lake(s3_url)
    lake.create_pool("raw")
    errors: list[BaseException] = []
    results = []

    def writer(seed: int) -> None:
        import random

        rnd = random.Random(seed)
        pool = Lake(s3_url).open_pool("raw")
        start = 0
        try:
            while start < 120:
                end = min(120, start + rnd.randint(10, 30))
                batch = pa.concat_tables([rows("t", p, range(start, end)) for p in (0, 1)])
                results.append(pool.append_records(batch, {("t", 0): end - 1, ("t", 1): end - 1}))
                start = end
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert any(r.attempts > 1 for r in results) or any(r.skipped for r in results)
    pool_uri = f"{s3_url}/raw"
    assert offsets(pool_uri, moto) == sorted(("t", p, o) for p in (0, 1) for o in range(120))
    table = DeltaTable(pool_uri, storage_options=moto.env()).to_pyarrow_table()
    assert sorted(table.column("seqno").to_pylist()) == list(range(240))


def test_vacuum_removes_files_of_a_commit_that_never_happened(s3_url: str, moto: MotoServer) -> None:
    from engine.lake import delta

    lake = Lake(s3_url)
    pool = lake.create_pool("raw")
    pool.append_records(rows("t", 0, range(0, 5)), {("t", 0): 4})
    # a writer that died after writing its file, before its commit
    fresh = rows("t", 0, range(5, 8)).add_column(0, "seqno", pa.array([5, 6, 7], pa.int64()))
    orphan = delta.write_files(pool.location, fresh.cast(POOL_SCHEMA))
    assert any(key.endswith(orphan[0].path) for key in moto.keys(pool.uri))
    assert offsets(pool.uri, moto) == [("t", 0, o) for o in range(5)]  # invisible
    result = maintenance.vacuum(pool, retention_hours=0, enforce_retention=False)
    assert any(orphan[0].path in f for f in result.files)
    assert not any(key.endswith(orphan[0].path) for key in moto.keys(pool.uri))
    assert offsets(pool.uri, moto) == [("t", 0, o) for o in range(5)]


def test_lake_from_env_and_storage_json(moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = moto.new_lake("from-file")
    home = tmp_path / "home"
    home.mkdir()
    settings = {"lake": url, **moto.env()}
    (home / "storage.json").write_text(json.dumps(settings))
    (home / "storage.json").chmod(0o600)
    for key in moto.env():
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("ZYNC_LAKE", raising=False)
    monkeypatch.setenv("ZYNC_HOME", str(home))
    forget_probes()
    where = resolve_lake()
    assert where.uri == url
    assert where.settings.endpoint_url == moto.endpoint
    Lake(where).create_pool("raw")
    assert Lake(resolve_lake()).pool_names() == ["raw"]
    # the environment wins over the file
    other = moto.new_lake("from-env")
    monkeypatch.setenv("ZYNC_LAKE", other)
    assert resolve_lake().uri == other
    # secrets never show
    text = repr(where.settings) + str(where) + repr(where)
    assert SECRET_KEY not in text


def test_typos_in_a_lake_url_are_one_line_errors(tmp_path: Path) -> None:
    for text, words in [
        ("s3:/bucket/lake", "did you mean s3://bucket/lake"),
        ("s4://bucket/lake", "unknown scheme s4://"),
        ("s3://", "no bucket"),
        ("s3:///lake", "no bucket"),
        ("s3://Bad_Bucket/lake", "not a valid bucket name"),
        ("gs://bucket/lake", "not supported yet"),
    ]:
        with pytest.raises(ConfigError, match=words) as caught:
            resolve_lake(text, env={"ZYNC_HOME": str(tmp_path)})
        assert "\n" not in str(caught.value)


def _cli(args: list[str], env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    full = {**base, "ZYNC_HOME": str(home), **env}
    return subprocess.run(
        [sys.executable, "-m", "zync_tui.cli", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_cli_one_line_errors_typo_credentials_endpoint(moto: MotoServer, tmp_path: Path) -> None:
    url = moto.new_lake()
    env = moto.env()
    typo = _one_line_error(_cli(["pool", "ls", "--lake", url.replace("s3://", "s3:/")], env, tmp_path))
    assert "did you mean s3://" in typo
    no_keys = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    no_keys["AWS_SHARED_CREDENTIALS_FILE"] = no_keys["AWS_CONFIG_FILE"] = str(tmp_path / "none")
    missing = _one_line_error(_cli(["pool", "create", "raw", "--lake", url], no_keys, tmp_path))
    assert "no AWS credentials" in missing
    assert "AWS_ACCESS_KEY_ID" in missing
    wrong = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    # moto takes any key by default: a missing bucket stands for a refusal here
    gone = _one_line_error(_cli(["pool", "ls", "--lake", "s3://no-such-bucket-zync/lake"], wrong, tmp_path))
    assert "no bucket 'no-such-bucket-zync'" in gone
    unreachable = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    down = _one_line_error(_cli(["pool", "ls", "--lake", url], unreachable, tmp_path))
    assert "cannot reach the S3 endpoint" in down
    plain_http = {k: v for k, v in env.items() if k != "AWS_ALLOW_HTTP"}
    http = _one_line_error(_cli(["pool", "ls", "--lake", url], plain_http, tmp_path))
    assert "AWS_ALLOW_HTTP=true" in http
    for text in (typo, missing, gone, down, http):
        assert SECRET_KEY not in text
        assert "not-the-secret" not in text


def test_cli_refused_credentials_are_a_one_line_error(tmp_path: Path) -> None:
    """A store that checks keys (moto with IAM authentication on) refuses unknown ones."""
    from tests.s3 import start_moto

    strict = start_moto(tmp_path, check_keys=True)
    try:
        env = {**strict.env(), "AWS_ACCESS_KEY_ID": "AKIAUNKNOWN000000000"}
        refused = _one_line_error(_cli(["pool", "ls", "--lake", "s3://some-bucket/lake"], env, tmp_path))
    finally:
        strict.stop()
    assert "refused the credentials" in refused
    assert "AWS_ACCESS_KEY_ID" in refused
    assert SECRET_KEY not in refused


def test_cli_pool_commands_on_s3(moto: MotoServer, tmp_path: Path) -> None:
    url = moto.new_lake()
    env = {**moto.env(), "ZYNC_LAKE": url}
    created = _cli(["pool", "create", "raw"], env, tmp_path)
    assert created.returncode == 0, created.stderr
    assert f"{url}/raw" in created.stdout
    listed = _cli(["pool", "ls", "--json"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["lake"] == url
    assert [p["name"] for p in data["pools"]] == ["raw"]
    shown = _cli(["pool", "show", "raw", "--json"], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    vacuumed = _cli(["pool", "vacuum", "raw"], env, tmp_path)
    assert vacuumed.returncode == 0, vacuumed.stderr
    for result in (created, listed, shown, vacuumed):
        assert SECRET_KEY not in result.stdout + result.stderr


def test_a_store_without_conditional_writes_is_refused(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that ignores If-None-Match (here: a proxy in front of moto that drops the
    header) would let two writers commit the same Delta version: zync refuses to write,
    in one line naming the setting; reading still works."""
    from tests.s3_proxy import start_header_dropping_proxy

    url = moto.new_lake()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    forget_probes()
    Lake(url).create_pool("raw")  # made on the real store
    proxy = start_header_dropping_proxy(moto.port, "If-None-Match")
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        forget_probes()
        lake = Lake(url)
        pool = lake.open_pool("raw")  # reading is fine
        with pytest.raises(UnsafeLakeError, match="AWS_S3_ALLOW_UNSAFE_RENAME=true") as caught:
            pool.append_records(rows("t", 0, range(0, 3)), {("t", 0): 2})
        assert "\n" not in str(caught.value)
        monkeypatch.setenv("AWS_S3_LOCKING_PROVIDER", "dynamodb")
        with pytest.raises(UnsafeLakeError, match="AWS_S3_LOCKING_PROVIDER=dynamodb is not honoured"):
            pool.append_records(rows("t", 0, range(0, 3)), {("t", 0): 2})
        monkeypatch.delenv("AWS_S3_LOCKING_PROVIDER")
        result = _cli(["pool", "create", "other", "--lake", url], {**moto.env(), "AWS_ENDPOINT_URL": proxy.endpoint}, tmp_path)
        assert "refusing to write" in _one_line_error(result)
    finally:
        proxy.stop()


def test_credentials_from_an_aws_profile(moto: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.s3 import ACCESS_KEY

    url = moto.new_lake()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[zync-writer]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_PROFILE", "zync-writer")
    forget_probes()
    lake = Lake(url)
    assert lake.location.settings.access_key_id == ACCESS_KEY
    assert "AWS profile zync-writer" in lake.location.settings.origin
    lake.create_pool("raw")
    assert lake.pool_names() == ["raw"]
    assert SECRET_KEY not in repr(lake.location.settings)


def test_missing_credentials_raise_lake_access_error(moto: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = moto.new_lake()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    forget_probes()
    with pytest.raises(LakeAccessError, match="no AWS credentials"):
        Lake(url).pool_names()


def test_pool_on_s3_read_by_delta_spark_and_delta_rs(spark, s3_url: str, moto: MotoServer) -> None:
    lake = Lake(s3_url)
    pool = lake.create_pool("raw")
    pool.append_records(pa.concat_tables([rows("t", p, range(0, 20)) for p in (0, 1)]),
                        {("t", 0): 19, ("t", 1): 19})
    pool.append_records(rows("t", 0, range(20, 25)), {("t", 0): 24})
    by_spark = sorted(
        (r["topic"], r["partition"], r["offset"])
        for r in pool.read(spark).select("kafka.*").collect()
    )
    assert by_spark == offsets(pool.uri, moto)
    assert len(by_spark) == 45
    via_sql = spark.sql(f"SELECT count(*) AS n FROM delta.`{pool.location.spark_uri}`").first()
    assert via_sql is not None
    assert via_sql["n"] == 45


def test_executor_files_of_a_lost_or_crashed_commit_on_s3(spark, s3_url: str, moto: MotoServer) -> None:
    """Spark executors write a pass's outputs straight into the staging pool on S3
    (s3a); a commit that loses the race deletes them at once, and those of a writer that
    died before committing are invisible, then removed by vacuum."""
    from engine.lake import delta
    from tests.integration.test_pools import _spark_rows

    lake = Lake(s3_url)
    pool = lake.create_pool("staging", "staging")
    planned = pool.version
    lost = pool.write_spark(_spark_rows(spark, "out", range(0, 10), 0), label="etl")
    assert lost
    assert all(any(k.endswith(f.path) for k in moto.keys(pool.uri)) for f in lost)
    lake.open_pool("staging").commit_rows(rows("t", 0, range(0, 3)), expect_version=planned)
    with pytest.raises(delta.CommitConflict):
        pool.commit_rows(rows("t", 0, range(0, 0)), expect_version=planned, files=lost)
    assert not any(any(k.endswith(f.path) for k in moto.keys(pool.uri)) for f in lost)

    pool.refresh()
    crashed = pool.write_spark(_spark_rows(spark, "out", range(0, 10), 3), label="etl")
    pool.refresh()
    assert pool.records(spark).count() == 3  # the crashed writer's rows are in no snapshot
    result = maintenance.vacuum(pool, retention_hours=0, enforce_retention=False)
    assert any(crashed[0].path in f for f in result.files)
    assert not any(any(k.endswith(f.path) for k in moto.keys(pool.uri)) for f in crashed)


def test_commands_that_scan_a_pool_on_s3_exit_cleanly(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool is scanned through pyarrow's own S3 client, not delta-rs' Python file
    system (`to_pyarrow_dataset`), whose threads aborted a short scan's process at exit in
    13 of 40 runs ("terminate called without an active exception", exit -6 after the
    right output; bench/RESULTS.md, "S3: an abort at exit"); `zync pool show`, which scans
    every file, exits 0."""
    import pyarrow.fs

    url = moto.new_lake()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    forget_probes()
    pool = Lake(url).create_pool("raw")
    for first in range(0, 60, 10):  # several files, so the scan runs on several threads
        pool.append_records(rows("t", 0, range(first, first + 10)), {("t", 0): first + 9})
    assert isinstance(pool.dataset().filesystem, pyarrow.fs.S3FileSystem)
    assert pool.dataset().to_table(columns=["seqno"]).num_rows == 60
    env = {**moto.env(), "ZYNC_LAKE": url}
    for _ in range(3):
        shown = _cli(["pool", "show", "raw", "--json"], env, tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert [p["rows"] for p in json.loads(shown.stdout)["partitions"]] == [60]

"""The files folder is private: by default the user's own data folder, not a shared temporary
one; made 0700, its files 0600; a folder another user owns is refused at start, by the web
and by the worker alike."""

from __future__ import annotations

import io
import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatq.batches.file_storage import DirectoryStorage, new_file_id
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis, free_port
from tests.batchkit import jsonl, request_line
from tests.inproc import in_process
from tests.procs import ALICE_KEY, Proc, base_env
from web.app import create_app

REFUSAL = "refusing to start: CHATQ_FILES_DIR="


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def others_folder(tmp_path: Path) -> Path:
    """A folder that the user `nobody` owns (the tests run as root, who may give it away)."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    return folder


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    local = LocalRedis().start()
    yield local
    local.stop()


def test_the_default_folder_is_in_the_user_s_data_folder_not_a_shared_temporary_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert Settings().files_dir == str(tmp_path / "data" / "chatq" / "files")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings().files_dir == str(tmp_path / "home" / ".local" / "share" / "chatq" / "files")
    monkeypatch.delenv("XDG_DATA_HOME")
    assert Settings().files_dir == str(tmp_path / "home" / ".local" / "share" / "chatq" / "files")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    tempfile.tempdir = None  # read TMPDIR again
    try:
        assert not Settings().files_dir.startswith(tempfile.gettempdir())
    finally:
        tempfile.tempdir = None


def test_an_uploaded_file_is_0600_in_a_folder_made_0700(server: LocalRedis, tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # as an older chatq, or a careless hand, left it
    settings = Settings(
        redis_url=server.url, api_keys=(("alice", ALICE_KEY),), files_dir=str(folder)
    )
    with in_process(settings) as app:
        assert _mode(folder) == 0o700
        form = {"purpose": "batch", "file": (io.BytesIO(jsonl([request_line("a", "x")])), "a")}
        r = app.test_client().post(
            "/v1/files",
            data=form,
            headers={"Authorization": f"Bearer {ALICE_KEY}"},
            content_type="multipart/form-data",
        )
        assert r.status_code == 200, r.get_data(as_text=True)
    assert _mode(folder / r.get_json()["id"]) == 0o600
    assert _mode(folder / ".partial") == 0o700


def test_a_file_being_written_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    storage = DirectoryStorage(str(tmp_path))
    previous = os.umask(0)
    try:
        upload = storage.create(new_file_id())  # a batch's output file is written so too
        partial = next((tmp_path / ".partial").iterdir())
        assert _mode(partial) == 0o600 and _mode(tmp_path / ".partial") == 0o700
        upload.discard()
    finally:
        os.umask(previous)


def test_a_folder_another_user_owns_is_refused_by_the_app(
    server: LocalRedis, others_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(redis_url=server.url, files_dir=str(others_folder))
    with pytest.raises(SystemExit):
        create_app(settings)
    assert any(REFUSAL in r.getMessage() for r in caplog.records), caplog.text
    assert _mode(others_folder) == 0o700 and not list(others_folder.iterdir())


@pytest.mark.parametrize("name", ["web", "worker"])
def test_a_folder_another_user_owns_stops_web_and_worker_with_one_clear_line(
    redis_url: str, fakellm: str, others_folder: Path, name: str
) -> None:
    env = base_env(
        redis_url,
        fakellm,
        CHATQ_FILES_DIR=str(others_folder),
        CHATQ_BIND=f"127.0.0.1:{free_port()}",
        CHATQ_WORKER_METRICS_BIND=f"127.0.0.1:{free_port()}",
    )
    proc = Proc(f"{name}-files-dir", [name], env).start()
    assert proc.process is not None
    try:
        code = proc.process.wait(60)
    except subprocess.TimeoutExpired:
        proc.stop()
        pytest.fail(f"{name} started on a folder another user owns:\n{proc.log_text()[-2000:]}")
    log = proc.log_text()
    assert code != 0, log
    refusals = [line for line in log.splitlines() if REFUSAL in line]
    assert len(refusals) == 1, log
    assert f"owned by uid {pwd.getpwnam('nobody').pw_uid}" in refusals[0]
    assert "Traceback" not in log and "ready." not in log, log

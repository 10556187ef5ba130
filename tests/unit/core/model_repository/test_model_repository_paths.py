"""Unit tests of the path and name checks behind the repository API, the upload writer and the CLI flags."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritium.cli import parse_args
from tritium.core.errors import Code, TritonError
from tritium.core.model_repository.paths import check_model_name, check_relative_file
from tritium.core.model_repository.remote import is_remote
from tritium.core.model_repository.repository import fingerprint
from tritium.core.model_repository.uploads import check_upload_path, write_upload


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../a", "a\\b", "a\0b"])
def test_bad_model_names(name: str) -> None:
    with pytest.raises(TritonError) as info:
        check_model_name(name)
    assert info.value.code == Code.INVALID_ARG


@pytest.mark.parametrize("name", ["m", "a..b", "model-1.onnx", "..a"])
def test_good_model_names(name: str) -> None:
    assert check_model_name(name) == name


def test_relative_files(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    check_relative_file(tmp_path, "model.py", "default_model_filename")
    check_relative_file(tmp_path, "", "runtime")
    for bad in ("../x", "/etc/passwd", "1/../../x", "a\0b"):
        with pytest.raises(TritonError):
            check_relative_file(tmp_path, bad, "runtime")
    os.symlink("/etc", tmp_path / "link")
    with pytest.raises(TritonError, match="leaves the directory"):
        check_relative_file(tmp_path, "link/passwd", "runtime")


def test_upload_paths(tmp_path: Path) -> None:
    assert check_upload_path("1/model.py") == "1/model.py"
    for bad in ("", "/abs", "../x", "1/../x", "./x", "1//x", "a\\b", "a\0b"):
        with pytest.raises(TritonError):
            check_upload_path(bad)
    folder = write_upload(tmp_path / "up", "m", {"1/model.py": b"x", "config.pbtxt": b"y"})
    assert (folder / "1" / "model.py").read_bytes() == b"x" and folder.parent == tmp_path / "up"
    with pytest.raises(TritonError):
        write_upload(tmp_path / "up", "m", {"ok.txt": b"x", "../evil": b"y"})
    assert sorted(p.name for p in (tmp_path / "up").iterdir()) == [folder.name]  # nothing left behind


def test_fingerprint_sees_new_folders_and_changed_files(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "config.pbtxt").write_text("a")
    first = fingerprint(tmp_path)
    (tmp_path / "2").mkdir()
    second = fingerprint(tmp_path)
    assert first != second
    (tmp_path / "config.pbtxt").write_text("bb")
    assert fingerprint(tmp_path) != second


def test_is_remote() -> None:
    assert is_remote("s3://b/m") and is_remote("gs://b") and is_remote("az://c/m")
    assert not is_remote("/models") and not is_remote("file:///models") and not is_remote("models")


def test_model_management_flags() -> None:
    options, _ = parse_args(
        [
            "--model-repository=/m",
            "--model-control-mode=explicit",
            "--load-model=a",
            "--load-model=b",
            "--repository-poll-secs=3",
            "--model-load-thread-count=2",
            "--http-restricted-api=model-repository,statistics:Admin-Key=s",
            "--grpc-restricted-protocol=logging:k=v",
        ]
    )
    assert options.model_control_mode == "explicit" and options.startup_models == ["a", "b"]
    assert options.repository_poll_s == 3.0 and options.model_load_threads == 2
    assert options.http_restricted_api == {"model-repository": ("Admin-Key", "s"), "statistics": ("Admin-Key", "s")}
    assert options.grpc_restricted_protocol == {"logging": ("k", "v")}
    assert not options.allow_file_override
    for bad in (["--load-model=*", "--load-model=a"], ["--model-load-thread-count=0"], ["--repository-poll-secs=-1"]):
        with pytest.raises(SystemExit):
            parse_args(["--model-repository=/m", *bad])

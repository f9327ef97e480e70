"""Every write leaves min_free_disk_bytes free on its disk: checked before anything is written, in each front end."""

from __future__ import annotations

import collections
import io

import pytest
from helpers import sample_path

import shrinkray
from shrinkray import cli
from shrinkray.errors import WriteError
from shrinkray.io import files
from shrinkray.io.limits import Limits

Usage = collections.namedtuple("Usage", "total used free")


@pytest.fixture
def disk(monkeypatch):
    """A disk with ``disk.free`` bytes free, whatever the machine has."""

    class Disk:
        free = 10 << 30

    monkeypatch.setattr(files.shutil, "disk_usage", lambda path: Usage(100 << 30, 0, Disk.free))
    return Disk


def test_a_model_is_not_saved_onto_a_nearly_full_disk(disk, tmp_path):
    loaded = shrinkray.load(sample_path("mlp"))
    disk.free = Limits().min_free_disk_bytes + 1000  # less than the model on top of the spare
    with pytest.raises(WriteError, match="not enough free disk space for the model files") as found:
        shrinkray.save(loaded.model, tmp_path / "out.onnx")
    assert "Free some disk space" in found.value.hint and "keeping 256.00 MiB spare" in str(found.value)
    assert list(tmp_path.iterdir()) == []
    disk.free = 10 << 30
    assert shrinkray.save(loaded.model, tmp_path / "out.onnx").is_file()


def test_reports_are_all_refused_before_any_is_written(disk, tmp_path):
    kept = tmp_path / "a.txt"
    kept.write_text("the user's old report")
    disk.free = Limits().min_free_disk_bytes + 5
    with pytest.raises(WriteError):
        files.write_outputs({kept: b"new" * 10, tmp_path / "b.txt": b"more"})
    assert kept.read_text() == "the user's old report" and not (tmp_path / "b.txt").exists()


def test_the_spare_is_a_setting(disk, tmp_path, monkeypatch):
    disk.free = 1 << 20
    monkeypatch.setenv("SHRINKRAY_MIN_FREE_DISK_BYTES", "1")
    assert files.write_outputs({tmp_path / "x": b"12345"})[0].read_bytes() == b"12345"


def test_an_upload_is_not_copied_onto_a_nearly_full_disk(disk, tmp_path):
    from app_ui.large_models import save_upload

    class Upload(io.BytesIO):
        name = "model.onnx"
        size = 300 << 20

    disk.free = 400 << 20  # 300 MiB upload + 256 MiB spare do not fit
    with pytest.raises(WriteError, match="not enough free disk space for the upload"):
        save_upload(Upload(b"x" * 10), tmp_path / "uploads")
    assert not any((tmp_path / "uploads").rglob("*.onnx"))


def test_the_cli_refuses_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHRINKRAY_MIN_FREE_DISK_BYTES", str(2**60))  # no disk has that much: every write refused
    out = tmp_path / "mlp.small.onnx"
    code = cli.main(["shrink", str(sample_path("mlp")), "-m", "weights-int8", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "not enough free disk space" in err and "Traceback" not in err
    assert not out.exists()

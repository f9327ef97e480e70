"""shrinkray.io.archive.load_zip: safe unpacking of an uploaded model folder."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zipfile
from pathlib import Path

import pytest
from hostile.build_corpus import external_model_bytes, make_zip, small_mlp, symlink_info

import shrinkray
from shrinkray.errors import LimitExceededError, ModelLoadError, UnsafeModelError
from shrinkray.io import archive
from shrinkray.io.archive import is_zip, load_zip
from shrinkray.io.limits import Limits


@pytest.fixture
def work(tmp_path) -> Path:
    return tmp_path / "work"


def good_members(prefix: str = "") -> list[tuple[str, bytes]]:
    onnx_bytes, data = external_model_bytes()
    return [(f"{prefix}model.onnx", onnx_bytes), (f"{prefix}weights.bin", data)]


def unpacked(work: Path) -> list[Path]:
    """The per-upload folders load_zip created below work."""
    return sorted(work.iterdir()) if work.exists() else []


# --------------------------------------------------------------------------- good archives


@pytest.mark.parametrize("prefix", ["", "my model/", "a/b/"])
def test_model_at_the_top_or_in_one_folder(work, prefix):
    data = make_zip(good_members(prefix) + ([(prefix + "README.txt", b"hello")] if prefix else []))
    loaded = load_zip(data, work)
    assert loaded.name == "model"
    assert loaded.path is not None and loaded.path.is_file()
    assert loaded.path.relative_to(unpacked(work)[0]).as_posix() == prefix + "model.onnx"
    assert loaded.external_data_files == ["weights.bin"]
    assert loaded.sha256 == hashlib.sha256(data).hexdigest()
    assert loaded.file_bytes == sum(len(b) for _, b in good_members())
    shrinkray.validate(loaded.model)


def test_external_data_in_a_subfolder_of_the_archive(work):
    onnx_bytes, data = external_model_bytes("data/weights.bin")
    loaded = load_zip(make_zip([("model.onnx", onnx_bytes), ("data/", b""), ("data/weights.bin", data)]), work)
    assert loaded.external_data_files == [os.path.join("data", "weights.bin")]


def test_stored_bzip2_and_lzma_members(work):
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        assert load_zip(make_zip(good_members(), compression=method), work / str(method)).name == "model"


def test_a_single_onnx_needs_no_data(work):
    loaded = load_zip(make_zip([("nested/only.onnx", small_mlp().SerializeToString())]), work)
    assert loaded.name == "only" and loaded.external_data_files == []


def test_from_a_path_the_archive_is_not_modified(tmp_path, work):
    path = tmp_path / "upload.zip"
    path.write_bytes(make_zip(good_members()))
    before = path.read_bytes()
    loaded = load_zip(path, work)
    assert path.read_bytes() == before
    assert loaded.sha256 == hashlib.sha256(before).hexdigest()
    assert is_zip(path) and is_zip(before) and not is_zip(b"\x08\x0a") and not is_zip(tmp_path / "missing")


def test_each_upload_gets_its_own_folder(work):
    data = make_zip(good_members())
    first, second = load_zip(data, work), load_zip(data, work)
    assert first.path != second.path
    assert len(unpacked(work)) == 2


def test_macos_junk_is_ignored(work):
    members = good_members() + [("__MACOSX/._model.onnx", b"junk"), ("._model.onnx", b"junk"), (".DS_Store", b"x")]
    loaded = load_zip(make_zip(members), work)
    folder = unpacked(work)[0]
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx", "weights.bin"]
    assert loaded.name == "model"


def test_one_model_at_the_top_wins_over_nested_ones(work):
    mlp = small_mlp().SerializeToString()
    loaded = load_zip(make_zip([("main.onnx", mlp), ("extras/other.onnx", mlp)]), work)
    assert loaded.name == "main"


def test_choose_picks_a_model_by_name(work):
    mlp = small_mlp().SerializeToString()
    data = make_zip([("a.onnx", mlp), ("sub/b.onnx", mlp), ("c.onnx", mlp)])
    assert load_zip(data, work, choose="sub/b.onnx").name == "b"
    assert load_zip(data, work, choose="./c.onnx").name == "c"
    with pytest.raises(ModelLoadError) as excinfo:
        load_zip(data, work, choose="d.onnx")
    assert "no model 'd.onnx'" in str(excinfo.value) and "'a.onnx', 'sub/b.onnx', 'c.onnx'" in str(excinfo.value)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("../evil.bin", "climbs out of the archive with '..'"),
        ("a/../../evil.bin", "climbs out of the archive"),
        ("/etc/evil.bin", "is an absolute path"),
        ("C:/evil.bin", "names a drive letter"),
        ("c:evil.bin", "names a drive letter"),
        ("..\\evil.bin", "uses backslashes"),
        ("sub\\evil.bin", "uses backslashes"),
        ("line\nbreak.bin", "control characters"),
        ("x" * 300 + ".bin", "too long"),
    ],
)
def test_hostile_member_names(work, name, fragment):
    with pytest.raises(UnsafeModelError) as excinfo:
        load_zip(make_zip(good_members() + [(name, b"x")]), work)
    assert fragment in str(excinfo.value) and "nothing was extracted" in str(excinfo.value)
    assert unpacked(work) == []


@pytest.mark.parametrize("mode", [stat.S_IFLNK | 0o777, stat.S_IFIFO | 0o644, stat.S_IFCHR | 0o644, stat.S_IFBLK])
def test_links_and_special_files_are_refused(work, mode):
    info = symlink_info("weights.bin")
    info.external_attr = mode << 16
    with pytest.raises(UnsafeModelError, match="symbolic link|not a regular file"):
        load_zip(make_zip([good_members()[0], (info, b"/etc/passwd")]), work)
    assert unpacked(work) == []


def test_symlink_member_in_a_folder(work):
    with pytest.raises(UnsafeModelError, match="'data/link' is a symbolic link"):
        load_zip(make_zip(good_members() + [(symlink_info("data/link"), b"..")]), work)


def test_same_folder_twice_is_fine_but_a_file_twice_is_not(work):
    load_zip(make_zip(good_members() + [("d/", b""), ("d/", b"")]), work)
    with pytest.raises(UnsafeModelError, match="'./model.onnx' appears twice"):
        load_zip(make_zip(good_members() + [("./model.onnx", b"x")]), work)


def test_too_many_members_is_refused_before_zipfile_reads_the_directory(work, monkeypatch):
    data = make_zip(good_members() + [(f"f{k}", b"") for k in range(30)])

    def no(*args, **kwargs):
        raise AssertionError("zipfile must not be asked to list a too-large archive")

    monkeypatch.setattr(archive.zipfile, "ZipFile", no)
    with pytest.raises(LimitExceededError, match="The archive declares 32 members, which exceeds max_zip_files=31"):
        load_zip(data, work, Limits(max_zip_files=31))


def test_member_count_from_zipfile_when_the_end_record_is_unusual(work, monkeypatch):
    monkeypatch.setattr(archive, "_declared_entry_count", lambda fh, size: None)
    with pytest.raises(LimitExceededError, match="The archive holds 3 members, which exceeds max_zip_files=2"):
        load_zip(make_zip(good_members() + [("x", b"")]), work, Limits(max_zip_files=2))


def test_declared_size_and_ratio(work):
    zeros = make_zip([good_members()[0], ("weights.bin", b"\0" * (3 << 20))])
    with pytest.raises(LimitExceededError) as excinfo:
        load_zip(zeros, work)
    text = str(excinfo.value)
    assert "times larger" in text and "max_compression_ratio=100 (set SHRINKRAY_MAX_COMPRESSION_RATIO)" in text
    with pytest.raises(LimitExceededError, match="max_unpacked_bytes=1048576"):
        load_zip(zeros, work, Limits(max_unpacked_bytes=1 << 20, max_compression_ratio=10**9))
    assert unpacked(work) == []


def test_small_highly_compressible_archives_are_fine(work):
    """Below 1 MiB unpacked the ratio is not checked: a tiny model of zeros is not a bomb."""
    onnx_bytes, data = external_model_bytes()
    load_zip(make_zip([("model.onnx", onnx_bytes), ("weights.bin", data), ("pad.bin", b"\0" * 500_000)]), work)


def test_streamed_bytes_are_counted_against_the_limit(work, monkeypatch):
    """Even if the declared sizes passed, extraction stops once the real bytes exceed the limit."""
    monkeypatch.setattr(archive, "CHUNK", 1024)
    original = archive._check_members

    def trusting(zf, size, limits):
        return original(zf, size, Limits())  # as if the headers had lied about the sizes

    monkeypatch.setattr(archive, "_check_members", trusting)
    with pytest.raises(LimitExceededError, match="unpacks to more than"):
        load_zip(make_zip(good_members()), work, Limits(max_unpacked_bytes=50_000))
    assert unpacked(work) == [], "the half-written files were removed"


def test_archive_size_limit(work):
    with pytest.raises(LimitExceededError, match="above the limit max_file_bytes=100 "):
        load_zip(make_zip(good_members()), work, Limits(max_file_bytes=100))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "is empty \\(0 bytes\\)"),
        (b"PK\x05\x06" + b"\0" * 18, "holds no .onnx file"),  # an empty archive
        (b"not a zip at all", "is not a readable zip archive"),
    ],
)
def test_broken_archives(work, data, fragment):
    with pytest.raises(ModelLoadError, match=fragment):
        load_zip(data, work)


def test_truncated_archive(work):
    data = make_zip(good_members())
    for cut in (len(data) // 3, len(data) - 10):
        with pytest.raises(ModelLoadError, match="not a readable zip archive|is damaged"):
            load_zip(data[:cut], work)
    assert unpacked(work) == []


def test_errors_from_the_model_name_it_as_inside_the_archive(work):
    data = make_zip([("pkg/model.onnx", b"\xff" * 10)])
    with pytest.raises(ModelLoadError) as excinfo:
        load_zip(data, work)
    text = str(excinfo.value)
    assert text.startswith("pkg/model.onnx is not a readable ONNX model"), text
    assert str(work) not in text


def test_external_data_escaping_the_models_own_subfolder(work):
    onnx_bytes, data = external_model_bytes("../weights.bin")
    with pytest.raises(UnsafeModelError, match="outside the model's own folder"):
        load_zip(make_zip([("pkg/model.onnx", onnx_bytes), ("weights.bin", data)]), work)
    assert unpacked(work) == []


def test_disk_errors_are_explained(work, monkeypatch):
    real_open = open

    def full(path, mode="r", *args, **kwargs):
        if "x" in mode:
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full)
    with pytest.raises(ModelLoadError, match="could not be unpacked \\(No space left on device\\)"):
        load_zip(make_zip(good_members()), work)


def test_a_zip64_end_record_is_read(work):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, blob in good_members():
            with zf.open(name, "w", force_zip64=True) as fh:
                fh.write(blob)
    assert archive._declared_entry_count(io.BytesIO(buf.getvalue()), len(buf.getvalue())) == 2
    assert load_zip(buf.getvalue(), work).name == "model"


# --------------------------------------------------------------------------- capped reading, every method


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_member_chunks_reads_every_method_in_bounded_pieces(method, monkeypatch):
    monkeypatch.setattr(archive, "CHUNK", 4096)
    blob = bytes(range(256)) * 400 + b"\0" * 300_000
    data = make_zip([("a.bin", b"first"), ("b.bin", blob)], compression=method)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo("b.bin")
        chunks = list(archive.member_chunks(io.BytesIO(data), info, len(data)))
    assert b"".join(chunks) == blob
    assert max(len(c) for c in chunks) <= 4096


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_member_stops_inflating_once_past_its_declared_size(method, work):
    from hostile.build_corpus import raw_zip

    body = zipfile._get_compressor(method)  # what zipfile itself writes (raw deflate, bzip2, zip's LZMA)
    payload = body.compress(b"\0" * (8 << 20)) + body.flush()
    data = raw_zip([("model.onnx", method, payload, 1000)])
    with pytest.raises(
        UnsafeModelError, match=r"'model.onnx' unpacks to more bytes than its header declares \(1,000\)"
    ):
        load_zip(data, work)
    assert unpacked(work) == []


def test_a_member_shorter_than_declared_or_with_a_wrong_crc_is_damaged(work):
    from hostile.build_corpus import raw_zip

    data = raw_zip([("model.onnx", zipfile.ZIP_STORED, b"\0" * 10, 20)])
    with pytest.raises(ModelLoadError, match=r"'model.onnx' is damaged \(the member holds 10 bytes, not the 20"):
        load_zip(data, work)
    bad_crc = bytearray(make_zip([("model.onnx", small_mlp().SerializeToString())], compression=zipfile.ZIP_STORED))
    bad_crc[200] ^= 0xFF  # inside the model's bytes
    with pytest.raises(ModelLoadError, match=r"'model.onnx' is damaged \(Bad CRC-32"):
        load_zip(bytes(bad_crc), work)


def test_data_running_past_the_end_of_the_archive_is_damaged(work):
    from hostile.build_corpus import raw_zip

    data = bytearray(raw_zip([("model.onnx", zipfile.ZIP_STORED, b"\0" * 10, 10)]))
    central = data.find(b"PK\x01\x02")
    data[central + 20 : central + 24] = (10**6).to_bytes(4, "little")  # compressed size in the directory
    with pytest.raises(ModelLoadError, match="damaged \\(the member's data runs past the end of the archive\\)"):
        load_zip(bytes(data), work)


def test_a_directory_with_more_entries_than_the_end_record_is_refused_before_zipfile_lists_it(work, monkeypatch):
    from hostile.build_corpus import raw_zip

    data = raw_zip([("model.onnx", zipfile.ZIP_STORED, b"x", 1)], declared_count=1, extra_entries=50)

    def no(*args, **kwargs):
        raise AssertionError("zipfile must not list a directory that disagrees with its end record")

    monkeypatch.setattr(archive.zipfile, "ZipFile", no)
    with pytest.raises(UnsafeModelError, match=r"lists more members than its end record declares \(1\); nothing"):
        load_zip(data, work)


def test_the_directory_walk_stops_at_the_declared_count_plus_one(monkeypatch):
    from hostile.build_corpus import raw_zip

    data = raw_zip([("model.onnx", zipfile.ZIP_STORED, b"x", 1)], declared_count=3, extra_entries=100_000)
    reads = []

    class Counting(io.BytesIO):
        def read(self, n=-1):
            reads.append(n)
            return super().read(n)

    with pytest.raises(UnsafeModelError, match=r"declares \(3\)"):
        archive._check_directory(Counting(data), len(data))
    assert len(reads) < 10


def test_scratch_folders_of_dead_processes_are_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(archive.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = tmp_path / f"{archive.SCRATCH_PREFIX}999999999-abc"
    (dead / "inner").mkdir(parents=True)
    alive = tmp_path / f"{archive.SCRATCH_PREFIX}1-abc"  # init never dies
    alive.mkdir()
    other = tmp_path / f"{archive.SCRATCH_PREFIX}legacy"
    other.mkdir()
    with archive.scratch_folder() as folder:
        assert folder.name.startswith(f"{archive.SCRATCH_PREFIX}{os.getpid()}-") and folder.is_dir()
        assert not dead.exists() and alive.exists() and other.exists()
    assert not folder.exists()


def test_a_tokenizer_travels_with_a_zipped_transformers_js_folder(tmp_path):
    """onnx/model.onnx beside ../tokenizer.json in one zip: the tokenizer outlives the unpacked copy when the
    caller keeps a folder (the app's session folder); without one it is dropped, never left dangling."""
    from helpers import sample_path

    from shrinkray.io.archive import load_any

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        zf.write(sample_path("mlp"), "onnx/model.onnx")
        zf.writestr("tokenizer.json", '{"version": "1.0"}')
    kept = load_any(data.getvalue(), name="lm.zip", workdir=tmp_path / "session")
    assert kept.tokenizer and Path(kept.tokenizer).read_text() == '{"version": "1.0"}'
    assert Path(kept.tokenizer).parent == tmp_path / "session"
    assert load_any(data.getvalue(), name="lm.zip").tokenizer == ""

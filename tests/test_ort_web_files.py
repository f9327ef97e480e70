"""The shipped ONNX Runtime Web files: intact, pinned, and only replaced from an integrity-checked tarball."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "app_ui" / "browser_component" / "ort"


def _fetch_tool():
    spec = importlib.util.spec_from_file_location("fetch_ort_web", ROOT / "tools" / "fetch_ort_web.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_three_runtime_files_are_shipped_intact_at_the_pinned_version():
    tool = _fetch_tool()
    manifest = json.loads((RUNTIME / "VERSION.json").read_text())
    assert manifest["version"] == tool.VERSION and manifest["integrity"] == tool.INTEGRITY
    assert set(manifest["files"]) == set(tool.WASM_FILES)
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((RUNTIME / name).read_bytes()).hexdigest() == digest, name
    assert manifest["source"].startswith("https://registry.npmjs.org/onnxruntime-web/-/")


def test_the_page_loads_the_runtime_from_the_app_only():
    panel = (ROOT / "app_ui" / "browser_component" / "panel.js").read_text()
    page = (ROOT / "app_ui" / "browser_component" / "index.html").read_text()
    assert "./ort/ort.wasm.min.mjs" in panel and "wasmPaths = new URL(" in panel
    for text in (panel, page):
        assert "http://" not in text and "https://" not in text and "cdn" not in text.lower()


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/dist/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_tarball_that_is_not_the_pinned_one_writes_nothing(tmp_path, capsys):
    tool = _fetch_tool()
    fake = tmp_path / "fake.tgz"
    fake.write_bytes(_tarball({name: b"not the runtime" for name in tool.WASM_FILES}))
    target = tmp_path / "ort"
    assert tool.main(["--tarball", str(fake), "--target", str(target)]) == 1
    assert not target.exists()
    assert "Integrity mismatch" in capsys.readouterr().err


def test_a_tarball_with_the_pinned_integrity_is_unpacked(tmp_path, monkeypatch):
    tool = _fetch_tool()
    data = _tarball({name: name.encode() for name in tool.WASM_FILES})
    monkeypatch.setattr(tool, "INTEGRITY", tool.integrity_of(data))  # stands in for the registry's string
    tarball = tmp_path / "pinned.tgz"
    tarball.write_bytes(data)
    target = tmp_path / "ort"
    assert tool.main(["--tarball", str(tarball), "--target", str(target)]) == 0
    assert {p.name for p in target.iterdir()} == {*tool.WASM_FILES, "VERSION.json"}
    assert (target / "ort.wasm.min.mjs").read_bytes() == b"ort.wasm.min.mjs"


def test_the_panel_frame_follows_a_dark_browser():
    """The frame's own text was dark grey on the dark app ("Backend", the status line): it needs its own dark colours."""
    page = (ROOT / "app_ui" / "browser_component" / "index.html").read_text()
    dark = page.split("@media (prefers-color-scheme: dark)", 1)
    assert len(dark) == 2 and "body { color: #fafafa; }" in dark[1] and "#status" in dark[1]

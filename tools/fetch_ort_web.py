"""Re-download the pinned ONNX Runtime Web runtime from the npm registry into the app's browser component.

The app ships these files in the repository (``app_ui/browser_component/ort/``) so that
``pip install -r requirements.txt -e . && streamlit run app.py`` needs no npm step and the page works
offline. Run this only to update them (change VERSION and INTEGRITY to the new release's
``npm view onnxruntime-web@X dist.integrity``):

    python tools/fetch_ort_web.py             # the three WASM files
    python tools/fetch_ort_web.py --webgpu    # also the WebGPU build (27 MB more, not committed)
    python tools/fetch_ort_web.py --tarball onnxruntime-web-1.30.0.tgz   # from a tarball you already have

The tarball's sha512 must equal the registry's integrity string, or nothing is written.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

PACKAGE = "onnxruntime-web"
VERSION = "1.30.0"
INTEGRITY = "sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ=="
TARBALL_URL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
#: The WASM-only build: the module, its Emscripten loader and the SIMD (+threads) binary.
WASM_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
#: The WebGPU build (its binary is the asyncify one): optional, fetched with --webgpu.
WEBGPU_FILES = ("ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")
TARGET = Path(__file__).resolve().parents[1] / "app_ui" / "browser_component" / "ort"


def integrity_of(data: bytes) -> str:
    """npm's Subresource Integrity string (sha512, base64) of a tarball."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def extract(data: bytes, names: tuple[str, ...]) -> dict[str, bytes]:
    """The named files from the tarball's dist/ folder."""
    found: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for name in names:
            member = tar.getmember(f"package/dist/{name}")
            handle = tar.extractfile(member)
            if handle is None:
                raise SystemExit(f"{name} is not a regular file in the tarball")
            found[name] = handle.read()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help="use this downloaded tarball instead of the registry")
    parser.add_argument("--webgpu", action="store_true", help="also write the WebGPU build (not committed)")
    parser.add_argument("--target", type=Path, default=TARGET, help=f"folder to write into (default {TARGET})")
    args = parser.parse_args(argv)
    if args.tarball:
        data = args.tarball.read_bytes()
    else:
        print(f"Downloading {TARBALL_URL}")
        with urllib.request.urlopen(TARBALL_URL, timeout=120) as response:
            data = response.read()
    got = integrity_of(data)
    if got != INTEGRITY:
        print(f"Integrity mismatch: expected {INTEGRITY}, got {got}; nothing written", file=sys.stderr)
        return 1
    names = WASM_FILES + (WEBGPU_FILES if args.webgpu else ())
    files = extract(data, names)
    args.target.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (args.target / name).write_bytes(content)
        print(f"wrote {args.target / name} ({len(content):,} bytes)")
    manifest = {
        "package": PACKAGE, "version": VERSION, "integrity": INTEGRITY, "source": TARBALL_URL,
        "files": {name: hashlib.sha256(files[name]).hexdigest() for name in WASM_FILES},
    }  # fmt: skip
    (args.target / "VERSION.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

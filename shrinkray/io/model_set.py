"""Model sets: several ONNX files that work as one model (an encoder and a decoder), found and opened.

optimum and transformers.js lay an encoder–decoder (translation, summarization, speech-to-text) out as files
with fixed names in one folder, usually ``onnx/``: ``encoder_model.onnx`` runs once on the input and
``decoder_model.onnx`` (or ``decoder_model_merged.onnx``, with ``decoder_with_past_model.onnx`` for the
cached steps) writes the output token by token from the encoder's states. Judged file by file, a decoder is
fed made-up encoder states; judged as a set, the encoder's own states feed it and what the set *writes* is
compared (measure/seq2seq.py). Files that are already another precision of a member (``encoder_model_fp16.onnx``,
``decoder_model_quantized.onnx``: transformers.js's dtype suffixes) are left out of the set.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from shrinkray.errors import ModelLoadError
from shrinkray.io.archive import is_zip, unpack_zip
from shrinkray.io.files import PROMPTS_FILE, TOKENIZER_FILE, LoadedModel, load, models_in_folder
from shrinkray.io.inline_data import hold_in_place
from shrinkray.io.limits import Limits

#: transformers.js's file stems of an encoder–decoder, and the part each plays.
ROLES = {
    "encoder_model": "encoder",
    "decoder_model": "decoder",
    "decoder_with_past_model": "decoder_with_past",
    "decoder_model_merged": "decoder_merged",
}
#: The dtype suffixes transformers.js appends to a file's stem (``decoder_model_q4.onnx``): other precisions.
DTYPE_SUFFIXES = ("fp16", "quantized", "int8", "uint8", "q8", "q4", "q4f16", "bnb4")
_VARIANT = re.compile("_(" + "|".join(DTYPE_SUFFIXES) + ")$")
#: Settings files of the model's own that a set carries (generation's start and end tokens are in them).
CONFIG_FILES = ("config.json", "generation_config.json")
#: The files beside a set's models that transformers.js reads: they travel with its copies and its variants.
COMPANIONS = (*CONFIG_FILES, TOKENIZER_FILE, "tokenizer_config.json", PROMPTS_FILE)
#: At most this many bytes of a settings file are read (a real config.json is a few KB).
MAX_CONFIG_BYTES = 1 << 20


@dataclass
class ModelSet:
    """An encoder–decoder's files, by role (``ROLES``), with what travels with them."""

    name: str
    folder: Path  # where the members' paths start
    members: dict[str, str]  # role -> path inside ``folder`` (posix), in ROLES order
    config: dict = field(default_factory=dict)  # config.json, then generation_config.json over it
    tokenizer: str = ""  # a tokenizer.json beside the files or one folder up
    prompts: str = ""  # a prompts.txt beside the tokenizer
    sha256: str = ""  # the archive's, when the set came as one

    def path(self, role: str) -> Path:
        return self.folder.joinpath(*self.members[role].split("/"))

    @property
    def file_bytes(self) -> int:
        return sum(files_bytes(self.path(role)) for role in self.members)

    def load(self, role: str, limits: Limits | None = None) -> LoadedModel:
        """One member, loaded (its external data read from beside it)."""
        loaded = load(self.path(role), limits=limits)
        loaded.name = Path(self.members[role]).stem
        return loaded

    def files(self) -> list[Path]:
        """Every file of the set inside ``folder``: its models with their data files, and its companions."""
        found = []
        for role in self.members:
            path = self.path(role)
            found += [path, *data_files(path)]
        return found + self.companions()

    def companions(self) -> list[Path]:
        """The :data:`COMPANIONS` beside the models or one folder up, inside ``folder``."""
        first = self.path(next(iter(self.members))).parent
        places = [p for p in (first, first.parent) if p == self.folder or self.folder in p.parents]
        return [place / name for place in places for name in COMPANIONS if (place / name).is_file()]

    def words(self) -> str:
        """The set as a sentence names it: "encoder_model.onnx and decoder_model.onnx"."""
        names = [Path(self.members[r]).name for r in self.members]
        return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def as_loaded(model_set: ModelSet, limits: Limits | None = None) -> LoadedModel:
    """The set as the current model of a front end that holds one (the app): its encoder's graph, the set's
    name, bytes and identity, and the set itself in ``model_set`` (which every step reads instead)."""
    encoder = hold_in_place(model_set.load("encoder", limits))  # its graph: the server keeps no weights of a set
    digest = model_set.sha256 or _digest(model_set)
    return LoadedModel(model=encoder.model, name=model_set.name, path=model_set.folder,
                       file_bytes=model_set.file_bytes, sha256=digest, tokenizer=model_set.tokenizer,
                       prompts=model_set.prompts, model_set=model_set)  # fmt: skip


def _digest(model_set: ModelSet) -> str:
    """The set's identity from its files (their places and bytes): the same set opened twice is one model."""
    digest = hashlib.sha256()
    for path in model_set.files():
        digest.update(path.relative_to(model_set.folder).as_posix().encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def pack_folder(folder: Path) -> bytes:
    """A variant set's folder as one .zip (stored: models barely compress), its files at their places inside:
    unzipped, it is a model folder transformers.js loads as it is."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            zf.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def data_files(path: Path) -> list[Path]:
    """A model file's external data beside it, under either naming (``NAME.onnx.data``, optimum's
    ``NAME.onnx_data``)."""
    return [p for p in (path.with_name(path.name + ".data"), path.with_name(path.name + "_data")) if p.is_file()]


def files_bytes(path: Path) -> int:
    """A model file's bytes with its external data files (:func:`data_files`)."""
    return sum(p.stat().st_size for p in (path, *data_files(path)))


def set_members(paths: list[str]) -> dict[str, str] | None:
    """The roles among these model paths (posix, inside one archive or folder) when they form an
    encoder–decoder set: an encoder and a decoder (plain or merged) in the same folder; else None."""
    by_folder: dict[str, dict[str, str]] = {}
    for path in sorted(paths):
        folder, _, name = path.rpartition("/")
        stem = name[:-5] if name.lower().endswith(".onnx") else name
        if _VARIANT.search(stem):
            continue
        role = ROLES.get(stem)
        if role is not None:
            by_folder.setdefault(folder, {})[role] = path
    for found in by_folder.values():
        if "encoder" in found and ("decoder" in found or "decoder_merged" in found):
            if "decoder_merged" in found:  # transformers.js downloads the merged decoder alone: the others are spare
                found = {role: path for role, path in found.items() if role in ("encoder", "decoder_merged")}
            return {role: found[role] for role in ROLES.values() if role in found}
    return None


def is_model_set(source: str | os.PathLike) -> bool:
    """Whether a folder or a .zip (by its members' names) is an encoder–decoder set."""
    path = Path(source)
    if path.is_dir():
        return set_members([p.relative_to(path).as_posix() for p in models_in_folder(path)]) is not None
    if not path.is_file() or not is_zip(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return set_members([n for n in zf.namelist() if n.lower().endswith(".onnx")]) is not None
    except (zipfile.BadZipFile, OSError, ValueError):
        return False  # the loader says what is wrong with it


def open_set(source: str | os.PathLike | bytes, *, workdir: str | os.PathLike, name: str = "",
             limits: Limits | None = None) -> ModelSet:  # fmt: skip
    """A folder or a .zip (path or bytes) of an encoder–decoder, as a :class:`ModelSet`. An archive is
    unpacked below ``workdir`` (the caller's folder, removed by the caller); a folder is read where it is."""
    is_bytes = isinstance(source, (bytes, bytearray, memoryview))
    if not is_bytes and Path(source).is_dir():
        folder = Path(source)
        found = [p.relative_to(folder).as_posix() for p in models_in_folder(folder)]
        members = set_members(found)
        if members is None:
            raise ModelLoadError(f"{folder.name} is not an encoder–decoder set",
                                 "A set holds encoder_model.onnx and decoder_model.onnx (or decoder_model_merged.onnx)")  # fmt: skip
        return _made_set(name or folder.name, folder, members)
    if not is_bytes and not (Path(source).is_file() and is_zip(source)):
        raise ModelLoadError(f"{Path(source).name} is neither a folder nor a .zip of models",
                             "Give the folder or the .zip that holds encoder_model.onnx and decoder_model.onnx")  # fmt: skip
    unpacked = unpack_zip(source, workdir, limits, whole=True)
    members = set_members(list(unpacked.models))
    if members is None:
        shutil.rmtree(unpacked.root, ignore_errors=True)
        listing = ", ".join(unpacked.models[:8]) or "no .onnx file"
        raise ModelLoadError(f"The archive is not an encoder–decoder set (it holds {listing})",
                             "A set holds encoder_model.onnx and decoder_model.onnx (or decoder_model_merged.onnx)")  # fmt: skip
    stem = name or (Path(source).name if not is_bytes else "model set")
    made = _made_set(stem.removesuffix(".zip"), unpacked.root, members)
    made.sha256 = unpacked.sha256
    return made


def _made_set(name: str, folder: Path, members: dict[str, str]) -> ModelSet:
    first = folder.joinpath(*next(iter(members.values())).split("/")).parent
    found = ModelSet(name=name, folder=folder, members=members)
    for place in (first, first.parent):  # beside the files, or one folder up as transformers.js keeps them
        if not found.tokenizer and (place / TOKENIZER_FILE).is_file():
            found.tokenizer = str(place / TOKENIZER_FILE)
            if (place / PROMPTS_FILE).is_file():
                found.prompts = str(place / PROMPTS_FILE)
        for config in CONFIG_FILES:
            found.config.update(_read_config(place / config))
    return found


def _read_config(path: Path) -> dict:
    """A settings file's top-level entries, or nothing when it is missing, too large or not a JSON object."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

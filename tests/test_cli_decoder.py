"""A decoder LM through the command line and its worker: judged by what it generates, without flags."""

from __future__ import annotations

import json
import shutil

import onnx
import pytest
from lm_models import decoder_lm

from shrinkray import cli
from shrinkray.measure import lm_text

pytestmark = pytest.mark.slow


def _tokenizer(path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([lm_text.TEXT.read_text()], trainers.BpeTrainer(
        vocab_size=500, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    tok.save(str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A transformers.js folder: onnx/model.onnx with its tokenizer.json one level up."""
    root = tmp_path_factory.mktemp("lm")
    (root / "onnx").mkdir()
    onnx.save(decoder_lm("cached"), str(root / "onnx" / "model.onnx"))
    _tokenizer(root / "tokenizer.json")
    return root


def _compare(model, tmp_path, *extra: str) -> dict:
    out = tmp_path / "r.json"
    code = cli.main(["compare", str(model), "--methods", "weights-int4,float16", "--threads", "1",
                     "--json", str(out), *extra])  # fmt: skip
    assert code == 0
    return json.loads(out.read_text())


def _verdict(report: dict, key: str) -> dict:
    return next(v for v in report["variants"] if v["key"] == key)


def test_compare_judges_a_cached_decoder_by_its_continuations_on_real_text(folder, tmp_path) -> None:
    report = _compare(folder / "onnx" / "model.onnx", tmp_path)
    note = report["input_note"]
    assert "windows of an English text through tokenizer.json" in note and "16 greedy tokens" in note
    outputs = {o["name"]: o for o in _verdict(report, "float16")["parity"]["outputs"]}
    # present.* are the cache, judged through generation; with a tokenizer the text's perplexity is told
    assert set(outputs) == {"logits", "generated tokens", "prompt loss"}
    assert outputs["prompt loss"]["kind"] == "perplexity" and "perplexity on the prompts' text" in \
        _verdict(report, "float16")["verdict"]["sentence"]  # fmt: skip
    generated = outputs["generated tokens"]
    assert generated["kind"] == "generation" and generated["measures"]["continuations"] >= 160
    assert outputs["logits"]["measures"]["kl_divergence"] >= 0
    # timed as its users wait: writing 16 tokens from a prompt through its cache
    assert "a decoder LM's run writes 16 tokens from one prompt (its pass, then 15 steps through its cache)" in \
        report["latency_note"]  # fmt: skip
    # the random-weight decoder's 4-bit build changes what it writes: failed; its float16 build keeps it
    assert _verdict(report, "weights-int4")["parity"]["passed"] is False
    assert report["recommended"] in (None, "float16")
    # what changes: the continuations read through the tokenizer, after their prompts' last words; the prompt
    # loss is told by the verdict, not shown as examples
    shown = {oe["output"]: oe for oe in _verdict(report, "weights-int4")["what_changes"]}
    assert set(shown) == {"logits", "generated tokens"}
    worst = shown["generated tokens"]["examples"][0]
    assert worst["changed"] and worst["where"].startswith("prompt ") and '("…' in worst["where"]
    assert worst["original_text"] != worst["variant_text"] and worst["original_marks"]
    assert all(t["label"] for t in shown["logits"]["examples"][0]["original_top"])  # tokens name the classes


def test_without_a_tokenizer_4_bit_is_not_calibrated_on_made_up_tokens(folder, tmp_path) -> None:
    bare = tmp_path / "model.onnx"
    shutil.copy(folder / "onnx" / "model.onnx", bare)
    report = _compare(bare, tmp_path)
    assert "token ids drawn like text (no tokenizer.json came with the model" in report["input_note"]
    notes = " ".join(_verdict(report, "weights-int4")["notes"])
    assert "Not calibrated: this decoder LM came without its tokenizer.json" in notes


def test_a_missing_tokenizer_file_is_told_in_the_clis_words(folder, tmp_path, capsys) -> None:
    code = cli.main(["compare", str(folder / "onnx" / "model.onnx"), "--tokenizer", str(tmp_path / "nope.json")])
    assert code != 0
    err = capsys.readouterr().err
    assert "--tokenizer" in err and "no such file" in err and "Traceback" not in err


def test_shrink_with_4_bit_works_from_the_command_line(folder, tmp_path) -> None:
    out = tmp_path / "lm_q4.onnx"
    assert cli.main(["shrink", str(folder / "onnx" / "model.onnx"), "-m", "weights-int4", "-o", str(out)]) == 0
    assert out.stat().st_size < (folder / "onnx" / "model.onnx").stat().st_size / 2


def test_variants_take_the_names_transformers_js_loads(folder, tmp_path) -> None:
    """Saved into the model's own onnx/ folder, each default variant takes its dtype's file name beside
    model.onnx (never over it); a variant with no transformers.js dtype keeps Shrink Ray's name."""
    import onnxruntime as ort

    onnx_dir = tmp_path / "lm" / "onnx"
    onnx_dir.mkdir(parents=True)
    shutil.copy(folder / "onnx" / "model.onnx", onnx_dir / "model.onnx")
    before = (onnx_dir / "model.onnx").read_bytes()
    code = cli.main(["compare", str(onnx_dir / "model.onnx"), "--methods", "weights-int8,weights-int4,float16,palettize",
                     "--no-latency", "--save-dir", str(onnx_dir), "--naming", "transformers.js"])  # fmt: skip
    assert code == 0
    names = sorted(p.name for p in onnx_dir.iterdir())
    assert names == ["model.onnx", "model.palettize.onnx", "model_fp16.onnx", "model_q4.onnx", "model_quantized.onnx"]
    assert (onnx_dir / "model.onnx").read_bytes() == before
    for name in names:
        ort.InferenceSession(str(onnx_dir / name), providers=["CPUExecutionProvider"])


def test_naming_says_what_it_takes(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["compare", "model.onnx", "--naming", "hf"])
    assert "transformers.js" in capsys.readouterr().err


def test_the_folder_itself_stands_for_its_model(folder, capsys) -> None:
    assert cli.main(["inspect", str(folder)]) == 0
    assert "past_key_values.0.key" in capsys.readouterr().out

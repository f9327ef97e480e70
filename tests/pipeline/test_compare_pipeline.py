"""compare as a pipeline: partial snapshots in order, variants written as they are checked, pairwise latency."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import read_sample, sample_path

import shrinkray
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison
from shrinkray.measure.sizes import measure_sizes
from shrinkray.pipeline.compare import compare, variant_file_name
from shrinkray.runs.jobs import compare_job

METHODS = [("weights-int8", {}), ("palettize", {"levels": 16}), ("float16", {})]
FAST = {"runs": 3, "warmup": 1, "threads": [1], "brotli_quality": 5}


def _compare(tmp_path=None, **settings) -> tuple[Comparison, list[Comparison]]:
    snapshots: list[Comparison] = []
    base = {"methods": METHODS, **FAST, **settings}
    if tmp_path is not None:
        base["variants_dir"] = str(tmp_path)
    result = compare(shrinkray.load(sample_path("mlp")), CompareSettings(**base), on_partial=snapshots.append)
    return result, snapshots


def test_snapshots_show_each_variant_as_soon_as_it_is_built_then_what_lands():
    result, snapshots = _compare(latency=False)
    keys = [v.key for v in result.variants]
    for key in keys:
        states = [(bool(s.get(key).record), s.get(key).sizes is not None, s.get(key).parity is not None)
                  for s in snapshots if key in {v.key for v in s.variants}]  # fmt: skip
        # a snapshot shows the built variant (what was rewritten) before its sizes and parity are known
        assert (True, False, False) in states
        assert states[-1] == (True, True, True)
        for earlier, later in itertools.pairwise(states):  # nothing shown is ever taken back
            assert all(b for a, b in zip(earlier, later, strict=True) if a)
    # the first snapshot comes after the original is measured, before any variant
    assert snapshots[0].variants == [] and snapshots[0].original.parity is not None
    # variants appear in order and a snapshot never loses one
    seen = [[v.key for v in s.variants] for s in snapshots]
    assert all(keys[: len(k)] == k for k in seen)
    assert seen == sorted(seen, key=len)


def test_snapshots_pickle_small_and_without_models():
    result, snapshots = _compare()
    assert result.get("float16").model is not None  # the caller's result keeps the models (no variants_dir)
    for snapshot in snapshots:
        assert all(r.model is None for r in snapshot.all)
        data = pickle.dumps(snapshot)
        # 2,000 sample points per output and model for the charts (the 160+ decisions fill them): no models
        assert b"ModelProto" not in data and len(data) < 320_000
    last = pickle.loads(pickle.dumps(snapshots[-1]))
    assert all(r.latency for r in last.all)  # the last one comes after latency
    assert [r.key for r in last.all] == [r.key for r in result.all]
    assert last.get("float16").sizes == result.get("float16").sizes
    assert last.get("float16").parity.passed == result.get("float16").parity.passed


def test_snapshots_are_not_changed_by_later_steps():
    _, snapshots = _compare(latency=False)
    first_full = next(s for s in snapshots if s.variants and s.variants[0].parity is not None)
    before = pickle.dumps(first_full)
    assert pickle.dumps(first_full) == before
    assert first_full.variants[0].latency == []


def test_variants_dir_gets_every_checked_variant_and_no_model_is_kept(tmp_path):
    result, snapshots = _compare(tmp_path, latency=False)
    assert all(r.model is None for r in result.all)
    for variant in result.variants:
        path = Path(variant.file)
        assert path.parent == tmp_path
        assert path.name == variant_file_name("mlp", variant.key)
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        # sizes are those of the file written
        assert variant.sizes == measure_sizes(path.read_bytes(), brotli_quality=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(v.file).name for v in result.variants)
    # a variant's file exists by the time its sizes are published
    for snapshot in snapshots:
        for variant in snapshot.variants:
            if variant.sizes is not None:
                assert Path(variant.file).exists()


def test_original_sizes_are_its_serialized_bytes():
    result, _ = _compare(latency=False)
    assert result.original.sizes == measure_sizes(shrinkray.load(sample_path("mlp")).model.SerializeToString(),
                                                  brotli_quality=5)  # fmt: skip


def test_latency_opens_two_sessions_at_a_time(monkeypatch):
    alive = {"now": 0, "most": 0, "opened": 0}
    real = ort.InferenceSession

    class Counted(real):
        def __init__(self, source, *args, **kwargs):
            super().__init__(source, *args, **kwargs)
            alive["opened"] += not isinstance(source, bytes)  # bytes: a fold chain of a measuring copy
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])

        def __del__(self):
            alive["now"] -= 1

    monkeypatch.setattr(ort, "InferenceSession", Counted)
    result, _ = _compare(threads=[1, 2])
    assert all(len(r.latency) == 2 for r in result.all)
    # parity inputs (1) + one validation session per variant + per thread setting: original + each variant
    assert alive["opened"] == 1 + len(METHODS) + 2 * (1 + len(METHODS))
    assert alive["most"] <= 2
    for variant in result.variants:
        for stats in variant.latency:
            assert stats.ratio is not None and stats.ratio > 0 and stats.runs == 3
    assert result.original.latency[0].runs == 3 * len(METHODS)  # its runs pooled from every pair


def test_compare_job_moves_variants_into_save_dir_and_returns_no_models(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "out"
    settings = CompareSettings(methods=METHODS, latency=False, brotli_quality=5)
    comparison = compare_job(sample_path("mlp"), settings, out, False, str(scratch))
    assert comparison.settings.variants_dir is None  # the reports show the caller's settings
    assert all(r.model is None for r in comparison.all)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(variant_file_name("mlp", k) for k, _ in [("weights-int8", 0), ("palettize levels=16", 0),
                                                                     ("float16", 0)])  # fmt: skip
    for variant in comparison.variants:
        assert Path(variant.file).parent == out
        onnx.checker.check_model(onnx.load(variant.file))


def test_compare_job_without_save_dir_reports_no_files(tmp_path):
    comparison = compare_job(sample_path("mlp"), CompareSettings(methods=METHODS[:1], latency=False), None, False,
                             str(tmp_path))  # fmt: skip
    assert comparison.variants[0].file is None
    assert comparison.variants[0].sizes is not None and comparison.variants[0].parity is not None


def test_save_dir_clash_leaves_nothing_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / variant_file_name("mlp", "float16")).write_bytes(b"mine")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(shrinkray.ShrinkRayError):
        compare_job(sample_path("mlp"), CompareSettings(methods=METHODS, latency=False), out, False, str(scratch))
    assert sorted(p.name for p in out.iterdir()) == [variant_file_name("mlp", "float16")]
    assert (out / variant_file_name("mlp", "float16")).read_bytes() == b"mine"


def test_a_failing_method_is_published_with_its_error():
    snapshots: list[Comparison] = []
    settings = CompareSettings(methods=[("weights-int8", {"include": ["no-such-tensor*"]}), ("float16", {})],
                               latency=False, brotli_quality=5)  # fmt: skip
    result = compare(shrinkray.load(sample_path("mlp")), settings, on_partial=snapshots.append)
    assert result.original.key == ORIGINAL
    assert [v.key for v in snapshots[-1].variants] == [v.key for v in result.variants]


def test_a_child_process_method_keeps_its_place():
    snapshots: list[Comparison] = []
    settings = CompareSettings(methods=[("float16", {}), ("dynamic-int8", {})], latency=False, brotli_quality=5)
    result = compare(shrinkray.load(sample_path("mlp")), settings, on_partial=snapshots.append)
    assert [v.key for v in result.variants] == ["float16", "dynamic-int8"]
    assert all(v.sizes is not None and v.parity is not None for v in result.variants)


def test_an_owned_model_is_dropped_once_its_file_exists_and_each_variant_rewrites_a_fresh_load(tmp_path, monkeypatch):
    """A worker's pipeline does not hold the original's weights while variants are built and opened: shrink
    gets a fresh load of the original's file to rewrite in place (no copy beside a held original)."""
    from shrinkray.pipeline import compare as compare_module
    from shrinkray.pipeline.compare import ComparePipeline

    calls = []
    real = compare_module.shrink

    def recording(source, method, **kwargs):
        calls.append((type(source).__name__, kwargs.get("in_place"), kwargs.get("open_runtime")))
        return real(source, method, **kwargs)

    monkeypatch.setattr(compare_module, "shrink", recording)
    settings = CompareSettings(methods=METHODS[:2], latency=False, brotli_quality=5, variants_dir=str(tmp_path))
    with ComparePipeline(shrinkray.load(sample_path("mlp")), settings, owns_model=True) as pipeline:
        pipeline.measure_original()
        assert pipeline.loaded.model is None
        big = [t for t in pipeline.source.graph.initializer if np.prod(t.dims) * 4 > 1 << 16]
        assert big and not any(t.raw_data or t.float_data for t in big)  # names and shapes, no values
        for method, options in METHODS[:2]:
            pipeline.add_variant(method, options)
        result = pipeline.result()
    assert calls == [("ModelProto", True, False)] * 2  # a fresh load, rewritten in place, session opened from its file
    assert all(v.ok and v.parity is not None and Path(v.file).exists() for v in result.variants)


def test_the_reloaded_original_has_every_value_of_the_loaded_one(tmp_path):
    """Shrink steps rewrite a reload of the original kept as header + data file (read tensor by tensor):
    it must be the original, value for value, with nothing left pointing at the data file."""
    from onnx import numpy_helper

    from shrinkray.pipeline.compare import ComparePipeline

    original = read_sample("transformer")
    settings = CompareSettings(methods=METHODS[:1], latency=False, brotli_quality=5, variants_dir=str(tmp_path))
    with ComparePipeline(shrinkray.load(sample_path("transformer")), settings, owns_model=True) as pipeline:
        pipeline.measure_original()
        reloaded = pipeline.full_source()
    assert [t.name for t in reloaded.graph.initializer] == [t.name for t in original.graph.initializer]
    for before, after in zip(original.graph.initializer, reloaded.graph.initializer, strict=True):
        assert not after.external_data and after.data_location == onnx.TensorProto.DEFAULT
        np.testing.assert_array_equal(numpy_helper.to_array(after), numpy_helper.to_array(before))
    assert reloaded.graph.node == original.graph.node


def test_a_variant_onnx_runtime_cannot_open_is_an_error_and_leaves_no_file(tmp_path, monkeypatch):
    from shrinkray.errors import RuntimeUnsupportedError
    from shrinkray.pipeline import compare as compare_module

    real = compare_module._open_file_session

    def refusing(files, threads, *more):
        if "float16" in files[0].name:
            raise RuntimeUnsupportedError("ONNX Runtime cannot open this model: no kernel", "Try another method")
        return real(files, threads, *more)

    monkeypatch.setattr(compare_module, "_open_file_session", refusing)
    result = compare(shrinkray.load(sample_path("mlp")),
                     CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False,
                                     brotli_quality=5, variants_dir=str(tmp_path)))  # fmt: skip
    int8, f16 = result.variants
    assert int8.ok and Path(int8.file).exists()
    assert not f16.ok and "failed validation" in f16.error and "no kernel" in f16.error
    assert f16.sizes is None and f16.file is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(int8.file).name]


def test_a_variant_onnx_checker_refuses_is_an_error_and_leaves_no_file(tmp_path, monkeypatch):
    """compare checks the file it wrote (shrink no longer runs onnx.checker for it): an invalid result is
    still refused, in the same words, and nothing of it is kept."""
    from shrinkray.pipeline import compare as compare_module

    real = compare_module.shrink

    def breaking(source, method, **kwargs):
        variant = real(source, method, **kwargs)
        if method == "float16":
            variant.model.graph.node[0].input.append("no_such_value")  # a node reading a value nothing makes
        return variant

    monkeypatch.setattr(compare_module, "shrink", breaking)
    result = compare(shrinkray.load(sample_path("mlp")),
                     CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False,
                                     brotli_quality=5, variants_dir=str(tmp_path)))  # fmt: skip
    int8, f16 = result.variants
    assert int8.ok and Path(int8.file).exists()
    assert not f16.ok and "failed validation" in f16.error and "not valid ONNX" in f16.error
    assert f16.sizes is None and f16.file is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(int8.file).name]


def test_no_private_folder_is_left_behind(tmp_path, monkeypatch):
    import tempfile

    from shrinkray.pipeline.compare import SCRATCH_PREFIX

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{SCRATCH_PREFIX}999999999-leftover"  # a killed worker's folder (no such process)
    dead.mkdir()
    with pytest.raises(shrinkray.ShrinkRayError):  # refused while planning, after the checks
        compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=METHODS[:1], brotli_quality=12))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(SCRATCH_PREFIX)] == [dead.name]  # none new
    compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=METHODS[:1], latency=False, brotli_quality=5))
    assert not any(p.name.startswith(SCRATCH_PREFIX) for p in tmp_path.iterdir())  # its own, and the dead one's


def test_a_model_name_with_folders_writes_its_variants_inside_variants_dir(tmp_path):
    """compare() is public: a name such as '../../x' (not ending in .onnx) must not steer the variant files out."""
    loaded = shrinkray.load(sample_path("mlp"))
    loaded.name = "../../escaped"
    variants = tmp_path / "a" / "b" / "variants"
    result = compare(loaded, CompareSettings(methods=[("float16", {})], latency=False, brotli_quality=1,
                                             variants_dir=str(variants)))  # fmt: skip
    assert Path(result.variants[0].file).parent == variants
    assert sorted(p.name for p in variants.iterdir()) == [variant_file_name("escaped", "float16")]
    assert not list(tmp_path.glob("*.onnx"))


def test_compare_leaves_the_callers_malloc_settings_alone_and_the_worker_shares_one_heap(monkeypatch):
    """M_ARENA_MAX is process-wide: only the capped worker sets it (before the job's threads start), never a
    compare running in the caller's own process (shrinkray.memory.limit_malloc_arenas)."""
    import io

    from shrinkray import memory
    from shrinkray.runs import sandbox

    calls = []
    monkeypatch.setattr(memory, "limit_malloc_arenas", lambda count=1: calls.append(count))
    monkeypatch.setattr(sandbox, "limit_malloc_arenas", lambda count=1: calls.append(count))
    compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=METHODS[:1], latency=False, brotli_quality=5))
    assert calls == []

    request, reply = io.BytesIO(), io.BytesIO()
    sandbox._send(request, ("call", (len, ([1, 2, 3],), {}, 1 << 40, False, False)))
    request.seek(0)
    monkeypatch.setattr(sandbox, "_limit_memory", lambda memory_bytes: None)  # not this test process's cap
    monkeypatch.setattr(sandbox.signal, "signal", lambda *args: None)  # nor its Ctrl-C
    monkeypatch.setattr(sandbox.sys, "stdin", type("In", (), {"buffer": request})())
    monkeypatch.setattr(sandbox.sys, "stdout", type("Out", (), {"buffer": reply})())
    sandbox._worker_main()
    reply.seek(0)
    assert calls == [1] and sandbox._receive(reply) == ("result", 3)


def test_weights_int4_calibrates_before_the_original_is_reloaded_and_builds_the_same_file(tmp_path, monkeypatch):
    """compare runs weights-int4's calibration on the original's header + data copy (``MethodSpec.prepare``), so
    its session never opens beside a loaded copy; the variant is byte for byte the one calibrated in memory."""
    import shrinkray.methods.activations as activations
    import shrinkray.methods.weights_int4 as weights_int4
    from shrinkray.pipeline.compare import ComparePipeline

    calls = []
    real = activations.calibrate

    def recording(model, refs, context=None, **kwargs):
        calls.append(kwargs.get("base_dir"))
        return real(model, refs, context, **kwargs)

    monkeypatch.setattr(weights_int4, "calibrate", recording)  # where the method looks it up
    files = {}
    for owns in (True, False):  # an owned model is reloaded per method; a caller's model is held and copied
        folder = tmp_path / f"owns-{owns}"
        settings = CompareSettings(methods=[("weights-int4", {})], latency=False, brotli_quality=5,
                                   variants_dir=str(folder))  # fmt: skip
        with ComparePipeline(shrinkray.load(sample_path("transformer")), settings, owns_model=owns) as pipeline:
            [variant] = pipeline.run().variants
        files[owns] = Path(variant.file).read_bytes()
    assert calls[0] is not None and calls[1] is None  # prepared on the data copy, then calibrated in memory
    assert len(calls) == 2 and files[True] == files[False]


def test_transformers_js_names_follow_each_methods_dtype():
    from shrinkray.errors import OptionError
    from shrinkray.methods import all_methods

    names = {spec.name: variant_file_name("decoder_model_merged", spec.name, "transformers.js") for spec in all_methods()}
    assert names["weights-int8"] == "decoder_model_merged_quantized.onnx"
    assert names["dynamic-int8"] == "decoder_model_merged_int8.onnx"
    assert names["weights-int4"] == "decoder_model_merged_q4.onnx"
    assert names["float16"] == "decoder_model_merged_fp16.onnx"
    assert names["palettize"] == "decoder_model_merged.palettize.onnx"  # no transformers.js dtype
    assert len(set(names.values())) == len(names)
    # a variant with its own options is not the dtype transformers.js means: Shrink Ray's name
    assert variant_file_name("model", "weights-int4 block_size=64", "transformers.js") == "model.weights-int4_block_size-64.onnx"
    with pytest.raises(OptionError, match="Unknown file naming"):
        variant_file_name("model", "float16", "hf")


def test_an_upload_name_takes_transformers_js_main_stem_unless_it_is_one_of_its_own():
    from shrinkray.pipeline.compare import naming_stem

    assert naming_stem("tiny_lm", "transformers.js") == "model"
    assert naming_stem("decoder_model_merged", "transformers.js") == "decoder_model_merged"
    assert naming_stem("tiny_lm", "shrinkray") == "tiny_lm"


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_a_one_file_original_is_measured_in_place_not_copied(name, tmp_path):
    """The worker's own one-file original (an app run, the CLI) is read through a header pointing into its file:
    the scratch folder holds none of its weights (a 100 MB upload's run wrote three copies), and its sizes are
    still those of the file itself."""
    from shrinkray.pipeline.compare import ComparePipeline

    path = sample_path(name)
    settings = CompareSettings(methods=METHODS[:1], latency=False, brotli_quality=5, variants_dir=str(tmp_path))
    with ComparePipeline(shrinkray.load(path), settings, owns_model=True) as pipeline:
        pipeline.measure_original()
        written = {f.stat().st_ino: f.stat().st_size for f in pipeline._scratch.rglob("*") if f.is_file()}
        written.pop(path.stat().st_ino, None)  # the link to the model's own file
        assert sum(written.values()) < path.stat().st_size / 4, written
        pipeline.add_variant(*METHODS[0])
        pipeline.wait_for_sizes()
        result = pipeline.result()
    assert result.original.sizes.raw == path.stat().st_size
    assert result.variants[0].ok and result.variants[0].parity is not None


def test_the_first_card_is_a_quick_method_built_before_the_original_runs(tmp_path):
    """A page gets a card within seconds: the first method that learns nothing and runs here (weights-int8, not
    dynamic-int8's child process) is built before the original runs on its inputs; the results keep the
    requested order, and that variant is judged as any other."""
    from shrinkray.pipeline.compare import ComparePipeline

    snapshots: list[Comparison] = []
    methods = [("dynamic-int8", {}), ("weights-int8", {}), ("float16", {})]
    settings = CompareSettings(methods=methods, latency=False, brotli_quality=5, variants_dir=str(tmp_path))
    with ComparePipeline(shrinkray.load(sample_path("mlp")), settings, on_partial=snapshots.append,
                         owns_model=True) as pipeline:  # fmt: skip
        result = pipeline.run()
    first = next(s for s in snapshots if s.variants)
    assert [v.key for v in first.variants] == ["weights-int8"] and first.variants[0].record
    assert first.original.parity is None and first.input_note == ""  # before the original ran on its inputs
    assert [v.key for v in result.variants] == ["dynamic-int8", "weights-int8", "float16"]
    assert all(v.parity is not None and v.sizes is not None for v in result.variants)
    plain = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=methods, latency=False, brotli_quality=5))
    assert [v.parity.status for v in result.variants] == [v.parity.status for v in plain.variants]
    assert [v.record["tensors_changed"] for v in result.variants] == [v.record["tensors_changed"] for v in plain.variants]


def test_a_run_store_keeps_a_large_variant_that_compresses_well_compressed_and_still_times_it(tmp_path):
    """Issue 27: a palettized variant keeps the original's raw size; a run store keeps it as ``.onnx.gz`` once its
    sizes (of the model itself) are known, and latency, downloads and the browser read the model back from it."""
    from shrinkray.io import kept_files

    settings = {"methods": [("palettize", {"levels": 16}), ("weights-int8", {})], **FAST, "latency_budget_s": 2}
    plain = compare(shrinkray.load(sample_path("mlp")), CompareSettings(**settings, variants_dir=str(tmp_path / "a")))
    kept = compare(shrinkray.load(sample_path("mlp")), CompareSettings(**settings, variants_dir=str(tmp_path / "b")),
                   spare_disk=True)  # fmt: skip
    palettized, small = kept.get("palettize levels=16"), kept.get("weights-int8")
    assert palettized.file.endswith(".onnx.gz") and kept_files.is_compressed(palettized.file)
    assert not small.file.endswith(".gz")  # a quarter of the original's size: kept as it is
    assert kept_files.model_bytes(palettized.file) == Path(plain.get("palettize levels=16").file).read_bytes()
    assert Path(palettized.file).stat().st_size < palettized.sizes.raw / 2
    assert palettized.sizes == plain.get("palettize levels=16").sizes  # the model's sizes, not the kept file's
    assert palettized.latency and palettized.parity.passed == plain.get("palettize levels=16").parity.passed
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(
        Path(r.file).name for r in kept.variants)  # the raw file is gone

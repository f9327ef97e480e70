"""The result dataclasses stay light (no ONNX Runtime for readers) and the lazy public API still works."""

from __future__ import annotations

import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

import shrinkray
from shrinkray.measure import results
from shrinkray.pipeline import compare as compare_module
from tests.helpers import sample_path

ROOT = Path(__file__).resolve().parents[2]


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_readers_of_results_do_not_import_onnx_runtime():
    done = _fresh_python(
        "import shrinkray.verdict.advice, shrinkray.report.formats, shrinkray.report.charts, shrinkray.pricing.costs, sys; "
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_results_module_imports_neither_onnx_nor_the_methods():
    done = _fresh_python(
        "import shrinkray.measure.results, sys; "
        "heavy = [m for m in ('onnx', 'onnxruntime', 'shrinkray.methods', 'shrinkray.pipeline.compare') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_public_api_in_a_fresh_process_whatever_is_imported_first():
    """``shrink``/``inspect``/``validate`` are API functions whose modules live in the layers: importing
    those modules first must not change what the package's names are."""
    path = str(sample_path("mlp"))
    done = _fresh_python(
        "import shrinkray.pipeline.shrink, shrinkray.pipeline.inspect, shrinkray.graph.validate\n"
        "import shrinkray, types\n"
        "for name in ('shrink', 'inspect', 'validate'):\n"
        "    assert not isinstance(getattr(shrinkray, name), types.ModuleType), name\n"
        f"loaded = shrinkray.load({path!r})\n"
        "assert shrinkray.inspect(loaded).node_count > 0\n"
        "variant = shrinkray.shrink(loaded, 'float16')\n"
        "assert shrinkray.validate(variant.model) is None\n"
        "from shrinkray.pipeline.shrink import shrink\n"
        "assert shrink is shrinkray.shrink\n"
    )
    assert done.returncode == 0, done.stderr


def test_public_api_names():
    for name in shrinkray.__all__:
        assert getattr(shrinkray, name) is not None
    for name in ("shrink", "inspect", "validate"):
        assert callable(getattr(shrinkray, name))
        assert not isinstance(getattr(shrinkray, name), types.ModuleType)
    assert issubclass(shrinkray.ShrinkRayError, Exception)
    assert shrinkray.inspect.__name__ == "inspect_model"
    with pytest.raises(AttributeError):
        _ = shrinkray.no_such_name
    assert callable(shrinkray.load_any)  # the one loader of a path, bytes or a zip, loaded on first use


def test_public_api_shrinks(tmp_path):
    loaded = shrinkray.load(sample_path("mlp"))
    summary = shrinkray.inspect(loaded)
    assert isinstance(summary, shrinkray.ModelSummary)
    variant = shrinkray.shrink(loaded, "weights-int8")
    assert isinstance(variant, shrinkray.Variant)
    written = shrinkray.save(variant.model, tmp_path / "small.onnx", protect=[loaded.path])
    assert written.stat().st_size < sample_path("mlp").stat().st_size / 2


def test_compare_re_exports_the_same_classes():
    for name in ("ORIGINAL", "CompareSettings", "Comparison", "VariantResult", "Culprit"):
        assert getattr(compare_module, name) is getattr(results, name)


def test_a_result_without_models_pickles():
    original = results.VariantResult(key=results.ORIGINAL, method=None, options={})
    variant = results.VariantResult(key="float16", method="float16", options={"mode": "storage"}, error="x")
    comparison = results.Comparison(
        name="m", summary=None, settings=results.CompareSettings(), original=original, variants=[variant]
    )
    back = pickle.loads(pickle.dumps(comparison))
    assert back.get("float16").error == "x"
    assert back.get("float16").ok is False
    assert back.settings.variants_dir is None
    assert [r.key for r in back.all] == [results.ORIGINAL, "float16"]
    with pytest.raises(KeyError):
        back.get("nope")

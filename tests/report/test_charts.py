"""Charts built from real comparisons: traces named after variants, units on axes, one colour per variant.

Three comparisons are measured once for the module (small settings, brotli
quality 5 to stay fast): the MLP with one method forced to fail, the tree
model (nothing changes, latency off) and the transformer (two outputs, int64
inputs, a single batch size).
"""

from __future__ import annotations

import copy
import dataclasses
import math

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from helpers import sample_path, steady_timings

import shrinkray
from shrinkray.errors import MethodError
from shrinkray.measure.parity import VerdictSettings
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison
from shrinkray.pipeline.compare import compare
from shrinkray.report import charts
from shrinkray.report.charts import style as chart_style
from shrinkray.verdict.advice import pareto, recommended

FAST = {"runs": 5, "latency_budget_s": 2, "culprit_budget_s": 5, "brotli_quality": 5, "threads": [1], "culprits": True}
BROKEN = "dynamic-int8"


def failing_compare(name: str, settings: CompareSettings) -> Comparison:
    """compare() with BROKEN raising inside shrink, as a method that fails on a model would."""
    import shrinkray.pipeline.compare as compare_module

    real = compare_module.shrink

    def shrink(source, method, **options):
        if method == BROKEN:
            raise MethodError("the quantizer crashed on this graph", "Try another method")
        return real(source, method, **options)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compare_module, "shrink", shrink)
        return compare(shrinkray.load(sample_path(name)), settings)


@pytest.fixture(scope="module")
def mlp() -> Comparison:
    methods = [("weights-int8", {}), ("float16", {}), ("palettize", {"levels": 2, "algorithm": "linear"}), (BROKEN, {})]
    # the absolute profile (max abs 0.06): weights-int8 and the 2-level palette fail, float16 passes
    settings = CompareSettings(methods=methods, verdict=VerdictSettings(profile="absolute"), batches=[1, 8, 32], **FAST)
    return steady_timings(failing_compare("mlp", settings))


@pytest.fixture(scope="module")
def tree() -> Comparison:
    return compare(shrinkray.load(sample_path("tree")), CompareSettings(**(FAST | {"latency": False})))


@pytest.fixture(scope="module")
def transformer() -> Comparison:
    settings = CompareSettings(methods=[("float16", {}), ("weights-int8", {})], batches=[2], **FAST)
    return compare(shrinkray.load(sample_path("transformer")), settings)


def names(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data]


def subtitle(fig: go.Figure) -> str:
    """The subtitle as read (its line breaks, which keep it inside half-width charts, as spaces)."""
    return (fig.layout.title.subtitle.text or "").replace("<br>", " ")


def test_long_subtitles_wrap_instead_of_being_clipped():
    text = "Median of 5 runs (whisker: p90), 1 thread, ONNX Runtime CPU, interleaved; lower is better · a &lt;b&gt; c"
    wrapped = charts.wrap_subtitle(text, 40)
    assert wrapped.replace("<br>", " ") == text
    assert all(len(line) <= 40 + 6 for line in wrapped.split("<br>"))  # "&lt;" counts as one character
    assert "&lt;" in wrapped and "&l<br>" not in wrapped
    fig = chart_style._figure("T", text)
    assert fig.layout.margin.t > 100 and fig.layout.height > charts.HEIGHT  # room for the extra lines


def test_the_model_pages_half_width_charts_wrap_their_subtitles_to_half_a_page():
    """Side by side on an 800 px page each chart is about 230 px wide: "…weights are 50" was cut there."""
    from shrinkray.pipeline.inspect import inspect_model
    from shrinkray.report.charts.model import HALF_PAGE_CHARS

    summary = inspect_model(shrinkray.load(sample_path("cnn")))
    for fig in (charts.op_histogram_chart(summary), charts.weight_bytes_chart(summary)):
        lines = fig.layout.title.subtitle.text.split("<br>")
        assert all(len(line) <= HALF_PAGE_CHARS for line in lines), lines
    assert "of the 510.33 KiB file" in subtitle(charts.weight_bytes_chart(summary))


def annotations(fig: go.Figure) -> str:
    return " ".join(a.text or "" for a in fig.layout.annotations)


def trace_color(trace) -> str | None:
    marker = getattr(trace, "marker", None)
    if marker is not None and isinstance(marker.color, str):
        return marker.color
    line = getattr(trace, "line", None)
    return line.color if line is not None else None


def ok_keys(c: Comparison) -> list[str]:
    return [r.key for r in c.all if r.ok]


# ---------------------------------------------------------------- the comparison under test


def test_the_fixture_has_a_failed_variant_and_a_recommendation(mlp):
    broken = mlp.get(BROKEN)
    assert not broken.ok and broken.sizes is None and broken.parity is None
    assert recommended(mlp) is not None and recommended(mlp).key == "float16"
    assert any(r.parity is not None and not r.parity.passed for r in mlp.variants)


# ---------------------------------------------------------------- look and colour


@pytest.mark.slow  # every figure of three comparisons
def test_every_figure_uses_the_white_template_and_has_a_title_and_subtitle(mlp, tree, transformer):
    for c in (mlp, tree, transformer):
        for key, fig in charts.all_figures(c).items():
            assert fig.layout.template == pio.templates["plotly_white"], key
            assert fig.layout.title.text, key
            if fig.data:
                assert subtitle(fig), key  # what is plotted and how it was measured
            else:
                assert annotations(fig), key  # why there is nothing to plot
            fig.to_json()  # valid for plotly.js


def test_original_is_grey_and_each_variant_keeps_one_colour_in_every_chart(mlp):
    seen: dict[str, set[str]] = {}
    figures = list(charts.all_figures(mlp).values()) + [charts.throughput_chart(mlp)]
    for fig in figures:
        for trace in fig.data:
            if trace.name in ok_keys(mlp):
                seen.setdefault(trace.name, set()).add(trace_color(trace))
    assert seen[ORIGINAL] == {charts.ORIGINAL_COLOR}
    colors = charts.variant_colors(mlp)
    for key, found in seen.items():
        assert found == {colors[key]}, key
    assert len({colors[r.key] for r in mlp.all}) == len(mlp.all)


def test_colours_follow_the_variant_order_and_wrap_around():
    fake = dataclasses.make_dataclass("Fake", ["variants"])
    results = [dataclasses.make_dataclass("R", ["key"])(f"v{i}") for i in range(len(charts.PALETTE) + 2)]
    colors = charts.variant_colors(fake(results))
    assert colors[ORIGINAL] == charts.ORIGINAL_COLOR
    assert colors["v0"] == charts.PALETTE[0] and colors[f"v{len(charts.PALETTE)}"] == charts.PALETTE[0]


# ---------------------------------------------------------------- sizes


def test_size_chart_has_raw_gzip_brotli_bars_for_every_measured_variant(mlp):
    fig = charts.size_chart(mlp)
    assert names(fig) == [r.key for r in mlp.all if r.sizes is not None]
    assert BROKEN not in names(fig) and BROKEN in subtitle(fig)
    assert list(fig.data[0].x) == ["raw file", "gzip -9", "brotli q5"]
    assert "gzip -9" in subtitle(fig) and "brotli q5" in subtitle(fig)
    assert max(r.sizes.raw for r in mlp.all if r.sizes is not None) >= 2**20  # mlp.onnx: 1,096,595 bytes
    assert fig.layout.yaxis.title.text == "Size (MiB)"
    div = 2**20
    for trace in fig.data:
        sizes = mlp.get(trace.name).sizes
        assert trace.y == pytest.approx([sizes.raw / div, sizes.gzip / div, sizes.brotli / div])
        assert trace.customdata[2][0] == f"{sizes.brotli:,}"  # exact bytes in the hover
        assert trace.customdata[2][1] == f"{sizes.brotli / mlp.original.sizes.brotli:.1%} of the original"


def test_byte_unit_picks_a_readable_unit():
    assert charts.byte_unit(500) == (1.0, "bytes")
    assert charts.byte_unit(5000) == (1024.0, "KiB")
    assert charts.byte_unit(5 * 2**20) == (2.0**20, "MiB")


# ---------------------------------------------------------------- latency and throughput


def test_latency_chart_shows_median_with_p90_whiskers_per_batch(mlp):
    fig = charts.latency_chart(mlp)
    keys = [k for k in ok_keys(mlp)]
    assert set(names(fig)) == set(keys)
    assert "1 thread" in subtitle(fig) and "5 runs" in subtitle(fig) and "p90" in subtitle(fig)
    assert "(ms)" in fig.layout.yaxis.title.text
    batches = sorted({s.batch for s in mlp.original.latency})
    assert [a.text for a in fig.layout.annotations] == [f"batch {b}" for b in batches]
    for trace in fig.data:
        batch = int(trace.x[0].split()[1])
        stats = mlp.get(trace.name).latency_at(1, batch)
        assert trace.y[0] == pytest.approx(stats.median_ms)
        assert trace.error_y.symmetric is False
        assert trace.error_y.array[0] == pytest.approx(stats.p90_ms - stats.median_ms)
        assert trace.error_y.arrayminus[0] == 0
    assert sum(t.showlegend is not False for t in fig.data) == len(keys)  # one legend entry per variant


def test_latency_with_one_batch_is_a_single_panel(transformer):
    fig = charts.latency_chart(transformer)
    assert names(fig) == ok_keys(transformer)
    assert fig.layout.yaxis.title.text == "Median latency (ms)"
    assert "samples per call" in fig.layout.xaxis.title.text


def test_latency_and_throughput_explain_when_nothing_was_timed(tree):
    for chart in (charts.latency_chart, charts.throughput_chart):
        fig = chart(tree)
        assert len(fig.data) == 0
        assert "not measured" in annotations(fig)


def test_latency_at_an_unmeasured_thread_count_says_so(mlp):
    fig = charts.latency_chart(mlp, threads=64)
    assert len(fig.data) == 0 and "64 threads" in annotations(fig)


def test_throughput_chart_is_samples_per_second_against_batch(mlp):
    fig = charts.throughput_chart(mlp)
    assert names(fig) == ok_keys(mlp)
    assert "samples/s" in fig.layout.yaxis.title.text and "Batch size" in fig.layout.xaxis.title.text
    for trace in fig.data:
        assert trace.mode == "lines+markers"
        stats = sorted(mlp.get(trace.name).latency, key=lambda s: s.batch)
        assert list(trace.x) == [s.batch for s in stats]
        assert trace.y == pytest.approx([s.throughput for s in stats])


def test_throughput_needs_two_batch_sizes(transformer):
    fig = charts.throughput_chart(transformer)
    assert len(fig.data) == 0 and "batch 2" in annotations(fig)
    assert "throughput" not in charts.all_figures(transformer)


# ---------------------------------------------------------------- parity


def with_verdict(c: Comparison, verdict: VerdictSettings) -> Comparison:
    """The same measurements judged by another verdict (the chart reads the limits from the settings)."""
    return dataclasses.replace(c, settings=dataclasses.replace(c.settings, verdict=verdict))


def test_parity_error_chart_has_one_box_per_variant_and_output_and_the_tolerance(transformer):
    fig = charts.parity_error_chart(with_verdict(transformer, VerdictSettings(profile="absolute")))
    variants = [r.key for r in transformer.variants]
    boxes = [t for t in fig.data if t.type == "box"]
    outputs = [o.name for o in transformer.original.parity.outputs]
    assert len(outputs) == 2
    assert [t.name for t in boxes] == variants * len(outputs)
    for trace, (name, key) in zip(boxes, [(o, k) for o in outputs for k in variants], strict=True):
        o = next(x for x in transformer.get(key).parity.outputs if x.name == name)
        expected = [abs(v - r) for r, v in zip(o.sample_reference, o.sample_variant, strict=True)]
        assert list(trace.x) == pytest.approx(expected)
    lines = [s for s in fig.layout.shapes if s.x0 == s.x1]
    assert len(lines) == len(outputs) and all(s.x0 == 0.06 for s in lines)
    assert any(t.name == "max abs error allowed 0.06" for t in fig.data)
    assert "output units" in fig.layout.xaxis.title.text
    assert ORIGINAL not in names(fig)


def test_parity_error_chart_draws_a_relative_limit_in_output_units(transformer):
    # the default profile judges these embeddings by row cosine: nothing to draw in output units
    plain = charts.parity_error_chart(transformer)
    assert not [s for s in plain.layout.shapes if s.x0 == s.x1]
    assert not any((t.name or "").endswith("allowed") or "allowed" in (t.name or "") for t in plain.data)
    # a largest relative error set for one output is drawn at that share of its range
    verdict = VerdictSettings(per_output={"pooled": {"max_relative_error": 0.05}})
    fig = charts.parity_error_chart(with_verdict(transformer, verdict), output="pooled")
    spread = next(o for o in transformer.original.parity.outputs if o.name == "pooled").measures["range"]
    lines = [s for s in fig.layout.shapes if s.x0 == s.x1]
    assert len(lines) == 1 and lines[0].x0 == pytest.approx(0.05 * spread)
    assert any(t.name == "largest error allowed (0.05 of the range)" for t in fig.data)


def test_parity_error_chart_for_one_output(transformer):
    fig = charts.parity_error_chart(transformer, output="pooled")
    assert "pooled" in subtitle(fig)
    assert {t.name for t in fig.data if t.type == "box"} == {r.key for r in transformer.variants}
    with pytest.raises(KeyError):
        charts.parity_error_chart(transformer, output="no-such-output")


def test_parity_charts_explain_exact_outputs(tree):
    label = charts.parity_error_chart(tree, output="label")
    assert len(label.data) == 0 and "compared exactly" in annotations(label)
    both = charts.parity_error_chart(tree)  # label explained, probabilities drawn
    assert "label compared exactly, identical" in subtitle(both)
    assert "reproduces the original exactly" in annotations(both)
    scatter = charts.parity_scatter_chart(tree, "float16", output="label")
    assert len(scatter.data) == 0 and "compared exactly" in annotations(scatter)


def test_failed_variants_are_left_out_of_parity_charts_and_named(mlp):
    fig = charts.parity_error_chart(mlp)
    assert BROKEN not in names(fig) and BROKEN in subtitle(fig)
    scatter = charts.parity_scatter_chart(mlp, BROKEN)
    assert len(scatter.data) == 0 and "quantizer crashed" in annotations(scatter)


def test_parity_scatter_plots_original_against_variant_with_the_identity_line(mlp):
    key = "weights-int8"
    fig = charts.parity_scatter_chart(mlp, key, output="logits")
    assert names(fig) == ["y = x (identical)", key]
    o = next(x for x in mlp.get(key).parity.outputs if x.name == "logits")
    assert list(fig.data[1].x) == o.sample_reference and list(fig.data[1].y) == o.sample_variant
    identity = fig.data[0]
    assert list(identity.x) == list(identity.y)
    assert "output units" in fig.layout.xaxis.title.text and "output units" in fig.layout.yaxis.title.text
    assert fig.data[1].marker.color == charts.variant_colors(mlp)[key]
    every = charts.parity_scatter_chart(mlp, key)  # both outputs side by side
    assert names(every).count(key) == 2
    with pytest.raises(KeyError):
        charts.parity_scatter_chart(mlp, "no-such-variant")


# ---------------------------------------------------------------- pareto


def test_pareto_chart_marks_the_recommended_variant_frontier_and_failures(mlp):
    fig = charts.pareto_chart(mlp)
    points = {p.key: p for p in pareto(mlp)}
    assert [n for n in names(fig) if n in points] == [r.key for r in mlp.all if r.key in points]
    best = recommended(mlp)
    star = next(t for t in fig.data if t.name == "Recommended")
    assert star.marker.symbol == "star"
    mine = next(t for t in fig.data if t.name == best.key)
    assert (star.x, star.y) == (mine.x, mine.y)
    assert f"Recommended: {best.key}" in annotations(fig)
    for trace in fig.data:
        if trace.name in points:
            assert trace.marker.symbol == ("circle" if points[trace.name].passed else "x")
    frontier = next(t for t in fig.data if t.name == "Pareto frontier")
    assert len(frontier.x) == len({(p.size, p.error) for p in points.values() if p.on_frontier})
    assert any(s.y0 == s.y1 == 1.0 for s in fig.layout.shapes)  # severity 1: the verdict's limit
    assert "parity limit" in annotations(fig)
    for key, p in points.items():  # the y value is the share of the allowed error, scale-free
        assert p.error == pytest.approx(mlp.get(key).parity.severity)
        assert p.passed is (p.error <= 1.0)
    largest = max(p.size for p in points.values())
    assert ("MiB" if largest >= 2**20 else "KiB") in fig.layout.xaxis.title.text
    assert "brotli q5" in fig.layout.xaxis.title.text and "Share of the allowed error" in fig.layout.yaxis.title.text


def test_pareto_uses_a_log_axis_across_decades_and_keeps_zero_error_visible(mlp):
    fig = charts.pareto_chart(mlp)
    assert fig.layout.yaxis.type == "log"
    original = next(t for t in fig.data if t.name == ORIGINAL)
    assert original.y[0] > 0  # 0 cannot be drawn on a log axis: it sits on the labelled floor
    assert "error exactly 0" in annotations(fig)
    low, _ = fig.layout.yaxis.range
    assert 10**low < original.y[0]
    assert fig.layout.yaxis.exponentformat == "power"  # a share, not a unit: 10⁻⁴, never "100μ"


def test_pareto_when_nothing_changes(tree):
    fig = charts.pareto_chart(tree)
    assert fig.layout.yaxis.type != "log"
    assert "Recommended" not in names(fig)
    assert "no variant is smaller" in subtitle(fig)
    assert "same size and error" in annotations(fig)


def test_pareto_handles_an_infinite_error(mlp):
    broken = copy.deepcopy(mlp)
    result = broken.get("palettize levels=2 algorithm=linear")
    result.parity.outputs[0] = dataclasses.replace(
        result.parity.outputs[0], measures={}, checks=[], passed=False,
        reason="shape changed from [4, 10] to [4, 11]", sample_reference=[], sample_variant=[],
    )  # fmt: skip
    assert result.parity.severity == math.inf and result.parity.max_abs_error == math.inf
    fig = charts.pareto_chart(broken)
    trace = next(t for t in fig.data if t.name == result.key)
    assert math.isfinite(trace.y[0]) and "infinite error" in annotations(fig)
    fig.to_json()
    error_fig = charts.parity_error_chart(broken, output="logits")
    assert "shape changed" in annotations(error_fig)


# ---------------------------------------------------------------- all figures and the model page


def test_all_figures_are_ordered_and_cover_every_chart(mlp, tree):
    figures = charts.all_figures(mlp)
    keys = list(figures)
    assert keys[:5] == ["pareto", "size", "latency", "throughput", "parity_error"]
    changed = [r.key for r in mlp.variants if r.ok and r.record.get("tensors_changed")]
    assert keys[5:] == [f"parity_scatter:{k}" for k in changed]
    tree_keys = list(charts.all_figures(tree))
    assert tree_keys == ["pareto", "size", "latency", "parity_error"]  # nothing changed: no scatter plots


@pytest.mark.parametrize("name", ["mlp", "tree", "transformer"])
def test_model_summary_charts(name):
    summary = shrinkray.inspect(shrinkray.load(sample_path(name)))
    ops = charts.op_histogram_chart(summary)
    assert list(ops.data[0].y)[: len(summary.op_histogram)] == [op for op, _ in summary.op_histogram][:20]
    assert "count" in ops.layout.xaxis.title.text
    weights = charts.weight_bytes_chart(summary)
    unit = weights.layout.xaxis.title.text
    assert unit.startswith("Size (") and unit.endswith(")")
    largest = max(w.bytes for w in summary.weights)
    div = {"Size (bytes)": 1, "Size (KiB)": 1024, "Size (MiB)": 2**20}[unit]
    assert weights.data[0].x[0] == pytest.approx(largest / div)


def test_empty_figure_is_an_annotation_without_axes():
    fig = charts.empty_figure("Nothing", "Because <reasons>")
    assert len(fig.data) == 0 and fig.layout.xaxis.visible is False
    assert "Because" in annotations(fig)


def test_latency_bars_too_noisy_to_call_are_hatched_and_named(transformer):
    import copy
    import dataclasses

    c = copy.deepcopy(transformer)
    noisy = c.get("float16")
    noisy.latency = [dataclasses.replace(s, ratio=1.1, ratio_low=0.8, ratio_high=1.4, settled=False)
                     for s in noisy.latency]  # fmt: skip
    settled = c.get("weights-int8")
    settled.latency = [dataclasses.replace(s, ratio=1.0, ratio_low=0.99, ratio_high=1.01, settled=True)
                       for s in settled.latency]  # fmt: skip
    fig = charts.latency_chart(c)
    shapes = {t.name: t.marker.pattern.shape for t in fig.data}
    assert shapes["float16"] == "/" and not shapes["weights-int8"] and not shapes["original"]
    assert "too noisy to tell against the original (float16)" in subtitle(fig)
    hover = {t.name: t.customdata[0][4] for t in fig.data}
    assert hover["float16"].startswith("vs the original: too noisy to tell (95%: 0.80-1.40x)")
    assert hover["weights-int8"] == "vs the original: 1.00x (95%: 0.99-1.01x)"
    noisy.latency = [dataclasses.replace(s, settled=True) for s in noisy.latency]
    calm = charts.latency_chart(c)
    assert "too noisy" not in subtitle(calm) and not any(t.marker.pattern.shape for t in calm.data)


# ---------------------------------------------------------------- pricing: every file stays visible


def test_cost_lines_of_files_served_with_the_same_bytes_are_one_labelled_line():
    """Two files served with the same bytes cost the same everywhere: drawn apart, the second hid the first
    (the walkthrough's chart showed one line for two of its files)."""
    from shrinkray import pricing

    provider = pricing.load_providers()["gcs"]
    grid = pricing.log_downloads_grid(100, 10**9)
    sizes = {"original": 522_573, "palettize": 522_573, "weights-int8": 152_617, "float16": 152_617, "int4": 104_442}
    fig = charts.cost_curve_chart(pricing.cost_curve(sizes, provider, grid), grid)
    names = [t.name for t in fig.data]
    assert names == ["original = palettize", "weights-int8 = float16", "int4"], names
    assert fig.data[0].line.color == charts.ORIGINAL_COLOR and fig.data[0].line.dash == "dot"
    assert len({tuple(t.y) for t in fig.data}) == len(fig.data)  # no two lines drawn on the same points


def test_cost_lines_a_few_percent_apart_differ_in_more_than_colour():
    """weights-int4 (92,230 B) and dynamic-int8 (95,732 B) lie within a pixel of each other on log axes: the
    one drawn last hid the other. Each line has its own dash pattern, so both colours show."""
    from shrinkray import pricing

    provider = pricing.load_providers()["gcs"]
    grid = pricing.log_downloads_grid(100, 10**9)
    labels = ["original", "weights-int4", "dynamic-int8", "weights-int8", "palettize", "float16", "a", "b"]
    sizes = {label: 484_830 - 40_000 * i for i, label in enumerate(labels)}
    fig = charts.cost_curve_chart(pricing.cost_curve(sizes, provider, grid), grid, colors={"weights-int4": "#009E73"})
    styles = [(t.line.color, t.line.dash) for t in fig.data]
    assert len(set(styles)) == len(styles) == len(labels), styles
    variant_dashes = [t.line.dash for t in fig.data[1:]]
    assert len(set(variant_dashes[: len(charts.COST_DASHES)])) == len(charts.COST_DASHES), variant_dashes
    assert "dot" not in variant_dashes  # dotted is the original's
    assert fig.data[1].line.color == "#009E73"  # a colour given keeps its variant
    assert fig.layout.hovermode == "x unified"  # one hover box gives every file's cost at that count


def test_the_cost_charts_download_marker_is_labelled_where_it_is_drawn():
    """On log axes plotly places an annotation by its exponent: the label of the line at 100,000 was placed at
    10^100000, off the chart, so the marker had no label."""
    from shrinkray import pricing

    grid = pricing.log_downloads_grid(100, 10**9)
    fig = charts.cost_curve_chart(pricing.cost_curve({"original": 1000}, pricing.load_providers()["gcs"], grid), grid,
                                  current_downloads=2_500_000)  # fmt: skip
    labels = [a for a in fig.layout.annotations if a.text == "2,500,000 / month"]
    assert len(labels) == 1 and labels[0].x == pytest.approx(math.log10(2_500_000)), fig.layout.annotations
    assert fig.layout.shapes[0].x0 == 2_500_000  # the line itself takes the count
    assert list(fig.layout.xaxis.ticktext) == ["100", "1000", "10k", "100k", "1M", "10M", "100M", "1B"]

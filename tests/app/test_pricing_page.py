"""The Pricing page: worked example, URL round trip, presets, bad links."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import open_pricing
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


_pricing = open_pricing


def _cards(at: AppTest) -> list[str]:
    """The variant cards' titles, in order (the label as shown, Markdown-escaped)."""
    import re

    titles = [m.value for m in at.main.markdown if re.fullmatch(r"\*\*.+\*\*( \(reference\))?", m.value)]
    return [re.sub(r"^\*\*(.+)\*\*.*$", r"\1", t) for t in titles]


def _metrics(at: AppTest) -> dict[str, str]:
    """"LABEL: per month" -> money, for every card (each card: a per-month and a per-year metric)."""
    values = [m for m in at.metric if m.label in ("per month", "per year")]
    cards = [card for card in _cards(at) for _ in (0, 1)]
    assert len(cards) == len(values), (cards, [m.label for m in values])
    return {f"{card.replace(chr(92), '')}: {m.label}": m.value for card, m in zip(cards, values, strict=True)}


def _link(at: AppTest) -> dict[str, str]:
    """The query of the shared link the page shows (the same text it writes into the address bar)."""
    from urllib.parse import parse_qs

    query = at.code[-1].value.split("?", 1)[1]
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


def test_worked_example_from_a_link():
    at = _pricing({"provider": "custom", "price": "0.12", "downloads": "100000", "sizes": "model=52428800"})
    metrics = _metrics(at)
    assert metrics["model: per month"] == "$585.94"
    assert metrics["model: per year"] == "$7,031.25"
    table = at.dataframe[-1].value
    assert float(table["GiB per month"].iloc[0]) == 4882.8125


def test_every_input_is_written_back_to_the_link_and_reopens_the_same():
    params = {"provider": "s3", "downloads": "250000", "delivery": "gzip", "growth": "5", "currency": "€",
              "sizes": "original=50MiB,int8=13MiB"}  # fmt: skip
    first = _pricing(params)
    numbers = _metrics(first)
    assert numbers["original: per month"].startswith("€")
    link = _link(first)
    assert link["v"] == "1"
    for key, value in params.items():
        assert link[key] == value, (key, link)
    assert all(isinstance(v, str) for v in link.values()), link
    again = _pricing(link)
    assert _metrics(again) == numbers


def test_edited_prices_travel_in_the_link():
    at = _pricing({"provider": "gcs", "downloads": "100000", "sizes": "a=1GiB", "tiers": "1024:0.2;:0.1", "free": "0"})
    # 100,000 GiB: 1,024 at 0.2 + 98,976 at 0.1
    assert _metrics(at)["a: per month"] == "$10,102.40"
    assert _link(at)["tiers"] == "1024:0.2;:0.1"


def test_zero_egress_provider_costs_nothing():
    at = _pricing({"provider": "r2", "downloads": "1000000", "sizes": "a=100MiB"})
    assert _metrics(at)["a: per month"] == "$0.00"


def test_unknown_provider_in_a_link_falls_back_with_a_message():
    at = _pricing({"provider": "nosuchcdn", "downloads": "1000", "sizes": "a=1MiB"})
    assert any("Unknown provider 'nosuchcdn'" in e.value for e in at.error)
    assert "a: per month" in _metrics(at)


def test_bad_sizes_give_a_message_not_a_traceback():
    at = _pricing({"provider": "gcs", "downloads": "1000", "sizes": "a=lots"})
    assert not at.exception
    assert any("is not a size" in e.value for e in at.error)
    assert "original: per month" in _metrics(at)  # the example sizes instead


def test_uses_the_measured_variants_and_the_link_reproduces_them_elsewhere():
    import shrinkray
    from app_ui.state import settings_key
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    loaded = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    methods = [("palettize", {"levels": 2}), ("float16", {})]
    settings = CompareSettings(methods=methods, latency=False, brotli_quality=5)
    result = compare(loaded, settings)
    assert not result.get("palettize levels=2").parity.passed
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = loaded
    at.session_state["comparisons"] = {(loaded.sha256, settings_key(settings)): result}
    at.session_state["latest"] = (loaded.sha256, settings_key(settings))
    at.session_state["run_id"] = "AbCdEfGhIjKlMnOpQrSt_-"
    at.run()
    at.switch_page("app_pages/pricing.py").run()
    assert not at.exception, at.exception
    # The original, then the recommended variant, then the others; a failing variant is marked, never green.
    assert _cards(at) == ["original", "float16", "palettize levels=2"]
    badges = [m.value for m in at.main.markdown if "-badge[" in m.value]
    assert [b.split(" ", 1)[1].rstrip("]") for b in badges] == ["recommended", "fails parity"], badges
    assert badges[0].startswith(":green-badge[") and badges[1].startswith(":red-badge["), badges
    month = [m for m in at.metric if m.label == "per month"]
    assert [m.proto.color for m in month[1:]] == [1, 2]  # float16 green (saves, can ship); palettize grey
    # Each variant's cost curve keeps its colour from the Compare page's charts (the cards are best first,
    # which gave float16 palettize's colour).
    import json

    from shrinkray.report.charts import variant_colors

    chart = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "egress cost" in c.proto.spec)
    drawn = {t["name"].split(" (")[0]: t["line"]["color"] for t in chart["data"] if t.get("mode") == "lines"}
    expected = variant_colors(result)
    assert drawn == {k: expected[k] for k in drawn} and len(drawn) == 3, (drawn, expected)
    link = _link(at)
    assert link["run"] == "AbCdEfGhIjKlMnOpQrSt_-"
    measured = result.get("float16").sizes
    assert f"float16={measured.raw}/{measured.gzip}/{measured.brotli}" in link["sizes"]
    # A fresh session (a colleague's browser) with only the link: the same money, from the sizes it carries
    # (this run was never kept in the store, so the run id is left out here).
    again = _pricing({k: v for k, v in link.items() if k != "run"})
    assert _metrics(again) == _metrics(at)
    assert not again.error, [e.value for e in again.error]


# --------------------------------------------------------------------------- hostile links


BAD_LINKS = [
    ({"growth": "abc"}, "monthly growth in %", "Monthly growth must be a percentage such as 5 or 5%, not 'abc'"),
    ({"growth": "1001"}, "monthly growth in %", "Monthly growth must be from -99% to 1000%, not 1001%"),
    ({"growth": "inf"}, "monthly growth in %", "Monthly growth must be a finite percentage"),
    ({"growth": "-100"}, "monthly growth in %", "Monthly growth must be more than -100%"),
    ({"downloads": "-1"}, "downloads per month", "Downloads per month cannot be negative (-1)"),
    ({"downloads": "nan"}, "downloads per month", "Downloads per month must be a finite number, not 'nan'"),
    ({"downloads": "abc"}, "downloads per month", "Downloads per month must be a number, not 'abc'"),
    ({"downloads": "1e13"}, "downloads per month", "Downloads per month must be at most 1,000,000,000,000, not 1e13"),
    ({"provider": "custom", "price": "1e308"}, "price per GiB", "Price per GiB must be at most 1,000"),
    ({"provider": "custom", "price": "1e-400"}, "price per GiB", "Price per GiB has more than 6 decimal places"),
    ({"provider": "gcs", "tiers": ":0.1", "free": "1e300"}, "prices", "Free GiB per month must be at most"),
    ({"sizes": "a=lots"}, "sizes", "a: 'lots' is not a size"),
    ({"provider": "nosuchcdn"}, "provider", "Unknown provider 'nosuchcdn'"),
    ({"currency": "dollars"}, "currency symbol", "A currency symbol is 1 to 4 printable characters, not 7"),
    ({"provider": "gcs", "tiers": "1e300:0.1;:0.05"}, "prices", "Tier end must be at most"),
]


@pytest.mark.parametrize(("params", "label", "message"), BAD_LINKS)
def test_a_bad_link_value_is_named_and_the_default_shown(params, label, message):
    at = _pricing({"sizes": "a=50MiB", **params})
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"The link's {label} ("), errors[0]
    assert message.replace("%", "%") in errors[0].replace("\\", ""), errors[0]
    assert "bug" not in errors[0]
    metrics = _metrics(at)
    shown = "original: per month" if "sizes" in params else "a: per month"  # bad sizes: the example's instead
    assert metrics[shown].lstrip("$€").replace(",", "").replace(".", "").isdigit()  # priced, not "$0.00"
    assert metrics[shown] != "$0.00"


def test_a_size_beyond_the_bound_is_a_message():
    at = _pricing({"sizes": "a=1e308"})
    assert any("is more than 1,125,899,906,842,624 bytes (1 PiB)" in e.value for e in at.error)


def test_names_in_the_link_render_inert():
    at = _pricing({"sizes": "![x](https://evil.example/t.png)=1MiB,=HYPERLINK(1)=2MiB", "downloads": "1000"})
    labels = _cards(at)
    assert labels[0].startswith("!\\[x\\](https\u2060:\\/\\/evil"), labels  # no link, even once escapes are read
    table = at.dataframe[-1].value
    assert list(table["variant"])[1] == "'=HYPERLINK(1)"  # the CSV download is never a formula


@pytest.mark.parametrize("provider", ["gcs", "s3", "cloudfront", "azure", "r2", "custom"])
def test_the_pricing_page_names_no_command_line_flag(provider):
    import re

    at = _pricing({"provider": provider, "sizes": "a=1MiB", "downloads": "abc"})
    texts = [str(e.value) for kind in ("markdown", "caption", "info", "warning", "error") for e in at.get(kind)]
    leaks = [t for t in texts if re.search(r"(?<![\w-])--[a-z]", t.replace("\\", ""))]
    assert not leaks, leaks


def test_pricing_settings_survive_a_trip_to_another_page():
    at = _pricing({"provider": "s3", "downloads": "250000", "growth": "5", "sizes": "a=50MiB,b=10MiB"})
    at.number_input(key="pricing:downloads").set_value(300_000).run()
    at.text_input(key="pricing:sizes_text").set_value("a=40MiB,b=10MiB").run()
    before = _metrics(at)
    at.switch_page("app_pages/model.py").run()
    at.switch_page("app_pages/pricing.py").run()
    assert not at.exception, at.exception
    assert at.number_input(key="pricing:downloads").value == 300_000
    assert at.selectbox(key="pricing:provider").value == "s3"
    assert at.text_input(key="pricing:sizes_text").value == "a=40MiB,b=10MiB"
    assert _metrics(at) == before


def test_a_bad_links_messages_go_once_the_what_if_changes():
    at = _pricing({"downloads": "abc", "sizes": "a=1MiB"})
    assert len(at.error) == 1
    at.radio(key="pricing:delivery").set_value("gzip").run()
    assert not at.error, [e.value for e in at.error]


def test_the_slider_follows_a_typed_download_count():
    """Typing 250,000 left the slider at 100,000 beside cards "at 250,000 downloads a month"."""
    at = _pricing({"provider": "gcs", "sizes": "a=50MiB,b=10MiB"})
    at.number_input(key="pricing:downloads").set_value(250_000).run()
    assert not at.exception, at.exception
    assert at.select_slider(key="pricing:downloads_preset").value == 250_000  # the count itself, not a round one near it
    at.select_slider(key="pricing:downloads_preset").set_value(5_000_000).run()
    assert at.number_input(key="pricing:downloads").value == 5_000_000  # and the slider still sets the count


def test_the_page_names_no_command_line_flag():
    """The app never names a CLI flag: the growth control's help said "the CLI's --growth reads 5 the same way"
    and each provider's notes say "--price-per-gb" in the engine's data (the page words them as its controls)."""
    import re

    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    for provider in ("gcs", "s3", "custom"):
        at = _pricing({"provider": provider, "price": "0.1", "sizes": "model=52428800"})
        helps = [str(w.proto.help) for kind in ("number_input", "radio", "selectbox", "select_slider", "text_input")
                 for w in at.get(kind) if getattr(w.proto, "help", "")]  # fmt: skip
        texts = [str(e.value) for kind in ("markdown", "caption", "info", "warning") for e in at.get(kind)]
        leaks = [t for t in helps + texts if flag.search(t.replace("\\", ""))]
        assert helps and not leaks, leaks


def test_an_empty_cell_reads_empty_or_as_a_dash_never_none():
    """The last tier's open end and a cost with no downloads are missing values: Streamlit writes "None" in such
    a cell unless told otherwise; the tier editor leaves it empty (its heading says empty means "and above") and
    the cost table shows a dash."""
    at = _pricing({"downloads": "0"})
    editor, costs = at.dataframe[0], at.dataframe[-1]
    assert list(editor.value.columns) == ["up to GiB in the month", "price per GiB"]
    assert editor.value["up to GiB in the month"].isna().iloc[-1]  # the open end is a missing value...
    assert editor.proto.HasField("placeholder") and editor.proto.placeholder == ""  # ...shown empty
    assert any("*and above*" in m.value for m in at.markdown)
    per_million = next(c for c in costs.value.columns if c.startswith("per 1M downloads"))
    assert costs.value[per_million].isna().all()  # no downloads: no cost per download
    assert costs.proto.HasField("placeholder") and costs.proto.placeholder == "–"

"""Pricing links: what a link encodes reads back the same, and any malformed value is a problem, not an error."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkray import pricing
from shrinkray.errors import OptionError
from shrinkray.pricing import links
from shrinkray.pricing.links import PricingLink, decode_pricing, encode_pricing

PROVIDERS = pricing.load_providers()


def _read(query: str):
    return decode_pricing(parse_qs(query, keep_blank_values=True), PROVIDERS)


def test_a_measured_link_reads_back_exactly():
    link = PricingLink(
        provider="s3", downloads=250_000, delivery="gzip", growth=Decimal("0.05"), currency="€",
        sizes={"original": {"raw": 1_096_704, "gzip": 985_421, "brotli": 861_102},
               "palettize levels=16": {"raw": 1_096_704, "gzip": 150_000, "brotli": 120_000}},
        run="Ab3xYz_-12345678",
    )  # fmt: skip
    query = encode_pricing(link)
    assert query.startswith("v=1&")
    assert "growth=5&" in query  # percent, as the page's field shows it
    assert "original=1096704/985421/861102" in query  # readable and compact
    assert _read(query) == (link, [])


def test_typed_sizes_take_units_and_old_links_still_read():
    # A link from before versioning: no v, sizes as typed on the page.
    link, problems = _read("provider=gcs&downloads=100000&delivery=brotli&growth=5&currency=$&sizes=original=50MiB,shrunk=13MiB")
    assert problems == []
    assert link.growth == Decimal("0.05")
    assert links.served(link.sizes, "brotli") == {"original": 50 * 2**20, "shrunk": 13 * 2**20}
    assert links.served(link.sizes, "raw") == links.served(link.sizes, "gzip") == links.served(link.sizes, "brotli")


def test_parse_sizes_text_names_unlabelled_items_and_the_bad_one():
    assert links.parse_sizes_text("a=1kB, 2KiB ,") == {"a": 1000, "file 2": 2048}
    with pytest.raises(OptionError, match="^b: 'lots' is not a size"):
        links.parse_sizes_text("a=1kB,b=lots")


@pytest.mark.parametrize(
    ("param", "value", "expected"),
    [
        ("downloads", "abc", "Downloads per month must be a number"),
        ("downloads", "-5", "cannot be negative"),
        ("downloads", "1e13", "at most 1,000,000,000,000"),
        ("growth", "x", "Monthly growth must be a percentage"),
        ("growth", "-100", "more than -100%"),
        ("growth", "1e999", "from -99% to 1000%"),
        ("sizes", "a=lots", "a: 'lots' is not a size"),
        ("sizes", "a=1/2", "is not a size"),
        ("sizes", "a=0", "is 0 bytes"),
        ("currency", "toolong", "1 to 4 printable characters"),
        ("currency", "\x1b[31m", "1 to 4 printable characters"),
        ("provider", "nosuchcdn", "Unknown provider 'nosuchcdn'"),
        ("delivery", "zip", "not a delivery"),
        ("tiers", "1024:0.2;junk", "is not a price tier"),
        ("tiers", "2048:0.1;1024:0.2;:0.05", "Prices for"),
        ("run", "../../etc/passwd", "not a run id"),
        ("v", "9", "another version"),
    ],
)
def test_each_malformed_value_is_a_problem_and_the_default_is_used(param, value, expected):
    params = {"provider": "gcs", "downloads": "1000", "sizes": "a=1MiB", param: value}
    link, problems = decode_pricing(params, PROVIDERS)
    assert [p.param for p in problems] == [param]
    assert expected in problems[0].problem, problems[0]
    sentence = problems[0].sentence()
    assert sentence.startswith(f"The link's {param} (") and "Showing " in sentence
    default = PricingLink()
    if param in ("downloads", "growth", "currency", "delivery", "provider"):
        assert getattr(link, param) == getattr(default, param)


def test_a_custom_price_and_edited_tiers_travel():
    custom, problems = _read("provider=custom&price=0.085&downloads=10&sizes=a=1GiB")
    assert problems == [] and custom.price == Decimal("0.085")
    assert links.provider_for(custom, PROVIDERS).tiers[0].price_per_gib == Decimal("0.085")
    edited, problems = _read("provider=gcs&tiers=1024:0.2;:0.1&free=5&sizes=a=1GiB")
    assert problems == []
    provider = links.provider_for(edited, PROVIDERS)
    assert [t.price_per_gib for t in provider.tiers] == [Decimal("0.2"), Decimal("0.1")]
    assert provider.free_gib_per_month == 5
    again, _ = _read(encode_pricing(edited))
    assert links.provider_for(again, PROVIDERS) == provider


def test_nothing_in_a_link_raises():
    for junk in ["", "&&&", "sizes=", "sizes=,,,", "downloads=%00", "growth=nan", "tiers=:", "free=abc&tiers=:1",
                 "v=1&v=2&downloads=1&downloads=x", "sizes=" + "a=1," * 5000]:  # fmt: skip
        link, problems = _read(junk)
        assert isinstance(link, PricingLink)
        assert all(isinstance(p, links.LinkProblem) for p in problems)


_labels = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24
).map(str.strip).filter(bool)
_sizes = st.integers(1, pricing.MAX_SIZE_BYTES)


@st.composite
def _links(draw) -> PricingLink:
    sizes = draw(st.dictionaries(_labels, st.tuples(_sizes, _sizes, _sizes) | _sizes.map(lambda s: (s, s, s)),
                                 min_size=1, max_size=6))  # fmt: skip
    provider = draw(st.sampled_from([*PROVIDERS, pricing.CUSTOM]))
    growth_hundredths = draw(st.integers(-9900, 100_000))
    return PricingLink(
        provider=provider,
        downloads=draw(st.integers(0, int(pricing.MAX_DOWNLOADS))),
        delivery=draw(st.sampled_from(pricing.DELIVERIES)),
        growth=Decimal(growth_hundredths) / 10_000,
        currency=draw(st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp", "Cf")),
                              min_size=1, max_size=4).filter(lambda c: c == c.strip() and c.isprintable())),  # fmt: skip
        price=Decimal(draw(st.integers(0, 1_000_000))) / 1000 if provider == pricing.CUSTOM else None,
        sizes={label: dict(zip(pricing.DELIVERIES, values, strict=True)) for label, values in sizes.items()},
        run=draw(st.none() | st.from_regex(r"[A-Za-z0-9_-]{8,40}", fullmatch=True)),
    )


@settings(max_examples=150, deadline=None)
@given(_links())
def test_round_trip_through_a_real_address(link):
    """What the page writes into the address bar is what a fresh browser reads back: same inputs, same money."""
    url = "http://localhost:8501/pricing?" + encode_pricing(link)
    back, problems = decode_pricing(parse_qs(urlsplit(url).query, keep_blank_values=True), PROVIDERS)
    assert problems == []
    if back.price is not None and link.price is not None:
        assert back.price == link.price
    back.price = link.price  # normalized (0.120 -> 0.12): same number
    assert back == link


@settings(max_examples=150, deadline=None)
@given(st.decimals(min_value=-99, max_value=1000, places=4, allow_nan=False, allow_infinity=False))
def test_growth_percent_round_trips(percent):
    rate = pricing.parse_growth(str(percent))
    assert rate == percent / 100
    assert pricing.parse_growth(pricing.format_growth(rate)) == rate
    assert pricing.parse_growth(f"{percent}%") == rate


def test_money_under_a_currency_label():
    assert pricing.format_amount(Decimal("1234.5"), "€") == "€1,234.50"
    assert pricing.format_amount(Decimal("-3.1"), "£") == "-£3.10"
    assert pricing.format_amount(Decimal("0.001"), "CHF") == "<CHF0.01"
    assert pricing.format_amount(Decimal("585.9375")) == "$585.94"


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_labels.filter(lambda label: "=" not in label), _sizes, min_size=1, max_size=6))
def test_typed_sizes_text_round_trips(sizes):
    """What the page shows in its sizes field reads back to the same bytes (units only when exact)."""
    assert links.parse_sizes_text(links.sizes_text(sizes)) == sizes


def test_a_link_with_thousands_of_sizes_is_refused_in_one_sentence():
    """3,000 sizes cost 10 s of server CPU and a minute to draw: at most MAX_SIZES files are priced at once."""
    from shrinkray.errors import OptionError
    from shrinkray.pricing.links import MAX_SIZES, parse_sizes_text

    many = ",".join(f"f{i}=1MiB" for i in range(3000))
    with pytest.raises(OptionError, match="3,000 sizes: at most 64 files are priced at once"):
        parse_sizes_text(many)
    assert len(parse_sizes_text(",".join(f"f{i}=1MiB" for i in range(MAX_SIZES)))) == MAX_SIZES


# ---------------------------------------------------------------- every parameter bounded (issue 27)


@pytest.mark.parametrize("param", sorted(links.MAX_PARAM_CHARS))
def test_every_parameter_longer_than_its_bound_is_refused_in_one_sentence(param):
    """A value past its length bound is not parsed at all: one sentence naming the parameter, the default shown."""
    limit = links.MAX_PARAM_CHARS[param]
    params = {"provider": "gcs", "downloads": "1000", "sizes": "a=1MiB", param: "1" * (limit + 1)}
    if param == "free":
        params["tiers"] = "1024:0.2;:0.1"  # free travels with edited tiers, which are then not used
    if param == "price":
        params["provider"] = pricing.CUSTOM
    link, problems = decode_pricing(params, PROVIDERS)
    assert len(problems) == 1, problems
    problem = problems[0]
    assert f"{limit + 1:,} characters, more than the {limit:,} a link's {param} may have" in problem.problem
    assert problem.sentence().count(". ") <= 1  # the refusal, then what is shown instead
    assert len(problem.sentence()) < 300  # the value is cut when shown


def test_every_parameter_at_its_bound_is_still_read_as_a_value():
    """The bound is on length alone: a value of exactly that many characters is parsed (and may fail as a value)."""
    downloads = "0" * (links.MAX_PARAM_CHARS["downloads"] - 1) + "5"
    link, problems = decode_pricing({"downloads": downloads}, PROVIDERS)
    assert problems == [] and link.downloads == 5


def test_tiers_are_bounded_in_count():
    many = ";".join(f"{gib}:0.1" for gib in range(1, pricing.MAX_TIERS + 1)) + ";:0.05"
    _, problems = decode_pricing({"provider": "gcs", "tiers": many}, PROVIDERS)
    assert [p.param for p in problems] == ["tiers"]
    assert f"{pricing.MAX_TIERS + 1} price tiers: at most {pricing.MAX_TIERS} are priced" in problems[0].problem
    enough = ";".join(f"{gib}:0.1" for gib in range(1, pricing.MAX_TIERS)) + ";:0.05"
    link, problems = decode_pricing({"provider": "gcs", "tiers": enough}, PROVIDERS)
    assert problems == [] and len(link.tiers) == pricing.MAX_TIERS
    with pytest.raises(OptionError, match="at most 32 are priced"):  # the page's table, the same bound
        pricing.with_prices(PROVIDERS["gcs"], [(str(g), "0.1") for g in range(1, 40)] + [(None, "0.05")])


def test_marks_are_bounded_in_count():
    marks = ",".join(f"v{i}~recommended" for i in range(links.MAX_SIZES + 1))
    _, problems = decode_pricing({"sizes": "a=1MiB", "marks": marks}, PROVIDERS)
    assert [p.param for p in problems] == ["marks"]
    assert f"{links.MAX_SIZES + 1} standings: at most {links.MAX_SIZES}" in problems[0].problem


def test_labels_are_bounded_in_length_and_a_written_link_always_reads_back():
    label = "x" * (links.MAX_LABEL_CHARS + 1)
    _, problems = decode_pricing({"sizes": f"{label}=1MiB"}, PROVIDERS)
    assert [p.param for p in problems] == ["sizes"]
    assert f"A label of {links.MAX_LABEL_CHARS + 1} characters: at most {links.MAX_LABEL_CHARS}" in problems[0].problem
    with pytest.raises(OptionError, match="A label of"):
        links.parse_sizes_text(f"{label}=1MiB")
    # A variant whose name is longer (many excluded tensors) is written cut, so the page's own link is read back.
    long_key = "weights-int8 exclude=" + ",".join(f"/model/layer.{i}/attention/Wq" for i in range(20))
    link = PricingLink(sizes={"original": {"raw": 10, "gzip": 9, "brotli": 8}, long_key: {"raw": 5, "gzip": 4, "brotli": 3}},
                       marks={long_key: "recommended"})  # fmt: skip
    back, problems = _read(encode_pricing(link))
    assert problems == []
    cut = next(k for k in back.sizes if k != "original")
    assert len(cut) == links.MAX_LABEL_CHARS and long_key.startswith(cut[:-1]) and back.marks == {cut: "recommended"}
    assert links.parse_sizes_text(links.sizes_text({long_key: 1024}))  # the page's sizes field too


def test_a_written_link_of_every_file_at_its_longest_is_within_the_bounds():
    """The bounds are far above what the page writes: 64 files with labels of the longest kept length, commas
    and percent signs (written as three characters each) included."""
    label = ("%," * links.MAX_LABEL_CHARS)[: links.MAX_LABEL_CHARS]
    sizes = {f"{i:02d}{label}"[: links.MAX_LABEL_CHARS]: {"raw": 2**50, "gzip": 2**50 - 1, "brotli": 2**50 - 2}
             for i in range(links.MAX_SIZES)}  # fmt: skip
    marks = dict.fromkeys(sizes, "recommended, fails parity, 999999.99x slower")
    back, problems = _read(encode_pricing(PricingLink(sizes=sizes, marks=marks)))
    assert problems == [] and back.sizes == sizes and back.marks == marks


@pytest.mark.parametrize(
    ("parse", "value", "example"),
    [
        (pricing.parse_price, "abc", "e.g. 0.12"),
        (pricing.parse_price, "5000", "e.g. 0.12"),
        (pricing.parse_price, "-1", "e.g. 0.12"),
        (pricing.parse_free_gib, "lots", "e.g. 100"),
        (pricing.parse_downloads, "lots", "e.g. 100000"),
    ],
)
def test_each_error_gives_an_example_of_its_own_field(parse, value, example):
    """A price refused with the downloads example (e.g. 100000) would read as 'try 100,000 a GiB'."""
    with pytest.raises(OptionError) as caught:
        parse(value)
    assert example in caught.value.hint, caught.value.hint
    if parse is not pricing.parse_downloads:
        assert "100000" not in str(caught.value)


def test_the_price_problem_in_a_link_shows_a_price_example():
    _, problems = decode_pricing({"provider": pricing.CUSTOM, "price": "abc"}, PROVIDERS)
    assert "For example 0.12." in problems[0].problem and "100000" not in problems[0].sentence()

"""Pricing page: what the shrinking is worth in CDN egress, as a shareable what-if.

The page only draws: the link is read and written by ``shrinkray.pricing.links`` (bounded like the CLI's flags),
money by ``shrinkray.pricing``, each variant's standing by ``shrinkray.verdict.advice``. The address is replaced
(``history.replaceState``), never pushed, so Back leaves the page in one press.
"""

import json
from decimal import Decimal

import pandas as pd
import streamlit as st

from app_ui.controls import app_words, friendly_errors
from app_ui.runs import latest_comparison
from app_ui.state import current_model
from shrinkray import pricing
from shrinkray.errors import ShrinkRayError
from shrinkray.measure.results import ORIGINAL
from shrinkray.pricing import links
from shrinkray.report import charts
from shrinkray.text_safety import csv_cell
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes
from shrinkray.verdict import advice

st.title("Pricing")
st.write(
    "Model files are downloaded again and again, and egress is billed per GiB (2^30 bytes). "
    "Set the downloads and the provider to see what each variant costs a month and a year. "
    "The page address holds every setting and the sizes priced: copy it to share this what-if."
)

providers = pricing.load_providers()
CUSTOM = pricing.CUSTOM
provider_ids = [*providers, CUSTOM]
DOWNLOAD_STEPS = [10**k * m for k in range(2, 9) for m in (1, 2, 5)] + [10**9]
LABELS = {"provider": "provider", "downloads": "downloads per month", "delivery": "delivery", "growth":
          "monthly growth in %", "currency": "currency symbol", "price": "price per GiB", "tiers": "prices",
          "sizes": "sizes", "run": "run", "v": "link version"}  # fmt: skip
ss = st.session_state

# ---------------------------------------------------------------- the link, read once per browser session

if "pricing:link" not in ss:
    link, problems = links.decode_pricing({k: st.query_params.get_all(k) for k in st.query_params}, providers)
    ss["pricing:link"] = link
    ss["pricing:problems"] = problems
    # Sizes measured elsewhere (raw/gzip/brotli differ) are priced as they came; typed ones stay editable.
    ss["pricing:shared_sizes"] = link.sizes if link.sizes and not links.is_typed(link.sizes) else None
    ss["pricing:shared_run"] = link.run
    ss["pricing:shared_marks"] = link.marks
    ss["pricing:seeded"] = {"pricing:provider": link.provider, "pricing:downloads": int(link.downloads),
                            "pricing:delivery": link.delivery, "pricing:growth": float(link.growth * 100),
                            "pricing:currency": link.currency}  # fmt: skip
link: links.PricingLink = ss["pricing:link"]
if any(key in ss and ss[key] != value for key, value in ss["pricing:seeded"].items()):
    ss["pricing:problems"] = []  # the what-if was changed: the link's problems no longer apply
for problem in ss["pricing:problems"]:
    if problem.param == "run":
        continue  # the run restorer (app_ui/runs.py) says what is wrong with a run id, for every page
    st.error(md(problem.sentence(LABELS.get(problem.param, problem.param))), icon=":material/link_off:")


def _slider_steps(count: int) -> list[int]:
    """The slider's round numbers with the count in force among them, so the slider shows the user's own
    number (a link's 2,500,000 sat at 2,000,000 before; 5,000,000,000 beyond its end), never a number near it."""
    return sorted({*DOWNLOAD_STEPS, int(count)})


def _seed(key: str, value) -> None:
    """A widget's start value, from the link (or the last value on this page) when the widget has none yet."""
    if key not in ss:
        ss[key] = value


# ---------------------------------------------------------------- inputs

loaded = current_model()
comparison = latest_comparison(loaded)
left, right = st.columns([3, 2], gap="large")
with left:
    _seed("pricing:provider", link.provider)
    provider_id = st.selectbox(
        "Provider", provider_ids, key="pricing:provider",
        format_func=lambda pid: providers[pid].name if pid in providers else "Custom flat price",
    )  # fmt: skip
    _seed("pricing:downloads", int(link.downloads))
    _seed("pricing:downloads_preset", int(ss["pricing:downloads"]))

    def _from_slider() -> None:
        ss["pricing:downloads"] = ss["pricing:downloads_preset"]

    def _from_exact() -> None:  # the slider follows a typed count exactly (it stayed at 100,000 beside 250,000)
        ss["pricing:downloads_preset"] = int(ss["pricing:downloads"])

    st.select_slider(
        "Downloads per month", options=_slider_steps(ss["pricing:downloads"]), key="pricing:downloads_preset",
        on_change=_from_slider, format_func=lambda v: f"{v:,}",
    )  # fmt: skip
    c1, c2 = st.columns(2)  # below the slider: "…or exactly" reads as its alternative
    downloads = int(c1.number_input(
        "…or exactly", min_value=0, max_value=int(pricing.MAX_DOWNLOADS), step=1000, key="pricing:downloads",
        help="The slider sets round numbers; type any count here.", on_change=_from_exact,
    ))  # fmt: skip
    _seed("pricing:growth", float(link.growth * 100))
    growth = c2.number_input("Growth per month (%)", min_value=float(pricing.MIN_GROWTH * 100),
                             max_value=float(pricing.MAX_GROWTH * 100), step=1.0, key="pricing:growth",
                             help="5 means 5% more downloads every month, compounded month by month.")  # fmt: skip
with right:
    _seed("pricing:delivery", link.delivery)
    delivery = st.radio(
        "Delivery", list(pricing.DELIVERIES), horizontal=True, key="pricing:delivery",
        help="How the CDN serves the file: the measured raw, gzip -9 or brotli size.",
    )  # fmt: skip
    _seed("pricing:currency", link.currency)
    currency_text = st.text_input(
        "Currency symbol", max_chars=4, key="pricing:currency",
        help="Only the label changes: preset prices are list prices in US dollars.",
    )  # fmt: skip
    try:
        currency = pricing.parse_currency_symbol(currency_text)
    except ShrinkRayError:
        currency = links.DEFAULT_CURRENCY
        st.caption(f"A currency symbol is 1 to 4 characters; showing {currency}.")

with friendly_errors("Setting the prices"):
    base = (pricing.custom_provider(link.price if link.price is not None else links.DEFAULT_PRICE)
            if provider_id == CUSTOM else providers[provider_id])  # fmt: skip
    start = links.provider_for(link, providers) if provider_id == link.provider else base
    st.markdown("**Prices per GiB** (edit to try other prices; leave the last tier's end empty: it means "
                "*and above*)")
    table_key = f"pricing:tiers:{provider_id}"
    if table_key not in ss:  # the editor's starting table must stay the same while its edits apply to it
        ss[f"{table_key}:start"] = [
            {"up to GiB in the month": None if t.up_to_gib is None else float(t.up_to_gib),
             "price per GiB": float(t.price_per_gib)} for t in start.tiers
        ]  # fmt: skip
        ss[f"pricing:free:{provider_id}"] = float(start.free_gib_per_month)
    tiers = pd.DataFrame(ss[f"{table_key}:start"]).astype("float64")  # no end: an empty cell, not "None"
    # placeholder: an empty cell reads as empty (Streamlit writes "None" in it by default)
    edited = st.data_editor(tiers, num_rows="dynamic", hide_index=True, key=table_key, width="stretch", placeholder="",
                            column_config={"up to GiB in the month": st.column_config.NumberColumn(
                                               help="Empty: and above (the last tier has no end)", format="localized"),
                                           "price per GiB": st.column_config.NumberColumn(format="%.4f")})  # fmt: skip
    free = st.number_input("Free GiB per month", min_value=0.0, max_value=float(pricing.MAX_FREE_GIB), step=10.0,
                           key=f"pricing:free:{provider_id}")  # fmt: skip
    rows = [(None if pd.isna(r["up to GiB in the month"]) else r["up to GiB in the month"], r["price per GiB"])
            for r in edited.to_dict("records") if not pd.isna(r["price per GiB"])]  # fmt: skip
    provider = pricing.with_prices(base, rows, free)
    if base.source_url:
        st.caption(f"Source: {base.source_url} (checked {base.checked}). {md(app_words(base.notes))}")

    # ------------------------------------------------------------ what is priced
    run_id = ss.get("run_id")
    shared = ss.get("pricing:shared_sizes")
    standing: dict[str, advice.Standing] = {}
    measured: links.Sizes | None = None
    if comparison is not None:
        standing = advice.standing(comparison, delivery)
        best = [k for k, s in standing.items() if s.recommended]
        # The original first, then the recommended variant, then the others as measured.
        order = [ORIGINAL, *best, *[r.key for r in comparison.variants if r.key not in best]]
        measured = links.comparison_sizes(comparison, order)
    if shared and measured is not None and (shared == measured or ss.get("pricing:use_measured")):
        shared = None
    if shared:
        sizes_all, source_run = shared, ss.get("pricing:shared_run")
        st.caption(md("Sizes: the measured raw / gzip -9 / brotli sizes from the shared link" +
                      (f" (run {source_run})." if source_run else ".")))  # fmt: skip
        if measured is not None and st.button("Price my own measured variants instead", icon=":material/swap_horiz:"):
            ss["pricing:use_measured"] = True
            st.rerun()
    elif measured is not None:
        sizes_all, source_run = measured, run_id
        st.caption(md(f"Sizes: the measured {delivery} sizes of {comparison.name} and its variants (from Shrink)."))
    else:
        source_run = None
        typed = link.sizes if link.sizes and links.is_typed(link.sizes) else None
        _seed("pricing:sizes_text", links.sizes_text(links.served(typed, "raw")) if typed else links.EXAMPLE_SIZES_TEXT)
        sizes_text = st.text_input(
            "Sizes to price (no measured model yet): LABEL=SIZE, comma-separated", key="pricing:sizes_text",
            help="Sizes take units: 52428800, 50MiB, 1.5GB (GB = 10^9 bytes, GiB = 2^30). The first is the reference.",
        )  # fmt: skip
        sizes_all = links.same_sizes(links.parse_sizes_text(sizes_text))
    sizes = links.served(sizes_all, delivery)
    notes = links.standing_marks(standing) if standing and not shared else (ss.get("pricing:shared_marks") or {}) if shared else {}

    # ------------------------------------------------------------ the address: replaced, never pushed
    edits = links.edited_tiers(base, provider)
    now = links.PricingLink(
        provider=provider_id, downloads=downloads, delivery=delivery,
        growth=Decimal(str(round(growth, 4))) / 100, currency=currency,
        price=base.tiers[0].price_per_gib if provider_id == CUSTOM else None,
        tiers=edits[0] if edits else None, free=edits[1] if edits else None,
        sizes=None if not (shared or measured is not None) and sizes_all == links.same_sizes(
            links.parse_sizes_text(links.EXAMPLE_SIZES_TEXT)) else sizes_all,
        run=source_run, marks=notes or None,
    )  # fmt: skip
    ss["pricing:link"] = now
    query = links.encode_pricing(now)
    # The link's problems are shown until the what-if is changed (then they are about a link no longer in use).
    if ss.setdefault("pricing:first_query", query) != query:
        ss["pricing:problems"] = []
    script = json.dumps("?" + query).replace("<", "\\u003c")
    st.html(
        f"<script>(() => {{ const q = {script}; if (window.location.search !== q) "
        "window.history.replaceState(window.history.state, '', window.location.pathname + q); })();</script>",
        unsafe_allow_javascript=True, width="content",
    )  # fmt: skip

    # ------------------------------------------------------------ results
    if not sizes:
        st.info("Give at least one size to price.")
        st.stop()
    labels = list(sizes)
    reference = ORIGINAL if ORIGINAL in sizes else labels[0]
    rate = now.growth
    estimates = {k: pricing.cost_for(v, downloads, provider, growth=rate) for k, v in sizes.items()}

    def money(amount) -> str:
        return pricing.format_amount(amount, currency)

    st.markdown(f"#### Cost per variant at {downloads:,} downloads a month")
    per_row = 3
    for start_index in range(0, len(labels), per_row):
        row = st.columns(per_row)
        for column, label in zip(row, labels[start_index:start_index + per_row], strict=False):
            est, base_est = estimates[label], estimates[reference]
            mark = notes.get(label, "")
            shippable = not any(w in mark for w in ("fails", "slower", "not measured"))
            change_month, change_year = est.monthly - base_est.monthly, est.yearly - base_est.yearly
            with column.container(border=True):
                st.markdown(f"**{md(label)}**" + (" (reference)" if label == reference else ""))
                for word in [w for w in mark.split(", ") if w]:
                    st.badge(word, color="green" if word == "recommended" else "red" if "fails" in word else "orange",
                             icon=":material/thumb_up:" if word == "recommended" else ":material/warning:")  # fmt: skip
                month = year = st  # stacked: a year's amount does not fit beside the month's in a third of the page
                same = label == reference or abs(change_month) < Decimal("0.005")
                month.metric("per month", money(est.monthly),
                             None if same else f"{'-' if change_month < 0 else '+'}{money(abs(change_month))}",
                             delta_color="inverse" if shippable else "off",
                             help=f"{format_bytes(sizes[label])} ({sizes[label]:,} bytes) served {delivery}"
                             + ("" if shippable else ". Not for shipping as it is: see the Shrink page."))  # fmt: skip
                year.metric("per year", money(est.yearly),
                            None if same else f"{'-' if change_year < 0 else '+'}{money(abs(change_year))}",
                            delta_color="inverse" if shippable else "off")  # fmt: skip

    grid = pricing.log_downloads_grid(100, 10**9)
    curve_label = {k: f"{k} ({notes[k]})" if notes.get(k) else k for k in sizes}
    curves = pricing.cost_curve({curve_label[k]: v for k, v in sizes.items()}, provider, grid)
    palette = charts.variant_colors(comparison) if comparison is not None else {}  # as on Compare (sizes are best first)
    st.plotly_chart(
        charts.cost_curve_chart(curves, grid, current_downloads=float(downloads) or None, currency_symbol=currency,
                                provider_name=provider.name, delivery=delivery,
                                colors={curve_label[k]: palette[k] for k in sizes if k in palette}),
        width="stretch", theme="streamlit",
    )  # fmt: skip
    # money first: on a narrow page the grid scrolls sideways, and what a year costs and saves stays in view
    frame = pd.DataFrame(
        [{"variant": csv_cell(k), f"cost per year ({currency})": round(float(e.yearly), 2),
          f"saving per year ({currency})": round(float(estimates[reference].yearly - e.yearly), 2),
          f"cost per month ({currency})": round(float(e.monthly), 2),
          f"bytes served ({delivery})": sizes[k], "GiB per month": float(e.gib_per_month),
          f"per 1M downloads ({currency})": None if e.per_million_downloads is None else round(float(e.per_million_downloads), 2),
          "standing": notes.get(k, "reference" if k == reference else "")}
         for k, e in estimates.items()]
    )  # fmt: skip
    # Short headers (the full ones in their help and in the CSV): the full ones made the table wider than a
    # laptop's page, so it scrolled sideways and cut its last column off.
    short = {f"bytes served ({delivery})": ("bytes", f"Bytes served per download ({delivery})"),
             "GiB per month": ("GiB/month", "GiB served in the first month"),
             f"cost per month ({currency})": (f"{currency}/month", "Cost of the first month"),
             f"cost per year ({currency})": (f"{currency}/year", "Cost of 12 months, with the growth rate applied"),
             f"per 1M downloads ({currency})": (f"{currency} per 1M", "Cost per million downloads at this volume"),
             f"saving per year ({currency})": (f"{currency} saved/year", "Saving per year against the reference")}  # fmt: skip
    money = {f"cost per month ({currency})", f"cost per year ({currency})", f"per 1M downloads ({currency})",
             f"saving per year ({currency})", "GiB per month"}  # two decimals each, so the column lines up
    columns = {c: st.column_config.NumberColumn(label, help=md(why), format="%.2f" if c in money else "localized")
               for c, (label, why) in short.items()}  # labels are plain text  # fmt: skip
    columns["standing"] = st.column_config.TextColumn("standing", width="medium")
    columns["variant"] = st.column_config.TextColumn("variant")  # a name from a link or a model: data, never a link
    st.dataframe(frame, hide_index=True, width="stretch", column_config=columns, placeholder="–")  # not "None"
    st.download_button("Download the table (CSV)", frame.to_csv(index=False), "egress-costs.csv", "text/csv",
                       icon=":material/table:")  # fmt: skip
    st.caption(
        "Per month = the first month; per year = 12 months with the growth rate applied month by month, each "
        "month priced on its own tiers after the free allowance. " + pricing.UNIT_NOTE + "."
    )
    with st.expander("Share this what-if", icon=":material/link:"):
        base_url = (st.context.url or "").split("?", 1)[0]
        st.code(f"{base_url}?{query}", language=None, wrap_lines=True)
        st.caption("The link holds the settings above and the sizes priced, so it shows the same money in any "
                   "browser" + (", and opens the run it came from while that run is kept." if source_run else "."))  # fmt: skip

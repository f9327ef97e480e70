"""Pricing page: what the shrinking is worth in CDN egress, as a shareable what-if."""

from decimal import Decimal

import pandas as pd
import streamlit as st

from app_ui.controls import app_message, friendly_errors
from app_ui.state import current_model, latest_comparison
from shrinkray import charts, pricing
from shrinkray.compare import ORIGINAL
from shrinkray.errors import ShrinkRayError
from shrinkray.text_safety import csv_cell
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes

st.title("Pricing")
st.write(
    "Model files are downloaded again and again, and egress is billed per GiB (2^30 bytes). "
    "Set the downloads and the provider to see what each variant costs a month and a year. "
    "Every setting is kept in the page address: copy the link to share this what-if."
)

qp = st.query_params
providers = pricing.load_providers()
CUSTOM = "custom"
provider_ids = [*providers, CUSTOM]
DOWNLOAD_STEPS = [10**k * m for k in range(2, 9) for m in (1, 2, 5)] + [10**9]


def _param(name: str, default: str) -> str:
    value = qp.get(name)
    return value if isinstance(value, str) and value != "" else default


def _from_link(name: str, default: str, parse, label: str):
    """The link's value, parsed (and bounded) by the engine exactly as the CLI parses its flags; a value the
    engine refuses is named in a message and the default is shown instead (never a traceback or a silent 0)."""
    try:
        return parse(_param(name, default))
    except ShrinkRayError as exc:
        st.error(md(f"The link's {label} ({name}={_param(name, default)}) was not used: {app_message(exc)} "
                    f"Showing {default} instead."), icon=":material/link_off:")  # fmt: skip
        return parse(default)


start_provider = _param("provider", pricing.default_provider_id())
if start_provider not in provider_ids:
    st.warning(md(f"Unknown provider '{start_provider}' in the link; showing {pricing.default_provider_id()}."))
    start_provider = pricing.default_provider_id()
start_downloads = int(_from_link("downloads", "100000", pricing.parse_downloads, "downloads per month"))
start_delivery = _param("delivery", "brotli")
start_delivery = start_delivery if start_delivery in ("raw", "gzip", "brotli") else "brotli"
start_growth = float(_from_link("growth", "0", lambda v: pricing.parse_growth(f"{v}%"), "monthly growth in %") * 100)
start_currency = _from_link("currency", "$", pricing.parse_currency_symbol, "currency symbol")
start_price = _from_link("price", "0.12", pricing.parse_price, "price per GiB")
start_free = _from_link("free", "0", pricing.parse_free_gib, "free GiB per month")

# ---------------------------------------------------------------- what is served

loaded = current_model()
comparison = latest_comparison(loaded)
left, right = st.columns([3, 2], gap="large")
with left:
    provider_id = st.selectbox(
        "Provider", provider_ids, index=provider_ids.index(start_provider),
        format_func=lambda pid: providers[pid].name if pid in providers else "Custom flat price",
    )  # fmt: skip
    c1, c2 = st.columns(2)
    if "downloads" not in st.session_state:
        st.session_state["downloads"] = start_downloads
        st.session_state["downloads_preset"] = min(DOWNLOAD_STEPS, key=lambda v: abs(v - start_downloads))

    def _from_slider() -> None:
        st.session_state["downloads"] = st.session_state["downloads_preset"]

    st.select_slider(
        "Downloads per month", options=DOWNLOAD_STEPS, key="downloads_preset", on_change=_from_slider,
        format_func=lambda v: f"{v:,}",
    )  # fmt: skip
    downloads = c1.number_input(
        "…or exactly", min_value=0, max_value=int(pricing.MAX_DOWNLOADS), step=1000, key="downloads",
        help="The slider sets round numbers; type any count here.",
    )  # fmt: skip
    growth = c2.number_input("Growth per month (%)", min_value=float(pricing.MIN_GROWTH * 100),
                             max_value=float(pricing.MAX_GROWTH * 100), value=start_growth, step=1.0)  # fmt: skip
with right:
    delivery = st.radio(
        "Delivery", ["raw", "gzip", "brotli"], index=["raw", "gzip", "brotli"].index(start_delivery),
        horizontal=True, help="How the CDN serves the file: the measured raw, gzip -9 or brotli size.",
    )  # fmt: skip
    currency = st.text_input(
        "Currency symbol", value=start_currency, max_chars=4,
        help="Only the label changes: preset prices are list prices in US dollars.",
    )  # fmt: skip

with friendly_errors("Setting the prices"):
    base = pricing.custom_provider(start_price, start_free) if provider_id == CUSTOM else providers[provider_id]
    tiers_text = _param("tiers", "") if provider_id == _param("provider", "") else ""
    try:
        start = pricing.with_prices(base, pricing.decode_tiers(tiers_text), start_free) if tiers_text else base
    except ShrinkRayError as exc:
        st.error(md(f"The link's prices (tiers={tiers_text}) were not used: {app_message(exc)} "
                    f"Showing {base.name}'s prices instead."), icon=":material/link_off:")  # fmt: skip
        start = base
    st.markdown("**Prices per GiB** (edit to try other prices; leave the last tier's end empty)")
    table = pd.DataFrame(
        [{"up to GiB in the month": None if t.up_to_gib is None else float(t.up_to_gib),
          "price per GiB": float(t.price_per_gib)} for t in start.tiers]
    )  # fmt: skip
    edited = st.data_editor(table, num_rows="dynamic", hide_index=True, key=f"tiers:{provider_id}", width="stretch")
    free = st.number_input("Free GiB per month", min_value=0.0, max_value=float(pricing.MAX_FREE_GIB),
                           value=float(start.free_gib_per_month), step=10.0)  # fmt: skip
    rows = [(r["up to GiB in the month"], r["price per GiB"]) for r in edited.to_dict("records")
            if r["price per GiB"] is not None and r["price per GiB"] == r["price per GiB"]]  # fmt: skip
    provider = pricing.with_prices(base, rows, free)
    if base.source_url:
        st.caption(f"Source: {base.source_url} (checked {base.checked}). {base.notes}")

    if comparison is not None:
        sizes = {r.key: r.sizes.get(delivery) for r in comparison.all if r.sizes is not None}
        st.caption(md(f"Sizes: the measured {delivery} sizes of {comparison.name} and its variants (from Shrink)."))
    else:
        sizes_text = st.text_input(
            "Sizes to price (no measured model yet): LABEL=SIZE, comma-separated",
            value=_param("sizes", "original=50MiB,shrunk=13MiB"),
            help="Sizes take units: 52428800, 50MiB, 1.5GB (GB = 10^9 bytes, GiB = 2^30). The first is the reference.",
        )  # fmt: skip
        sizes = {}
        for item in [t.strip() for t in sizes_text.split(",") if t.strip()]:
            label, sep, size = item.rpartition("=")
            sizes[label.strip() if sep else f"file {len(sizes) + 1}"] = pricing.parse_size(size if sep else item)

    # Reflect every input in the address so the what-if can be shared.
    params = {"provider": provider_id, "downloads": str(int(downloads)), "delivery": delivery,
              "growth": f"{growth:g}", "currency": currency}  # fmt: skip
    if provider.tiers != base.tiers or provider.free_gib_per_month != base.free_gib_per_month:
        params["tiers"] = pricing.encode_tiers(provider)
        params["free"] = f"{provider.free_gib_per_month.normalize():f}"
    if comparison is None:
        params["sizes"] = sizes_text
    for key, value in params.items():
        if qp.get(key) != value:
            qp[key] = value
    for key in [k for k in qp if k not in params]:
        del qp[key]

    # ------------------------------------------------------------ results
    if not sizes:
        st.info("Give at least one size to price.")
        st.stop()
    labels = list(sizes)
    reference = ORIGINAL if ORIGINAL in sizes else labels[0]
    rate = Decimal(str(round(growth, 4))) / 100  # the widget's float, as typed (4 decimals of a percent)
    estimates = {k: pricing.cost_for(v, int(downloads), provider, growth=rate) for k, v in sizes.items()}

    def money(amount) -> str:
        return pricing.format_money(Decimal(amount), "USD").replace("$", currency)

    st.markdown(f"#### Cost per variant at {int(downloads):,} downloads a month")
    cols = st.columns(min(len(labels), 5))
    for index, label in enumerate(labels):
        est, base_est = estimates[label], estimates[reference]
        saving_year = base_est.yearly - est.yearly
        with cols[index % len(cols)]:
            st.metric(f"{md(label)}: per month", money(est.monthly),
                      None if label == reference else f"saves {money(base_est.monthly - est.monthly)}",
                      delta_color="normal", help=f"{format_bytes(sizes[label])} served {delivery}")  # fmt: skip
            st.metric(f"{md(label)}: per year", money(est.yearly),
                      None if label == reference else f"saves {money(saving_year)}", delta_color="normal")  # fmt: skip

    grid = pricing.log_downloads_grid(100, 10**9)
    curves = pricing.cost_curve(sizes, provider, grid)
    st.plotly_chart(
        charts.cost_curve_chart(curves, grid, current_downloads=float(downloads) or None, currency_symbol=currency,
                                provider_name=provider.name, delivery=delivery),
        width="stretch",
    )  # fmt: skip
    frame = pd.DataFrame(
        [{"variant": csv_cell(k), f"bytes served ({delivery})": sizes[k], "GiB per month": float(e.gib_per_month),
          f"cost per month ({currency})": round(float(e.monthly), 2), f"cost per year ({currency})": round(float(e.yearly), 2),
          f"per 1M downloads ({currency})": None if e.per_million_downloads is None else round(float(e.per_million_downloads), 2),
          f"saving per year ({currency})": round(float(estimates[reference].yearly - e.yearly), 2)}
         for k, e in estimates.items()]
    )  # fmt: skip
    st.dataframe(frame, hide_index=True, width="stretch")
    st.download_button("Download the table (CSV)", frame.to_csv(index=False), "egress-costs.csv", "text/csv",
                       icon=":material/table:")  # fmt: skip
    st.caption(
        "Per month = the first month; per year = 12 months with the growth rate applied month by month, each "
        "month priced on its own tiers after the free allowance. " + pricing.UNIT_NOTE + "."
    )

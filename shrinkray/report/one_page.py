"""One page to send: the headline, what changes, size and wait per variant and the money, as one HTML page.

No scripts and no requests: the bars are drawn with CSS, so the page reads in any browser or mail client,
offline, and prints to a single A4 or Letter page (``@page`` sets the margins; the layout stays within one
page for up to a dozen variants). The numbers are the ones every other surface shows: the same headline
(:func:`~shrinkray.verdict.headline.headline_of`), verdicts (:func:`~shrinkray.verdict.verdict_of`),
waits and costs.
"""

from __future__ import annotations

import html
from datetime import date

from shrinkray import pricing as _pricing
from shrinkray.measure.results import Comparison, VariantResult
from shrinkray.measure.waits import connections, download_seconds
from shrinkray.report import changes
from shrinkray.units import format_bytes, format_seconds
from shrinkray.verdict import verdict_of
from shrinkray.verdict.headline import Headline, default_pricing, headline_of

#: Connections shown as columns (the profiles' ids, slowest first); the headline's own is always among them.
COLUMNS = ("3g", "4g", "cable")
#: Worst examples shown of a single output (of several: one each), and outputs shown (those that changed most):
#: the page stays one page.
WORST_SHOWN = 2
WORST_OUTPUTS = 2

_CSS = """
@page { size: A4; margin: 12mm; }
* { box-sizing: border-box; }
body { font: 10.5pt/1.4 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; color: #1f2328;
       margin: 0 auto; max-width: 186mm; padding: 6mm 0; }
h1 { font-size: 15pt; margin: 0 0 2mm; } h2 { font-size: 11.5pt; margin: 5mm 0 2mm; }
.card { border: 1.5px solid #1a7f37; border-radius: 3mm; padding: 3mm 4mm; }
.card.keep { border-color: #9a6700; }
.big { font-size: 13pt; font-weight: 650; margin: 0 0 1.5mm; }
.parts { display: grid; grid-template-columns: repeat(3, 1fr); gap: 2mm; margin: 2mm 0; }
.part b { display: block; font-size: 12pt; } .part span { color: #57606a; font-size: 9pt; }
.verdict { margin: 1mm 0 0; }
table { border-collapse: collapse; width: 100%; font-size: 9.5pt; }
th, td { text-align: left; padding: 1mm 1.5mm; border-bottom: 1px solid #d0d7de; vertical-align: top; }
td.n, th.n { text-align: right; white-space: nowrap; }
.bar { height: 2.6mm; background: #0969da; border-radius: 1mm; min-width: .6mm; }
.bar.orig { background: #8a8a8a; }
code { font-size: 9pt; } td:first-child { white-space: nowrap; }
.pass { color: #1a7f37; } .fail { color: #cf222e; } .undecided { color: #9a6700; }
.foot { color: #57606a; font-size: 8.5pt; margin-top: 5mm; }
.worst { font-size: 9pt; } .worst .sr-frame { max-width: 24mm; } .worst .sr-ex { break-inside: avoid; padding: 1mm 0; }
.worst .sr-out { font-size: 9.5pt; margin: 1.5mm 0 .5mm; } .worst td:first-child { white-space: normal; }
.worst .sr-pair { grid-template-columns: 1fr 1fr; } .worst table tr:nth-child(n+4) { display: none; }
.worst table { font-size: 8.5pt; } .worst .sr-changes td, .worst .sr-changes th { line-height: 1.15; padding: 0 1.5mm 0 0; }
.worst p { margin: 1mm 0; }
"""


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _card(h: Headline) -> str:
    if h.variant is None:
        return (f'<div class="card keep"><p class="big">Keep the original ({_h(h.size_text())})</p>'
                f'<p class="verdict">{_h(h.reason)}</p></div>')  # fmt: skip
    parts = [f'<div class="part"><b>{_h(h.size_text().split(" as served")[0])}</b><span>as served ({_h(h.delivery)})'
             "</span></div>"]  # fmt: skip
    if h.wait is not None and h.wait.variant_s is not None:
        w = h.wait
        parts.append(f'<div class="part"><b>{_h(format_seconds(w.variant_s))} instead of {_h(format_seconds(w.original_s))}'
                     f"</b><span>download on {_h(w.connection.describe())}</span></div>")  # fmt: skip
    if h.money_text():
        amount = _pricing.format_money(abs(h.saving_per_year), h.currency)
        parts.append(f'<div class="part"><b>{_h(amount)} a year {"less" if h.saving_per_year >= 0 else "more"}</b>'
                     f"<span>at {_h(h.pricing_text)}</span></div>")  # fmt: skip
    ready = f'<p class="verdict">{_h(h.ready_text().capitalize())}.</p>' if h.ready_text() else ""
    return (f'<div class="card"><p class="big">{_h(h.model)} → {_h(h.variant)}</p>'
            f'<div class="parts">{"".join(parts)}</div><p class="verdict">{_h(h.verdict_sentence)}</p>{ready}</div>')  # fmt: skip


def _rows(c: Comparison, delivery: str) -> list[VariantResult]:
    """The original and every variant that was made and measured, smallest served first after the original."""
    made = [r for r in c.variants if r.ok and r.sizes is not None]
    return [c.original, *sorted(made, key=lambda r: r.sizes.get(delivery))]


def _size_table(c: Comparison, h: Headline, choice: _pricing.PricingChoice) -> str:
    delivery = choice.delivery
    rows = _rows(c, delivery)
    largest = max((r.sizes.get(delivery) for r in rows if r.sizes is not None), default=1) or 1
    profiles = [p for p in connections() if p.id in COLUMNS or p.id == h.connection]
    costs = {vc.key: vc for vc in _pricing.comparison_costs(c, choice)}
    head = "".join(f'<th class="n">{_h(p.name)}</th>' for p in profiles)
    lines = [f'<table><tr><th>File</th><th>Size as served ({_h(delivery)})</th><th></th>{head}'
             '<th class="n">Cost a year</th><th>Verdict</th></tr>']  # fmt: skip
    for r in rows:
        if r.sizes is None:
            continue
        served = r.sizes.get(delivery)
        waits = "".join(f'<td class="n">{_h(format_seconds(download_seconds(served, p)))}</td>' for p in profiles)
        cost = costs.get(r.key)
        yearly = _pricing.format_money(cost.estimate.yearly, choice.provider.currency) if cost and cost.estimate else "–"
        is_original = r is c.original
        verdict = "the reference" if is_original else verdict_of(r).label
        status = "" if is_original else verdict_of(r).status
        width = 100 * served / largest
        lines.append(
            f"<tr><td><code>{_h(r.key)}</code></td><td class=\"n\">{_h(format_bytes(served))}</td>"
            f'<td style="width:28%"><div class="bar{" orig" if is_original else ""}" style="width:{width:.1f}%"></div></td>'
            f'{waits}<td class="n">{_h(yearly)}</td><td class="{status}">{_h(verdict)}</td></tr>'
        )  # fmt: skip
    lines.append("</table>")
    return "".join(lines)


def _what_changes(c: Comparison, h: Headline) -> str:
    """Each output of the recommended variant judged in its own terms (one line per output)."""
    if h.variant is None:
        return ""
    verdict = verdict_of(c.get(h.variant))
    items = "".join(f'<tr><td><code>{_h(o.output)}</code></td><td class="{o.status}">{_h(o.sentence)}</td></tr>'
                    for o in verdict.outputs)  # fmt: skip
    if not items:
        return ""
    shown = sorted(c.get(h.variant).examples, key=lambda oe: -oe.changed / max(oe.inputs, 1))[:WORST_OUTPUTS]
    each = WORST_SHOWN if len(shown) == 1 else 1  # the worst input of each output, two of a single one
    worst = "".join(changes.examples_html(oe, h.variant, each) for oe in shown)
    others = len(c.get(h.variant).examples) - len(shown)
    more = f"<p>{others} other output{'s' if others > 1 else ''}: in the full report.</p>" if others > 0 else ""
    worst = (f'<div class="worst"><p>The inputs where it differs most from the original, worst first:</p>{worst}{more}'
             "</div>" if worst else "")  # fmt: skip
    return f"<h2>What changes in {_h(h.variant)}'s outputs</h2><table>{items}</table>{worst}"


def to_one_page(c: Comparison, pricing: _pricing.PricingChoice | None = None, connection: str | None = None,
                today: date | None = None) -> str:  # fmt: skip
    """The one-page summary of ``c`` as a self-contained HTML document (no scripts)."""
    choice = pricing or default_pricing()
    h = headline_of(c, choice, connection)
    profile_sources = "; ".join(f"{p.name}: {p.source}" for p in connections() if p.id in COLUMNS)
    when = (today or date.today()).isoformat()
    return "".join([
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{_h(c.name)}: shrink result</title><style>{_CSS}{changes.CSS}</style></head><body>",
        f"<h1>{_h(c.name)}: what shrinking it changes</h1>",
        _card(h),
        "<h2>Size, wait and cost of each file</h2>",
        _size_table(c, h, choice),
        _what_changes(c, h),
        '<p class="foot">',
        f"Sizes as a server sends them ({_h(choice.delivery)}). Waits: size × 8 ÷ bandwidth + one round trip "
        f"({_h(profile_sources)}). Cost: {_h(choice.describe())}. Inputs: {_h(c.input_note.split('; ')[0] or '–')}. "
        f"Made by Shrink Ray Studio on {_h(when)}.</p>",
        "</body></html>\n",
    ])  # fmt: skip

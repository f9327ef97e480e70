"""The headline of a finished comparison: what a stakeholder reads first, in one card or one line.

Four parts, each from one place: the size as served (the delivery the pricing uses, brotli by default),
the wait a visitor feels on a named connection (:mod:`shrinkray.measure.waits`), the money a year from
the pricing settings (:mod:`shrinkray.pricing`), and the recommended variant's one verdict sentence
(:func:`shrinkray.verdict.verdict_of`). With no variant to recommend, the headline says to keep the
original and why, and carries no saving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shrinkray import pricing
from shrinkray.measure.results import Comparison
from shrinkray.measure.waits import Connection, connections, download_seconds, get_connection
from shrinkray.units import format_bytes, format_seconds
from shrinkray.verdict.advice import advise, recommended
from shrinkray.verdict.parity_verdict import verdict_of

#: Downloads a month the headline prices when no pricing was chosen (the Pricing page's default).
DEFAULT_DOWNLOADS = Decimal(100_000)


@dataclass(frozen=True)
class Wait:
    """The download wait for the original and the recommended variant on one connection."""

    connection: Connection
    original_s: float
    variant_s: float | None

    @property
    def speedup(self) -> float | None:
        return None if not self.variant_s else self.original_s / self.variant_s

    def sentence(self) -> str:
        """'on 4G (9 Mbps, 170 ms) it downloads in 9.9 s instead of 37 s (3.7x faster)'."""
        where = f"on {self.connection.describe()}"
        if self.variant_s is None:
            return f"{where} it downloads in {format_seconds(self.original_s)}"
        return (f"{where} it downloads in {format_seconds(self.variant_s)} instead of {format_seconds(self.original_s)}"
                f" ({self.speedup:.1f}x faster)")  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"connection": self.connection.id, "name": self.connection.name, "down_bps": self.connection.down_bps,
                "rtt_ms": self.connection.rtt_ms, "original_s": self.original_s, "variant_s": self.variant_s}  # fmt: skip


@dataclass(frozen=True)
class Headline:
    """The four parts of a finished run's headline, and the same in one line of text."""

    model: str
    delivery: str
    original_bytes: int | None
    variant: str | None = None  # the recommended variant's key; None: keep the original
    variant_bytes: int | None = None
    waits: tuple[Wait, ...] = ()
    connection: str = ""  # the id of the wait the headline quotes
    saving_per_year: Decimal | None = None
    currency: str = "USD"
    pricing_text: str = ""  # '100,000 downloads a month on Google Cloud Storage'
    verdict_status: str = ""
    verdict_label: str = ""  # 'Passes', 'Undecided'...
    verdict_sentence: str = ""
    reason: str = ""  # why the original is kept (no variant)
    #: download on the quoted connection + load + first inference in the visitor's browser (ONNX Runtime Web),
    #: when the browser panel ran both files; None otherwise
    original_ready_s: float | None = None
    variant_ready_s: float | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def reduction(self) -> float | None:
        """The share of the served bytes the variant saves (0.73 = 73% smaller)."""
        if not self.original_bytes or self.variant_bytes is None:
            return None
        return 1 - self.variant_bytes / self.original_bytes

    @property
    def wait(self) -> Wait | None:
        return next((w for w in self.waits if w.connection.id == self.connection), None)

    def size_text(self) -> str:
        """'41.00 MiB → 11.20 MiB (−73%) as served (brotli)'."""
        if self.original_bytes is None:
            return "sizes were not measured"
        if self.variant_bytes is None:
            return f"{format_bytes(self.original_bytes)} as served ({self.delivery})"
        change = self.reduction or 0.0
        sign = "−" if change >= 0 else "+"
        return (f"{format_bytes(self.original_bytes)} → {format_bytes(self.variant_bytes)} "
                f"({sign}{abs(change):.0%}) as served ({self.delivery})")  # fmt: skip

    def money_text(self) -> str:
        """'$1,340.00 a year less at 100,000 downloads a month on Google Cloud Storage'."""
        if self.saving_per_year is None:
            return ""
        amount = pricing.format_money(abs(self.saving_per_year), self.currency)
        more_or_less = "less" if self.saving_per_year >= 0 else "more"
        return f"{amount} a year {more_or_less} at {self.pricing_text}"

    def ready_text(self) -> str:
        """'ready in 1.2 s instead of 3.0 s on 4G (download, load and first run in the browser)'."""
        if self.original_ready_s is None or self.variant_ready_s is None or self.wait is None:
            return ""
        return (f"ready in {format_seconds(self.variant_ready_s)} instead of {format_seconds(self.original_ready_s)} "
                f"on {self.wait.connection.name} (download, load and first run in the browser)")  # fmt: skip

    def text(self) -> str:
        """The whole headline in one line, to paste into a message."""
        if self.variant is None:
            parts = [f"{self.model}: keep the original", self.size_text()]
            if self.wait is not None:
                parts.append(self.wait.sentence())
            return "; ".join(parts) + (f". {self.reason}" if self.reason else ".")
        parts = [f"{self.model} with {self.variant}: {self.size_text()}"]
        if self.wait is not None:
            parts.append(self.wait.sentence())
        if self.ready_text():
            parts.append(self.ready_text())
        if self.money_text():
            parts.append(self.money_text())
        return "; ".join(parts) + f". {self.verdict_sentence}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "delivery": self.delivery, "variant": self.variant,
            "original_bytes": self.original_bytes, "variant_bytes": self.variant_bytes, "reduction": self.reduction,
            "waits": [w.as_dict() for w in self.waits], "connection": self.connection,
            "saving_per_year": None if self.saving_per_year is None else float(self.saving_per_year),
            "currency": self.currency, "pricing": self.pricing_text, "verdict_status": self.verdict_status,
            "verdict": self.verdict_sentence, "reason": self.reason, "text": self.text(),
            "original_ready_s": self.original_ready_s, "variant_ready_s": self.variant_ready_s,
        }  # fmt: skip


def default_pricing(delivery: str = "brotli") -> pricing.PricingChoice:
    """The default provider at :data:`DEFAULT_DOWNLOADS` downloads a month, as the Pricing page opens."""
    return pricing.PricingChoice(pricing.get_provider(), DEFAULT_DOWNLOADS, delivery)


def _start_s(comparison: Comparison, key: str) -> float | None:
    """Seconds the visitor's browser took to load ``key`` and run it once (None unless it ran there)."""
    run = next((r for r in getattr(comparison, "browser", None) or [] if r.key == key and r.ok), None)
    if run is None or run.session_ms is None or run.first_run_ms is None:
        return None
    return (run.session_ms + run.first_run_ms) / 1000


def _served(result, delivery: str) -> int | None:
    return result.sizes.get(delivery) if result is not None and result.sizes is not None else None


def headline_of(comparison: Comparison, choice: pricing.PricingChoice | None = None,
                connection: str | None = None) -> Headline:  # fmt: skip
    """The headline of ``comparison``: recommended variant (as :func:`~shrinkray.verdict.advice.recommended`
    chooses it), its size and waits against the original's, its yearly saving under ``choice`` (default:
    :func:`default_pricing`) and its verdict sentence."""
    choice = choice or default_pricing()
    delivery = choice.delivery
    quoted = get_connection(connection).id
    original_bytes = _served(comparison.original, delivery)
    best = recommended(comparison, delivery)
    best_bytes = _served(best, delivery)
    waits = ()
    if original_bytes is not None:
        waits = tuple(Wait(c, download_seconds(original_bytes, c),
                           None if best_bytes is None else download_seconds(best_bytes, c))
                      for c in connections())  # fmt: skip
    common = {"model": comparison.name, "delivery": delivery, "original_bytes": original_bytes,
              "waits": waits, "connection": quoted, "currency": choice.provider.currency}  # fmt: skip
    if best is None:
        advice = advise(comparison, delivery)
        reason = advice[0].problem or advice[0].text if advice else ""
        return Headline(**common, reason=reason)
    costs = {vc.key: vc for vc in pricing.comparison_costs(comparison, choice)}
    saving = costs[best.key].saving if best.key in costs else None
    verdict = verdict_of(best)
    where = f"{pricing.format_count(choice.downloads_per_month)} downloads a month on {choice.provider.name}"
    ready = {}
    quoted_wait = next((w for w in waits if w.connection.id == quoted), None)
    starts = (_start_s(comparison, comparison.original.key), _start_s(comparison, best.key))
    if quoted_wait is not None and quoted_wait.variant_s is not None and None not in starts:
        ready = {"original_ready_s": quoted_wait.original_s + starts[0], "variant_ready_s": quoted_wait.variant_s + starts[1]}
    return Headline(**common, **ready, variant=best.key, variant_bytes=best_bytes,
                    saving_per_year=None if saving is None else saving.per_year, pricing_text=where,
                    verdict_status=verdict.status, verdict_label=verdict.label, verdict_sentence=verdict.sentence)  # fmt: skip

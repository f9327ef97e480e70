"""What a browser run says, in words: one line per model, the delivery line, advice and the report's table."""

from __future__ import annotations

from shrinkray.measure.browser import BrowserRun
from shrinkray.measure.results import ORIGINAL
from shrinkray.units import format_bytes
from shrinkray.verdict.parity_verdict import parity_verdict


def summary_line(run: BrowserRun) -> str:
    """One line per model for text reports: timings and parity, or the failure."""
    if not run.ok:
        return run.problem()

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    verdict = "not judged" if run.parity is None else parity_verdict(run.parity).sentence
    return (
        f"{run.key}: download {ms(run.transfer_ms)}, session {ms(run.session_ms)}, first run {ms(run.first_run_ms)}, "
        f"median {ms(run.median_ms)} ({run.runs} runs); parity against the server original {verdict}"
    )


def delivery_line(run: BrowserRun, sizes) -> str:
    """What the browser received against what a host with precompressed files would send (``sizes``: the
    model's measured :class:`~shrinkray.measure.sizes.Sizes`, or None)."""
    if run.transfer_bytes is None:
        return ""
    got = f"{format_bytes(run.transfer_bytes)} as {run.content_encoding or 'uncompressed'}"
    text = f"{run.key}: the browser received {got}"
    if run.model_bytes:
        text += f" for a {format_bytes(run.model_bytes)} file"
    if sizes is not None and getattr(sizes, "brotli", None):
        how = ("gzip -9" if sizes.brotli_encoding == "gzip"  # the smaller file a server has: brotli lost to gzip
               else f"{sizes.brotli_encoding or 'br'}, quality {sizes.brotli_quality}")  # fmt: skip
        best = f"{format_bytes(sizes.brotli)} ({how})"
        text += f"; a host serving precompressed files would send {best}"
    return text


def advice_lines(comparison, runs: list[BrowserRun]) -> list[str]:
    """Plain sentences about the browser runs of ``comparison`` (a leading "!" marks a problem): a model
    that runs on the server but not in ONNX Runtime Web, parity that holds on the server but not in the
    browser, and how the files were delivered."""
    by_key = {run.key: run for run in runs}
    lines: list[str] = []
    original = by_key.get("original")
    same: list[str] = []  # variants failing exactly as the original does: said once
    if original is not None and not original.ok:
        same = [r.key for r in comparison.variants if r.key in by_key and by_key[r.key].error == original.error]
        also = f" Nor do its variants ({', '.join(same)}), with the same error." if same else ""
        lines.append(f"! The original runs on the server but not in {original.runtime} ({original.backend}): "
                     f"{original.error}.{also} Shrinking cannot fix that: run it with a runtime that has this "
                     "operator, or replace the operator in the model.")  # fmt: skip
    for result in comparison.variants:
        run = by_key.get(result.key)
        if run is None or result.key in same:
            continue
        if not run.ok:
            where = "runs on the server but not" if result.ok else "does not run on the server, nor"
            lines.append(f"! {result.key} {where} in {run.runtime} ({run.backend}): {run.error}. "
                         "Do not ship it to web pages; pick a variant that ran here.")  # fmt: skip
        elif run.failed and result.parity is not None and result.parity.passed:
            lines.append(f"! {result.key} passes parity on the server but not in the browser "
                         f"({parity_verdict(run.parity).sentence.rstrip('.')}): "
                         f"{run.runtime} computes it differently. Do not ship it to web pages.")  # fmt: skip
    if runs and runs[0].served_by:
        lines.append(f"Files were sent by {runs[0].served_by}.")
    return lines


def browser_name(user_agent: str) -> str:
    """A short name for a user agent ("HeadlessChrome 142", "Firefox 140"), for chart labels."""
    import re

    for name in ("Edg", "OPR", "Firefox", "HeadlessChrome", "Chrome", "Version"):
        found = re.search(rf"\b{name}/(\d+)", user_agent)
        if found:
            label = {"Edg": "Edge", "OPR": "Opera", "Version": "Safari"}.get(name, name)
            return f"{label} {found.group(1)}"
    return user_agent[:40] or "browser"


#: An empty cell (a plain "-" turns into a list bullet in Markdown tables).
DASH = "–"


def _ms(value: float | None) -> str:
    return DASH if value is None else (f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms")


def median_ratio(runs: dict[str, BrowserRun], key: str) -> float | None:
    """A variant's median in the browser over the original's in the same browser and page (None for the
    original, or where either was not timed)."""
    run, base = runs.get(key), runs.get(ORIGINAL)
    if key == ORIGINAL or run is None or base is None or run.median_ms is None or not base.median_ms:
        return None
    return run.median_ms / base.median_ms


def _ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}x"


def report_table(comparison, runs: list[BrowserRun]) -> tuple[list[str], list[list[str]]]:
    """The browser runs as a table for the reports and the app: one row per model, the server beside it."""
    header = ["model", "received", "download", "session", "first run", "median", "vs original",
              "server median (1 thread)",
              "parity in the browser", "parity on the server"]  # fmt: skip
    rows = []
    by_key = {run.key: run for run in runs}
    for run in runs:
        try:
            server = comparison.get(run.key)
        except KeyError:
            continue
        stats = server.latency_at(1, run.batch) if run.batch is not None else None
        if not run.ok:
            verdict = f"did not run ({run.stage}): see the advice"
        elif run.parity is None:
            verdict = "not judged: outputs too large to send back" if run.note else DASH
        else:
            verdict = parity_verdict(run.parity).sentence
        received = DASH if run.transfer_bytes is None else f"{format_bytes(run.transfer_bytes)} as {run.content_encoding or 'identity'}"
        rows.append([
            run.key, received, _ms(run.transfer_ms), _ms(run.session_ms), _ms(run.first_run_ms),
            f"{_ms(run.median_ms)} ({run.runs} runs)" if run.median_ms is not None else DASH,
            _ratio(median_ratio(by_key, run.key)), _ms(stats.median_ms) if stats else DASH,
            verdict, DASH if server.parity is None else parity_verdict(server.parity).label,
        ])  # fmt: skip
    if any(run.tokens_per_s is not None for run in runs):  # a decoder wrote in the page: its speed and its text
        header = [*header[:6], "tokens/s", "writes", *header[6:]]
        for row, run in zip(rows, [r for r in runs if r.key in {row[0] for row in rows}], strict=True):
            row[6:6] = [DASH if run.tokens_per_s is None else f"{run.tokens_per_s:,.0f}", _writes(run, by_key)]
    return header, rows


def _writes(run: BrowserRun, by_key: dict[str, BrowserRun]) -> str:
    """Whether the page's greedy tokens from the timing prompt are the original's (in the same page)."""
    base = by_key.get(ORIGINAL)
    if not run.generated or base is None or not base.generated or run.key == ORIGINAL:
        return DASH
    same = sum(a == b for a, b in zip(run.generated, base.generated, strict=False))
    if run.generated == base.generated:
        return f"the original's {len(base.generated)} tokens"
    pairs = enumerate(zip(run.generated, base.generated, strict=False))
    first = next((i for i, (a, b) in pairs if a != b), min(len(run.generated), len(base.generated)))
    return f"parts from the original at token {first + 1} ({same} of {len(base.generated)} the same)"


def report_notes(comparison, runs: list[BrowserRun]) -> list[str]:
    """Where the runs were measured, the delivery facts per model and the advice, as sentences."""
    if not runs:
        return []
    first = runs[0]
    threads = f"{first.threads} thread{'s' if (first.threads or 1) > 1 else ''}" if first.threads else "threads unknown"
    start = f"; the runtime itself started in {_ms(first.runtime_start_ms)}" if first.runtime_start_ms is not None else ""
    lines = [f"Measured in {first.user_agent or 'an unknown browser'} with {first.runtime} ({first.backend}, {threads}){start}; "
             f"timed on the server's latency input (batch {first.batch}), median of the runs after the first, in "
             "rounds that run every model once."]  # fmt: skip
    for run in runs:
        try:
            sizes = comparison.get(run.key).sizes
        except KeyError:
            sizes = None
        line = delivery_line(run, sizes)
        if line:
            lines.append(line + ".")
    return lines + [line for line in advice_lines(comparison, runs) if not line.startswith("!")]  # problems: advise()

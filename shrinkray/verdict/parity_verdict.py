"""The one verdict on a variant: pass, fail or undecided, what it rests on, and one plain sentence.

Made here, from the measured parity, and only here: compare's table, ``auto``'s notes, the app's cards,
banner and advice, the browser panel and every report read :func:`verdict_of` and show its sentence as it
is, so one run says one thing everywhere. The sentence is the task's terms ("keeps the top class on 159 of
160 inputs, at least 97.3% with 95% confidence"), never an internal name, and it never tells the user which
flag or button to use: a front end adds that in its own words (``Verdict.undecided``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from shrinkray.measure.confidence import FAIL, PASS, UNDECIDED
from shrinkray.measure.parity import GENERATION, PERPLEXITY, Check, Criterion, OutputParity, Parity, over_limit

#: Statuses beyond the parity's own: the variant could not be made or run, or parity was not measured.
ERROR, UNMEASURED = "error", "unmeasured"
STATUS_WORDS = {PASS: "Passes", FAIL: "Fails", UNDECIDED: "Undecided", ERROR: "Not made", UNMEASURED: "Not judged"}


@dataclass(frozen=True)
class OutputVerdict:
    """One output judged: its kind, the measure that decided, its limit, and what that rests on."""

    output: str
    kind: str
    status: str
    sentence: str
    measure: str = ""
    value: float | None = None
    limit: float | None = None
    decisions: int | None = None
    low: float | None = None  # one-sided 95% bounds of a share of decisions
    high: float | None = None
    severity: float = 0.0  # the share of the allowed error used (1.0 = at the limit)


@dataclass(frozen=True)
class Verdict:
    """A variant's verdict: its status, the output that decided it, and the one sentence every surface shows."""

    status: str
    sentence: str
    outputs: tuple[OutputVerdict, ...] = field(default=())
    samples: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def undecided(self) -> bool:
        return self.status == UNDECIDED

    @property
    def label(self) -> str:
        """'Passes', 'Fails', 'Undecided', 'Not made' or 'Not judged'."""
        return STATUS_WORDS[self.status]

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "sentence": self.sentence, "samples": self.samples,
                "outputs": [{k: _finite(v) for k, v in asdict(o).items()} for o in self.outputs]}  # fmt: skip


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _percent(share: float) -> str:
    """97.3%, 100%, 99.94%: enough digits to tell it from the limit it is compared with."""
    text = f"{share:.1%}"
    return "100%" if text == "100.0%" else text


def _things(o: OutputParity, total: int, samples: int) -> tuple[str, str]:
    """What a top-1 decision is on this output, and what keeping it means: lines read, inputs or positions."""
    if o.measures.get("sequences") is not None:
        return "lines", "reads the same text on"
    if o.unit and o.kind in ("map", "detections"):  # boxes or regions: kept at IoU >= 0.9, none new
        return o.unit, "keeps"
    if o.measures.get("continuations") is not None and o.unit == "input":  # a set of models writing outputs
        return "inputs", "writes the same output for"
    if o.measures.get("continuations") is not None:
        return "prompts", "continues the same way on"
    if o.measures.get("kl_divergence") is not None:
        return "positions", "keeps the next token on"
    if o.exact:
        return "positions", "keeps the label on"
    if o.kind == "probability":
        return "decisions", "keeps the yes/no (above or below 0.5) on"
    return ("inputs" if total <= samples else "positions"), "keeps the top class on"


def _share_sentence(o: OutputParity, check: Check, samples: int) -> str:
    n = check.decisions or 0
    kept = int(round(check.value * n))
    things, keeps = _things(o, n, samples)
    if n == 1:  # "0 of 1 box", "1 of 1 line"
        things = things[:-2] if things.endswith("xes") else things[:-1]
    needs = f"needs {check.limit * 100:g}%"
    if check.status == PASS:
        return f"{keeps} {kept} of {n} {things}: at least {_percent(check.low)} with 95% confidence ({needs})"
    if check.status == FAIL:
        return f"{keeps} only {kept} of {n} {things}: at most {_percent(check.high)} with 95% confidence ({needs})"
    return (f"{keeps} {kept} of {n} {things}: between {_percent(check.low)} and {_percent(check.high)} with 95% "
            f"confidence, either side of the {check.limit * 100:g}% needed; more inputs would decide it")  # fmt: skip


def _deciding_check(o: OutputParity) -> Check | None:
    """The check that decided this output: the first failing, else the first undecided, else the share of
    decisions it rests on ("keeps 296 of 300"), else the closest call."""
    for status in (FAIL, UNDECIDED):
        found = next((c for c in o.checks if c.status == status), None)
        if found is not None:
            return found
    share = next((c for c in o.checks if c.decisions is not None), None)
    return share or max(o.checks, key=lambda c: c.severity, default=None)


def output_verdict(o: OutputParity, samples: int) -> OutputVerdict:
    """One output's verdict and sentence."""
    check = _deciding_check(o)
    status = o.status
    if o.kind == PERPLEXITY and (check is None or status == PASS):  # told: the text's perplexity, both ways
        return OutputVerdict(o.name, o.kind, status, o.decisions, "perplexity_change",
                             o.measures.get("perplexity_change"), severity=o.severity)  # fmt: skip
    if check is None:
        sentence = ("matches the original exactly" if status == PASS
                    else o.reason or "does not match the original")  # fmt: skip
        return OutputVerdict(o.name, o.kind, status, sentence, severity=o.severity)
    what = f"{o.decisions}; " if o.decisions else ""  # a map's or a detector's regions and boxes, as a user sees them
    if what.startswith("all ") and check.decisions is not None:
        what = ""  # "all 21 text boxes kept": the share's sentence says it, with what it rests on
    after = ""
    if o.kind == GENERATION:  # where changed continuations part: after the share, which is what decides
        what, after = "", (f"; {o.decisions}" if o.decisions else "")
    if status == PASS and o.measures.get("abs_error") == 0.0:
        sentence = "gives exactly the original's outputs"
    elif check.decisions is not None:
        sentence = what + _share_sentence(o, check, samples) + after
    else:
        measured = Criterion(check.criterion, check.limit).text(check.value)
        if status == FAIL and check.status != FAIL:  # broken for another reason (inf/NaN, shape)
            sentence = o.reason
        elif status == UNDECIDED and check.status == PASS:  # a detector with no box to judge on these inputs
            sentence = f"{o.reason}; its values moved: {measured}"
        else:
            sentence = f"{what}{measured}, {over_limit(check.severity)}"
    return OutputVerdict(o.name, o.kind, status, sentence, check.criterion[4:], check.value, check.limit,
                         check.decisions, check.low, check.high, o.severity)  # fmt: skip


def parity_verdict(parity: Parity | None, error: str | None = None) -> Verdict:
    """The verdict on measured parity (None: not measured); ``error``: the variant could not be made or run."""
    if error:
        return Verdict(ERROR, f"Not made: {error}")
    if parity is None or not parity.outputs:
        return Verdict(UNMEASURED, "Not judged: parity was not measured")
    outputs = tuple(output_verdict(o, parity.samples) for o in parity.outputs)
    status = parity.status
    deciding = next((o for o in outputs if o.status == status), None) if status != PASS else None
    if deciding is None:  # a decoder passes on what it writes: its continuations are the sentence to show
        deciding = next((o for o in outputs if o.kind == GENERATION), None) or max(outputs, key=lambda o: o.severity)
    named = f"'{deciding.output}' " if len(outputs) > 1 else ""
    told = next((o.sentence for o in outputs if o.kind == PERPLEXITY and o is not deciding), "")
    told = f"; {told}" if told else ""  # a decoder's perplexity on the text, beside what decided
    return Verdict(status, f"{STATUS_WORDS[status]}: {named}{deciding.sentence}{told}.", outputs, parity.samples)


def verdict_of(result: Any) -> Verdict:
    """The verdict on a comparison's result (``VariantResult``): what every surface shows for it."""
    return parity_verdict(getattr(result, "parity", None), getattr(result, "error", None))

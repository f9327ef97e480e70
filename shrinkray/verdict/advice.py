"""Plain-language verdicts computed from a comparison's measurements.

Every sentence comes from a number in the comparison (never from folklore):
the rules below say when a method does not pay and which variant is the best
trade-off, and :func:`pareto` marks the size-vs-error frontier.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from shrinkray.measure.confidence import FAIL
from shrinkray.measure.parity import GENERATION
from shrinkray.measure.results import ORIGINAL, Comparison, VariantResult
from shrinkray.methods import MethodSpec, all_methods, get_method
from shrinkray.units import format_bytes, format_percent
from shrinkray.verdict import ERROR, verdict_of
from shrinkray.verdict.browser import advice_lines
from shrinkray.verdict.speed import SLOWER_RATIO, speed_of  # noqa: F401 - SLOWER_RATIO: advice's bar, read by tests


@dataclass(frozen=True)
class Hint:
    """What to try next, as data: which setting, which value, and a neutral sentence (no front end's words).

    ``setting`` is one of :data:`HINT_SETTINGS` (or ``""`` for a sentence that names no setting); each front
    end words it its own way: the CLI as flags (``shrinkray.cli.CLI_ADVICE``), the app as its controls
    (``app_ui.controls.APP_ADVICE``). ``value`` is what to set it to (tensor names, method names...).
    """

    setting: str
    text: str
    value: Any = None
    method: str | None = None  # the method whose option it is, when it is one

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Asking for the user's own inputs when a verdict is undecided (each front end says where to give them).
OWN_INPUTS = Hint("own_inputs", "give more inputs of your own (real samples of what the model sees) for a firm verdict")

#: Settings a hint can name: the method's tensors to leave out, the search for the smallest mix that passes,
#: other methods, the parity criteria, the smallest tensor rewritten, and the search for damaging tensors.
#: For a decoder LM, its own inputs are text like what it reads (its prompts are windows of it).
OWN_TEXT = Hint("own_inputs", "give text like what the model reads (its own domain) for a firm verdict", "text")
#: For a set of models (an encoder and a decoder), text of its own, one input per line.
OWN_LINES = Hint("own_inputs", "give text like what the set reads, one input per line, for a firm verdict", "lines")
#: For a speech set (an encoder of log-mel features, Whisper's), recordings of its own, one input each.
OWN_CLIPS = Hint("own_inputs", "give recordings like what the set hears (WAV files, one input each) for a firm verdict",
                 "clips")


def _own_inputs(comparison: Comparison) -> Hint:
    """What "more inputs of your own" means for this model: lines for a set, text for a decoder LM, else samples."""
    outputs = comparison.original.parity.outputs if comparison.original.parity is not None else []
    if any(o.kind == GENERATION and o.unit == "input" for o in outputs):
        hears = any(i.name == "input_features" for i in comparison.summary.inputs)  # seq2seq.layout_of's speech
        return OWN_CLIPS if hears else OWN_LINES
    return OWN_TEXT if any(o.kind == GENERATION for o in outputs) else OWN_INPUTS


HINT_SETTINGS = ("exclude", "auto", "methods", "verdict", "min_elements", "culprits", "own_inputs")


@dataclass
class Advice:
    level: str  # "good", "info", "warning", "bad"
    text: str  # the whole advice, hints included, in neutral words (reports)
    variant: str | None = None
    hints: list[Hint] = field(default_factory=list)
    problem: str = ""  # the advice without its hints ("" when it has none): front ends add their own wording

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "text": self.text, "variant": self.variant,
                "hints": [h.as_dict() for h in self.hints]}  # fmt: skip

    def worded(self, words: dict[str, Any]) -> str:
        """The advice with each hint in a front end's words: ``words[setting](hint) -> str``; a hint whose
        setting has no entry keeps its neutral sentence."""
        if not self.hints:
            return self.text
        return f"{self.problem or self.text} {self.hints_worded(words)}"

    def hints_worded(self, words: dict[str, Any]) -> str:
        """Only what to try, in a front end's words (see :meth:`worded`)."""
        return " ".join(_sentence(words[h.setting](h) if h.setting in words else h.text) for h in self.hints)


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _advice(level: str, problem: str, variant: str | None = None, hints: list[Hint] | None = None) -> Advice:
    """Advice whose neutral text is the problem followed by each hint's sentence."""
    hints = [h for h in hints or [] if h.text]
    text = " ".join([problem, *(_sentence(h.text) for h in hints)]) if hints else problem
    return Advice(level, text, variant, hints, problem if hints else "")


@dataclass(frozen=True)
class Standing:
    """How one variant stands for shipping, for pages that rank variants (Pricing)."""

    key: str
    recommended: bool = False
    fails_parity: bool = False
    parity_unknown: bool = False
    slower: float | None = None  # the latency ratio, when the variant is surely slower
    undecided: bool = False  # its verdict rests on too few decisions to pass or fail

    @property
    def shippable(self) -> bool:
        return not (self.fails_parity or self.parity_unknown or self.slower or self.undecided)

    def label(self) -> str:
        """``recommended``, ``fails parity``, ``2.70x slower``... joined; "" for a plain passing variant."""
        parts = ["recommended"] if self.recommended else []
        parts += ["fails parity"] if self.fails_parity else []
        parts += ["parity not measured"] if self.parity_unknown else []
        parts += ["parity undecided"] if self.undecided else []
        parts += [f"{self.slower:.2f}x slower"] if self.slower else []
        return ", ".join(parts)


@dataclass
class ParetoPoint:
    key: str
    size: int
    error: float
    passed: bool
    on_frontier: bool
    recommended: bool


def _size(result: VariantResult, delivery: str) -> int | None:
    return result.sizes.get(delivery) if result.sizes else None


def latency_ratio(comparison: Comparison, result: VariantResult) -> float | None:
    """The variant's time over the original's at the first measured setting (``verdict.speed``)."""
    return speed_of(comparison, result).ratio


def is_slower(comparison: Comparison, result: VariantResult) -> bool:
    """Surely slower by more than SLOWER_RATIO (``verdict.speed.SpeedCall.surely_slower``)."""
    return speed_of(comparison, result).surely_slower


def _fails_in_browser(comparison: Comparison, key: str) -> bool:
    """The variant ran in the user's browser (the app's panel) and did not load, run or pass parity there."""
    run = next((r for r in getattr(comparison, "browser", None) or [] if r.key == key), None)
    return run is not None and run.failed


def _smaller_and_passing(comparison: Comparison, delivery: str) -> list[VariantResult]:
    """Variants that changed something, pass parity and deliver fewer bytes than the original, smallest first."""
    found = []
    for result in comparison.variants:
        if not result.ok or result.parity is None or not result.parity.passed or not result.record.get("tensors_changed"):
            continue
        size = _size(result, delivery)
        if size is not None and size < (_size(comparison.original, delivery) or 0):
            found.append((size, result))
    return [result for _, result in sorted(found, key=lambda pair: pair[0])]


def _passing_unsized(comparison: Comparison) -> list[str]:
    """Variants that pass but whose download sizes were given up at the run's time limit (pipeline.compare)."""
    return [r.key for r in comparison.variants
            if r.ok and r.sizes is None and verdict_of(r).passed and r.record.get("tensors_changed")]  # fmt: skip


def recommended(comparison: Comparison, delivery: str = "brotli") -> VariantResult | None:
    """The smallest delivered file among variants that pass parity and are not slower."""
    return next((r for r in _smaller_and_passing(comparison, delivery)
                 if not is_slower(comparison, r) and not _fails_in_browser(comparison, r.key)), None)  # fmt: skip


def pareto(comparison: Comparison, delivery: str = "brotli") -> list[ParetoPoint]:
    """Size (delivered bytes) vs parity severity (the worst output's share of its allowed error, 1.0 = the
    limit; scale-free, so pixels, logits and probabilities compare); frontier = nothing both smaller and closer."""
    best = recommended(comparison, delivery)
    points = [
        (r, _size(r, delivery), r.parity.severity if r.parity else float("inf"))
        for r in comparison.all
        if r.ok and r.sizes is not None and r.parity is not None
    ]
    out = []
    for result, size, error in points:
        dominated = any(
            s <= size and e <= error and (s < size or e < error) for other, s, e in points if other is not result
        )
        out.append(
            ParetoPoint(
                key=result.key,
                size=size,
                error=error,
                passed=result.parity.passed,
                on_frontier=not dominated,
                recommended=best is not None and result.key == best.key,
            )
        )
    out.sort(key=lambda p: p.size)
    return out


def advise(comparison: Comparison, delivery: str = "brotli") -> list[Advice]:
    """All advice for a comparison, most important first."""
    notes: list[Advice] = []
    summary = comparison.summary
    weight_methods = [r for r in comparison.variants if r.ok and r.method and get_method(r.method).traceable]
    if weight_methods and all(not r.record.get("tensors_changed") for r in weight_methods):
        notes.append(
            _advice(
                "warning",
                f"This model has no float weight tensors large enough to shrink ({format_bytes(summary.weight_bytes)} "
                f"of weights, {format_percent(summary.weight_share)} of the file), so the weight methods change "
                "nothing.",
                hints=[Hint("min_elements", "lower the minimum tensor size (min elements) if small tensors matter, "
                            "or keep the original", value=1024)],
            )
        )
    original_size = _size(comparison.original, delivery)
    measured = methods_in_run(comparison)
    for result in comparison.variants:
        key = result.key
        if not result.ok:
            notes.append(Advice("bad", f"{key} could not be used: {result.error}", key))
            continue
        size = _size(result, delivery)
        if result.parity is None:
            reason = next((n for n in result.notes if n.startswith("Parity not measured")), "Parity not measured")
            notes.append(Advice("warning", f"{key}: {reason}; it cannot be recommended without it.", key))
        if result.record.get("tensors_changed") == 0:
            notes.append(Advice("info", f"{key} changed nothing in this model.", key))
            continue
        if size is not None and original_size and size >= original_size:
            notes.append(
                Advice("warning", f"{key} does not make the {delivery} download smaller "
                       f"({format_bytes(size)} vs {format_bytes(original_size)}).", key)
            )  # fmt: skip
        others: list[str] = []
        if is_slower(comparison, result):
            others = [m for m in _same_speed_methods() if m != result.method and m not in measured]  # never one run
            why = _agreeing("which keep float compute", len(others))
            hints = [Hint("methods", f"prefer {_either(others)}, {why}", value=others)] if others else []
            notes.append(
                _advice("bad", f"{key} runs {speed_of(comparison, result).words} on this CPU (median latency).", key,
                        hints)
            )  # fmt: skip
        verdict = verdict_of(result)
        if verdict.undecided:
            notes.append(_advice("warning", f"{key}: {verdict.sentence}", key, [_own_inputs(comparison)]))
        elif result.parity is not None and not verdict.passed:
            said = measured | set(others)  # a method the speed advice just named is not suggested twice
            hints = _set_hints(result, said) if _is_set(comparison) else _parity_hints(result, said)
            notes.append(_advice("bad", f"{key}: {verdict.sentence}", key, hints))
        spec = get_method(result.method) if result.method else None
        option_note = spec.option_advice(result.options) if spec and spec.option_advice else None
        if option_note:
            notes.append(Advice("warning", f"{key} {option_note}", key))
    notes += _undecided_outputs(comparison)
    if summary.quantized_ops:
        notes.append(
            Advice("info", "This model is already quantized: only its remaining float tensors can shrink, and "
                   "run-time activation quantization makes it sensitive to small weight changes.")
        )  # fmt: skip
    best = recommended(comparison, delivery)
    if best is not None and original_size:
        size = _size(best, delivery)
        speed = (
            "" if latency_ratio(comparison, best) is not None
            else " Speed was not checked (latency not measured): time it before shipping."
        )  # fmt: skip
        notes.insert(
            0,
            Advice(
                "good",
                f"Best trade-off: {best.key}. The {delivery} download drops from {format_bytes(original_size)} to "
                f"{format_bytes(size)} ({format_percent(1 - size / original_size)} smaller). "
                f"{verdict_of(best).sentence}{speed}",
                best.key,
            ),
        )
    elif slower := [r for r in _smaller_and_passing(comparison, delivery) if is_slower(comparison, r)]:
        result, size = slower[0], _size(slower[0], delivery) or 0
        notes.insert(0, Advice(
            "warning",
            f"No variant is smaller, within the parity criteria and as fast as the original: {result.key} passes and "
            f"its {delivery} download is {format_percent(1 - size / original_size)} smaller, but it measured "
            f"{latency_ratio(comparison, result):.2f}x the original's time. Ship it if the download matters more "
            "than speed on your devices (time it there); otherwise keep the original.",
            result.key,
        ))  # fmt: skip
    elif undecided := [r.key for r in comparison.variants if verdict_of(r).undecided]:
        notes.insert(0, _advice(
            "warning", f"No variant passes on these inputs yet: {_either(undecided, 'and')} "
            f"{'is' if len(undecided) == 1 else 'are'} undecided (more inputs would tell either way). Until a verdict "
            "is firm, keep the original.", hints=[_own_inputs(comparison)]))  # fmt: skip
    elif unsized := _passing_unsized(comparison):
        one = len(unsized) == 1
        notes.insert(0, _advice(
            "warning", f"{_either(unsized, 'and')} {'passes' if one else 'pass'}, but "
            f"{'its download size was' if one else 'their download sizes were'} not measured before the run's time "
            f"limit, so nothing shows {'it is' if one else 'they are'} smaller: until "
            f"{'it is' if one else 'they are'} measured, keep the original.",
            hints=[Hint("", "compare fewer methods at a time, so that each one's sizes are measured")]))  # fmt: skip
    elif comparison.variants:
        notes.insert(0, _advice("warning", "No variant is both smaller and within the parity criteria: keep the "
                                "original.", hints=[Hint("verdict", "if the criteria are stricter than needed, loosen them knowingly")]))  # fmt: skip
    if getattr(comparison, "browser", None):  # runs in the user's browser: "runs on the server but not in ..."

        notes += [Advice("bad", line[2:]) for line in advice_lines(comparison, comparison.browser) if line.startswith("! ")]
    return notes


#: What a user's post-processing keeps from each output kind judged by its decisions.
_DECIDED = {"detections": ("a detection head", "no box scored 0.25", "boxes"),
            "map": ("a probability map", "no region stood out (none above 0.3, or only speckle)", "regions")}  # fmt: skip


def _undecided_outputs(comparison: Comparison) -> list[Advice]:
    """Outputs recognised as a detection head or a probability map on which nothing was decided: their
    boxes or regions could not be compared, so the verdict fell back to their values (which missed boxes
    that moved on a real detector, measured 2026-11-23: docs/benchmarks.md "Verdicts on real models"). Say so once per output, with what to do."""
    notes = []
    seen: set[str] = set()
    for result in comparison.variants:
        for output in result.parity.outputs if result.ok and result.parity is not None else []:
            if output.kind in _DECIDED and not output.decisions and output.checks and output.name not in seen:
                seen.add(output.name)
                what, nothing, things = _DECIDED[output.kind]
                notes.append(Advice(
                    "info",
                    f"{output.name} looks like {what}, but {nothing} on these inputs, so its {things} could not be "
                    f"compared and it was judged by its values. Give real inputs (images with objects or text) to "
                    f"check the {things} a user's post-processing keeps.",
                ))  # fmt: skip
    return notes


def methods_in_run(comparison: Comparison) -> set[str]:
    """The methods this comparison ran (built or tried): advice never suggests trying one of them again."""
    ran = {r.method for r in comparison.variants if r.method}
    settings = getattr(comparison, "settings", None)
    return ran | {name for name, _ in getattr(settings, "methods", None) or []}


def _either(items: list[str], word: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c`` (``word="and"``: ``a, b and c``)."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {word} {items[-1]}"


def _hint_in_use(spec: MethodSpec, options: dict[str, Any]) -> bool:
    """Whether the variant already uses what the method's parity hint suggests (per-channel when it is on)."""
    if spec.parity_hint_done is None:
        return False
    name, value = spec.parity_hint_done
    used = options.get(name, getattr(spec.options_type(), name, None) if spec.options_type else None)
    return used == value


def _method_hint(spec: MethodSpec, measured: set[str], options: dict[str, Any] | None = None) -> list[Hint]:
    """A method's own parity hint (unless the variant already uses it: ``options``, its resolved options), then
    the other methods its spec offers as one ``methods`` hint (so each front end names them its own way),
    without those already in this run: advice never suggests what the run has just measured."""
    hints = [Hint("", spec.parity_hint)] if spec.parity_hint and not _hint_in_use(spec, options or {}) else []
    methods = [m for m in spec.alternatives if m != spec.name and m not in measured]
    if methods:
        why = _agreeing(spec.alternatives_why, len(methods))
        text = f"{'or ' if hints else ''}try {_either(methods)}{', ' + why if why else ''}"
        hints.append(Hint("methods", text, value=methods))
    return hints


def _agreeing(clause: str, count: int) -> str:
    """``which keep ...`` for one method: ``which keeps ...``."""
    return clause.replace("which keep ", "which keeps ", 1) if count == 1 else clause


def _same_speed_methods() -> list[str]:
    """Methods whose variants run at the original's speed (their spec's ``keeps_speed``), in listing order."""
    return [spec.name for spec in all_methods() if spec.keeps_speed]


def _is_set(comparison: Comparison) -> bool:
    """A set of models (an encoder and a decoder) compared whole: it writes an output per input."""
    outputs = comparison.original.parity.outputs if comparison.original.parity is not None else []
    return any(o.kind == GENERATION and o.unit == "input" for o in outputs)


def _set_hints(result: VariantResult, measured: set[str]) -> list[Hint]:
    """What to try for a set's failing variant: the method's own hint (more levels) and other methods, never the
    searches a set does not run (culprits, auto) nor calibration it does not take (GPTQ on samples of your own)."""
    spec = get_method(result.method) if result.method else None
    if spec is None:
        return []
    options = {**result.options, **(result.record.get("options") or {})}
    hints = _method_hint(spec, measured | {"auto"}, options)
    return [h for h in hints if h.setting != "" or not spec.uses_context]  # a calibrating method's own hint speaks of it


def _parity_hints(result: VariantResult, measured: set[str] | frozenset[str] = frozenset()) -> list[Hint]:
    """What to try for a variant that fails parity: leave the tensors that hurt in float (when the search found
    them) or the method's own advice, and the per-tensor search for the smallest mix that passes. ``measured``:
    the methods this run already has (never suggested again)."""
    spec = get_method(result.method) if result.method else None
    search = [] if "auto" in measured else [
        Hint("auto", "or let the search for the smallest mix that passes choose a precision per tensor")]  # fmt: skip
    if result.culprits:
        top = [c.tensor for c in result.culprits[:3]]
        return [
            Hint("exclude", f"the tensors that move the outputs most are {', '.join(top)}: leave them in float "
                 "(exclude them)", value=top, method=result.method),
            *search,
        ]  # fmt: skip
    options = {**result.options, **(result.record.get("options") or {})}  # as given, then as resolved
    hints = _method_hint(spec, set(measured), options) if spec is not None else []
    if spec is not None and spec.traceable:
        hints.append(Hint("culprits", "to find the tensors that hurt, search for them (slower)", method=result.method))
    return hints


def standing(comparison: Comparison, delivery: str = "brotli") -> dict[str, Standing]:
    """Each variant's standing (recommended, fails parity, surely slower); the original is not included."""
    best = recommended(comparison, delivery)
    out = {}
    for result in comparison.variants:
        slower = latency_ratio(comparison, result) if result.ok and is_slower(comparison, result) else None
        out[result.key] = Standing(
            key=result.key,
            recommended=best is not None and result.key == best.key,
            fails_parity=verdict_of(result).status in (FAIL, ERROR),
            parity_unknown=result.ok and result.parity is None,
            slower=slower,
            undecided=verdict_of(result).undecided,
        )
    return out


__all__ = ["HINT_SETTINGS", "ORIGINAL", "Advice", "Hint", "ParetoPoint", "Standing", "advise", "is_slower", "latency_ratio",
           "methods_in_run", "pareto", "recommended", "standing"]

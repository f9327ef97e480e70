"""A set of models run as runtimes run it: which decoder, with its cache or not, and the outputs it writes.

An encoder–decoder (io/model_set.py) runs its encoder once and its decoder a token at a time
(measure/seq2seq.py holds the steps); this module opens the set's files in ONNX Runtime and runs batches of
inputs through them, for the comparison (pipeline/set_compare.py), its inputs and calibration
(pipeline/set_inputs.py) and the browser panel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shrinkray.errors import SeveralModels, ShrinkRayError
from shrinkray.graph.checks import explain_runtime_error
from shrinkray.graph.sessions import open_file_session
from shrinkray.io.model_set import ModelSet
from shrinkray.measure import seq2seq
from shrinkray.measure.deadline import run_within
from shrinkray.measure.generation import GENERATED
from shrinkray.measure.parity import GENERATION, OutputKind
from shrinkray.measure.results import VariantResult
from shrinkray.pipeline.compare import variant_file_name

#: The role whose decoder the set is judged through, in order of preference (what transformers.js runs).
JUDGED_DECODERS = ("decoder_merged", "decoder")


@dataclass(frozen=True)
class Route:
    """Which files a set's generation runs: ``judged`` on the first step (and every step without a cache),
    ``step`` with ``cache`` a token at a time after it (None: the whole sequence again each step)."""

    judged: str
    step: str | None = None
    cache: seq2seq.CacheStep | None = None


def set_layout(model_set: ModelSet, originals: dict | None = None) -> tuple[Route, seq2seq.Seq2SeqLayout]:
    """How the set is run (which decoder, with its cache or not) and what its inputs and outputs do; a
    :class:`SeveralModels` naming its files when it is not laid out as optimum lays a set out."""
    originals = originals or {role: model_set.load(role) for role in model_set.members}
    judged = next(role for role in JUDGED_DECODERS if role in model_set.members)  # a ModelSet always has one
    layout = seq2seq.layout_of(originals["encoder"].model, originals[judged].model, model_set.config)
    if layout is None:
        raise SeveralModels(
            f"The set's {model_set.words()} are not laid out as an encoder and a decoder (input_ids or "
            "input_features to last_hidden_state; input_ids and encoder_hidden_states to logits), so they are "
            "compared one at a time", "Choose one of them", choices=tuple(model_set.members.values()))  # fmt: skip
    step = judged if judged == "decoder_merged" else "decoder_with_past" if "decoder_with_past" in model_set.members else None
    cache = seq2seq.cache_step(originals[judged].model, originals[step].model) if step else None
    return Route(judged, step if cache else None, cache), layout


def run_set(paths: dict[str, Path], route: Route, layout: seq2seq.Seq2SeqLayout, batches: list[dict],
              teacher: np.ndarray | None, states: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """The set's outputs on every batch (the original's when ``teacher`` is None; else forced over its tokens).
    ``states``: where each batch's encoder states are put, in order, for a caller that feeds them on (the
    calibration inputs: the encoder ran twice on them before)."""
    encoder = open_file_session(paths["encoder"], optimized=True, threads=1)
    decoder = open_file_session(paths[route.judged], optimized=True, threads=1)
    step = None
    if route.step is not None:
        step = decoder if route.step == route.judged else open_file_session(paths[route.step], optimized=True, threads=1)

    def runner(session) -> seq2seq.Run:
        names = [o.name for o in session.get_outputs()]

        def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            try:
                return dict(zip(names, run_within(session, feeds, names=names), strict=True))
            except ShrinkRayError:
                raise
            except Exception as exc:  # noqa: BLE001 - ONNX Runtime's own errors: one sentence, as for one model
                raise explain_runtime_error(exc, running=True) from None

        return run

    encode = runner(encoder)
    if states is not None:
        run_encoder = encode

        def encode(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            out = run_encoder(feeds)
            states.append(np.asarray(out[layout.encoder_output]))
            return out

    outs = []
    done = 0
    for batch in batches:
        rows = len(batch[layout.encoder_ids])
        forced = None if teacher is None else teacher[done:done + rows]
        outs.append(seq2seq.generate(encode, runner(decoder), layout, batch, forced,
                                     runner(step) if step is not None else None, route.cache))  # fmt: skip
        done += rows
    width = max(o[GENERATED].shape[1] for o in outs)
    generated = np.concatenate([_pad(o[GENERATED], width, layout) for o in outs])
    logit_width = min(o[seq2seq.LOGITS].shape[1] for o in outs)
    logits = np.concatenate([o[seq2seq.LOGITS][:, :logit_width] for o in outs])
    return {GENERATED: generated, seq2seq.LOGITS: logits}


def joined(first: dict, more: dict, layout: seq2seq.Seq2SeqLayout) -> dict[str, np.ndarray]:
    """Two runs' outputs as one: outputs widened to the longer, logits cut to the shorter."""
    width = max(first[GENERATED].shape[1], more[GENERATED].shape[1])
    logits = min(first[seq2seq.LOGITS].shape[1], more[seq2seq.LOGITS].shape[1])
    return {GENERATED: np.concatenate([_pad(first[GENERATED], width, layout), _pad(more[GENERATED], width, layout)]),
            seq2seq.LOGITS: np.concatenate([first[seq2seq.LOGITS][:, :logits], more[seq2seq.LOGITS][:, :logits]])}


def _pad(generated: np.ndarray, width: int, layout: seq2seq.Seq2SeqLayout) -> np.ndarray:
    """A batch's outputs widened to ``width`` tokens: its end token, certain (every output there has ended)."""
    if generated.shape[1] == width:
        return generated
    pad = np.zeros((generated.shape[0], width - generated.shape[1], 2))
    pad[..., 0] = layout.end_token if layout.end_token is not None else -1
    pad[..., 1] = seq2seq.FINISHED_MARGIN
    return np.concatenate([generated, pad], axis=1)


def set_kinds(layout: seq2seq.Seq2SeqLayout) -> dict[str, OutputKind]:
    return {
        GENERATED: OutputKind(GENERATION, why=f"each input's output, greedy, through {layout.words}: judged by "
                              "the share of outputs kept token for token", unit="input"),
        seq2seq.LOGITS: OutputKind("scores", -1, "the decoder's next-token logits over the original's own output "
                                   "(the variant reads the same tokens): the next token kept at each position; "
                                   "the KL divergence of the distributions is measured too", tokens=True),
    }  # fmt: skip


def variant_paths(model_set: ModelSet, result: VariantResult) -> dict[str, Path]:
    """Where a variant set's files are (its folder, laid out as the set's, in transformers.js's names), by role;
    the original's own files for the original."""
    if result.method is None:
        return {role: model_set.path(role) for role in model_set.members}
    folder = Path(result.file or "")
    found = {}
    for role, member in model_set.members.items():
        relative = Path(*member.split("/"))
        path = folder / relative.parent / variant_file_name(relative.name.removesuffix(".onnx"), result.key,
                                                             "transformers.js")  # fmt: skip
        if path.is_file():
            found[role] = path
    return found


def check_set_runs(model_set: ModelSet) -> None:
    """Every file of the set opens in ONNX Runtime (a ShrinkRayError says which does not and why)."""
    from shrinkray.graph.validate import validate

    for role in model_set.members:
        try:
            validate(model_set.load(role).model)
        except ShrinkRayError as exc:
            raise type(exc)(f"{Path(model_set.members[role]).name}: {exc.problem}", exc.hint) from None

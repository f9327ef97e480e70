"""An encoder-decoder (seq2seq) transformer written as ONNX graphs with onnx.helper, from given weights, in
optimum's / transformers.js's layouts: ``encoder_model.onnx`` (input_ids, attention_mask -> last_hidden_state)
and the decoder in one of three: ``plain`` (``decoder_model.onnx`` without a KV cache: encoder_attention_mask,
input_ids, encoder_hidden_states -> logits; the whole decoder sequence at every step), ``cached``
(``decoder_model.onnx`` exported with past: the same inputs -> logits and per layer the
``present.N.decoder.key/value`` of its self-attention and the ``present.N.encoder.key/value`` of its
cross-attention) and ``with_past`` (``decoder_with_past_model.onnx``: encoder_attention_mask, input_ids and
per layer ``past_key_values.N.decoder/encoder.key/value`` -> logits and ``present.N.decoder.key/value``, the
past with the new step appended; the cross-attention reads the encoder's past, not encoder_hidden_states).

Shared by sample_models/build_seq2seq.py (weights trained with torch) and tests/seq2seq_models.py (seeded
weights): one pair of graphs, so the sample and the test models differ only in what they learned. The blocks
are lm_graph.py's (pre-LayerNorm, learned positions, ReLU MLP, final LayerNorm); the encoder's self-attention
is bidirectional over the unpadded tokens, the decoder's is causal and is followed by a cross-attention over
``encoder_hidden_states`` that sees only the tokens ``encoder_attention_mask`` marks. With a past, the new
tokens sit at positions past..past+length-1 (their learned positions, and the causal mask: query i sees keys
0..past+i). The symbolic dims are optimum's own, ``past_decoder_sequence_length + 1`` and
``encoder_sequence_length_out`` included.

A Whisper-like speech-to-text pair on the same blocks: :func:`audio_encoder_graph` (``input_features`` float
[batch_size, bins, frames], bins and frames fixed as Whisper fixes 80 x 3000 -> ``last_hidden_state``
[batch_size, frames/2, width]: two Convs with GELU, learned positions, unmasked blocks) and
``decoder_graph(..., encoder_mask=False)``, a decoder without ``encoder_attention_mask`` (Whisper's takes only
input_ids and encoder_hidden_states, or its past): the cross-attention sees every encoder position.
"""

from __future__ import annotations

import numpy as np
import onnx
from lm_graph import IR_VERSION, OPSET, _Graph
from onnx import TensorProto, helper


def encoder_layer_names(layer: int) -> list[str]:
    """The weights of one encoder block, in the order a builder draws them (x @ W matrices)."""
    return [f"encoder.h.{layer}.{n}" for n in ("ln_1.weight", "ln_1.bias", "attn.q", "attn.k", "attn.v", "attn.proj",
                                               "ln_2.weight", "ln_2.bias", "mlp.fc", "mlp.proj")]  # fmt: skip


def decoder_layer_names(layer: int) -> list[str]:
    """The weights of one decoder block: self-attention, cross-attention, MLP, each after its LayerNorm."""
    return [f"decoder.h.{layer}.{n}" for n in ("ln_1.weight", "ln_1.bias", "attn.q", "attn.k", "attn.v", "attn.proj",
                                               "ln_cross.weight", "ln_cross.bias", "cross.q", "cross.k", "cross.v",
                                               "cross.proj", "ln_2.weight", "ln_2.bias", "mlp.fc", "mlp.proj")]  # fmt: skip


class _Blocks(_Graph):
    """lm_graph's graph builder with the pieces both graphs are made of."""

    def __init__(self, weights: dict[str, np.ndarray], heads: int, width: int) -> None:
        super().__init__()
        self.weights = weights
        self.width = width
        head_dim = self.width // heads
        self.zero, self.one = (self.const(s, np.array(v, np.int64)) for s, v in (("zero", 0), ("one", 1)))
        self.split = self.const("split", np.array([0, 0, heads, head_dim], np.int64))
        self.merge = self.const("merge", np.array([0, 0, self.width], np.int64))
        self.scale = self.const("scale", np.array(head_dim ** -0.5, np.float32))
        self.neg = self.const("neg", np.array(-1e9, np.float32))

    def w(self, key: str) -> str:
        return self.const(key, self.weights[key].astype(np.float32), exact=True)

    def embed(self, prefix: str, ids: str) -> str:
        """Token embedding plus the learned positions 0..length-1."""
        positions = self.op("Range", [self.zero, self.op("Gather", [self.op("Shape", [ids]), self.one]), self.one])
        return self.op("Add", [self.op("Gather", [self.w(f"{prefix}.wte"), ids]),
                               self.op("Gather", [self.w(f"{prefix}.wpe"), positions])])  # fmt: skip

    def norm(self, x: str, gain: str, bias: str, out: str | None = None) -> str:
        if out is None:
            return self.op("LayerNormalization", [x, self.w(gain), self.w(bias)], axis=-1, epsilon=1e-5)
        self.nodes.append(helper.make_node("LayerNormalization", [x, self.w(gain), self.w(bias)], [out], axis=-1,
                                           epsilon=1e-5))  # fmt: skip
        return out

    def padding(self, mask: str) -> str:
        """An int64 [batch, keys] attention mask as bool [batch, 1, 1, keys]."""
        axes = self.const("axes", np.array([1, 2], np.int64))
        return self.op("Cast", [self.op("Unsqueeze", [mask, axes])], to=TensorProto.BOOL)

    def causal(self, ids: str) -> str:
        """bool [length, length]: query i sees keys 0..i."""
        pos = self.op("Range", [self.zero, self.op("Gather", [self.op("Shape", [ids]), self.one]), self.one])
        query = self.op("Unsqueeze", [pos, self.const("ax", np.array([1], np.int64))])
        key = self.op("Unsqueeze", [pos, self.const("ax", np.array([0], np.int64))])
        return self.op("LessOrEqual", [key, query])

    def past_length(self, past: str) -> str:
        """The length of a cache [batch, heads, length, head_dim], as an int64 scalar."""
        return self.op("Gather", [self.op("Shape", [past]), self.const("two", np.array(2, np.int64))])

    def embed_after(self, prefix: str, ids: str, start: str) -> str:
        """Token embedding plus the learned positions start..start+length-1 (the tokens after a past)."""
        end = self.op("Add", [start, self.op("Gather", [self.op("Shape", [ids]), self.one])])
        return self.op("Add", [self.op("Gather", [self.w(f"{prefix}.wte"), ids]),
                               self.op("Gather", [self.w(f"{prefix}.wpe"), self.op("Range", [start, end, self.one])])])  # fmt: skip

    def causal_after(self, ids: str, start: str) -> str:
        """bool [length, start+length]: query i (at position start+i) sees keys 0..start+i."""
        end = self.op("Add", [start, self.op("Gather", [self.op("Shape", [ids]), self.one])])
        query = self.op("Unsqueeze", [self.op("Range", [start, end, self.one]),
                                      self.const("ax", np.array([1], np.int64))])  # fmt: skip
        key = self.op("Unsqueeze", [self.op("Range", [self.zero, end, self.one]),
                                    self.const("ax", np.array([0], np.int64))])  # fmt: skip
        return self.op("LessOrEqual", [key, query])

    def attention(self, query: str, memory: str, names: list[str], allowed: str | None) -> str:
        """Multi-head attention of ``query`` over ``memory`` (the same name for self-attention), masked by
        the bool ``allowed``; the output projection applied, the residual not added."""
        wq, wk, wv, wo = names
        q, k, v = (self.heads(x, key) for x, key in ((query, wq), (memory, wk), (memory, wv)))
        return self.attend(q, k, v, allowed, wo)

    def heads(self, x: str, key: str, out: str | None = None) -> str:
        """``x @ W`` split into heads: [batch, heads, length, head_dim] (named ``out`` when given)."""
        split = self.op("Reshape", [self.op("MatMul", [x, self.w(key)]), self.split])
        if out is None:
            return self.op("Transpose", [split], perm=[0, 2, 1, 3])
        self.nodes.append(helper.make_node("Transpose", [split], [out], perm=[0, 2, 1, 3]))
        return out

    def attend(self, q: str, k: str, v: str, allowed: str | None, wo: str) -> str:
        """Attention of the heads ``q`` over the heads ``k``/``v``, masked by the bool ``allowed`` (None: every
        key seen), projected by ``wo``; the residual not added."""
        scores = self.op("Mul", [self.op("MatMul", [q, self.op("Transpose", [k], perm=[0, 1, 3, 2])]), self.scale])
        if allowed is not None:
            scores = self.op("Where", [allowed, scores, self.neg])
        attn = self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])
        joined = self.op("Reshape", [self.op("Transpose", [attn], perm=[0, 2, 1, 3]), self.merge])
        return self.op("MatMul", [joined, self.w(wo)])

    def mlp(self, h: str, fc: str, proj: str) -> str:
        return self.op("MatMul", [self.op("Relu", [self.op("MatMul", [h, self.w(fc)])]), self.w(proj)])

    def gelu(self, x: str) -> str:
        """GELU as exporters write it below opset 20: 0.5 * x * (1 + erf(x / sqrt(2)))."""
        erf = self.op("Erf", [self.op("Mul", [x, self.const("inv_sqrt2", np.array(2 ** -0.5, np.float32))])])
        one = self.const("one_f", np.array(1.0, np.float32))
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [erf, one])]),
                               self.const("half", np.array(0.5, np.float32))])  # fmt: skip

    def model(self, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
        used = {n for node in self.nodes for n in node.input}  # a mask-free graph leaves e.g. ``neg`` unread
        graph = helper.make_graph(self.nodes, name, inputs, outputs, [t for t in self.inits if t.name in used])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="shrinkray-samples")  # fmt: skip
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


def encoder_graph(weights: dict[str, np.ndarray], layers: int, heads: int, name: str = "encoder") -> onnx.ModelProto:
    """The encoder over ``weights`` (``encoder.wte`` [vocab, width], ``encoder.wpe`` [positions, width], per
    layer :func:`encoder_layer_names`, ``encoder.ln_f.weight/bias``); other keys are ignored."""
    g = _Blocks(weights, heads, weights["encoder.wte"].shape[1])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch_size", "encoder_sequence_length"])
              for n in ("input_ids", "attention_mask")]  # fmt: skip
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch_size", "encoder_sequence_length", g.width])]  # fmt: skip
    x = g.embed("encoder", "input_ids")
    allowed = g.padding("attention_mask")
    _encoder_blocks(g, x, layers, allowed)
    return g.model(name, inputs, outputs)


def _encoder_blocks(g, x: str, layers: int, allowed: str | None) -> None:
    """Pre-LN self-attention blocks over ``x`` (``allowed``: the padding mask, or None), then the final LayerNorm
    into ``last_hidden_state``: the text and audio encoders share them."""
    for layer in range(layers):
        ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, fc, proj = encoder_layer_names(layer)
        h = g.norm(x, ln1_g, ln1_b)
        x = g.op("Add", [x, g.attention(h, h, [wq, wk, wv, wo], allowed)])
        x = g.op("Add", [x, g.mlp(g.norm(x, ln2_g, ln2_b), fc, proj)])
    g.norm(x, "encoder.ln_f.weight", "encoder.ln_f.bias", out="last_hidden_state")


AUDIO_FRONT = ("encoder.conv1.weight", "encoder.conv1.bias", "encoder.conv2.weight", "encoder.conv2.bias")


def audio_frames_out(frames: int) -> int:
    """The encoder's length after the stride-2 Conv (kernel 3, padding 1): frames/2 for even frames."""
    return (frames - 1) // 2 + 1


def audio_encoder_graph(weights: dict[str, np.ndarray], layers: int, heads: int, bins: int = 80, frames: int = 200,
                        name: str = "encoder") -> onnx.ModelProto:  # fmt: skip
    """A Whisper-like audio encoder over ``weights``: :data:`AUDIO_FRONT` (``conv1.weight`` [width, bins, 3],
    ``conv2.weight`` [width, width, 3], biases [width]), ``encoder.wpe`` [frames/2, width], per layer
    :func:`encoder_layer_names`, ``encoder.ln_f.weight/bias``; other keys are ignored. ``input_features``
    float [batch_size, bins, frames] (bins and frames fixed) -> Conv, GELU, Conv (stride 2), GELU, transposed to
    [batch_size, frames/2, width], plus the positions, then pre-LN blocks with no mask (every frame is real) and
    the final LayerNorm: ``last_hidden_state`` [batch_size, frames/2, width]."""
    width = weights["encoder.conv1.weight"].shape[0]
    length = audio_frames_out(frames)
    if weights["encoder.conv1.weight"].shape != (width, bins, 3) or weights["encoder.wpe"].shape != (length, width):
        raise ValueError(f"conv1 must be [width, {bins}, 3] and wpe [{length}, width]")
    g = _Blocks(weights, heads, width)
    inputs = [helper.make_tensor_value_info("input_features", TensorProto.FLOAT, ["batch_size", bins, frames])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch_size", length, width])]
    w1, b1, w2, b2 = (g.w(k) for k in AUDIO_FRONT)
    x = g.gelu(g.op("Conv", ["input_features", w1, b1], kernel_shape=[3], pads=[1, 1]))
    x = g.gelu(g.op("Conv", [x, w2, b2], kernel_shape=[3], pads=[1, 1], strides=[2]))
    x = g.op("Add", [g.op("Transpose", [x], perm=[0, 2, 1]), g.w("encoder.wpe")])
    _encoder_blocks(g, x, layers, None)  # no mask: every frame is real
    return g.model(name, inputs, outputs)


LAYOUTS = ("plain", "cached", "with_past")
PAST_DECODER, PRESENT_DECODER, ENCODER_OUT = ("past_decoder_sequence_length", "past_decoder_sequence_length + 1",
                                              "encoder_sequence_length_out")  # optimum's names  # fmt: skip


def decoder_graph(weights: dict[str, np.ndarray], layers: int, heads: int, name: str = "decoder",
                  layout: str = "plain", encoder_mask: bool = True) -> onnx.ModelProto:  # fmt: skip
    """The decoder over ``weights`` (``decoder.wte``, ``decoder.wpe``, per layer :func:`decoder_layer_names`,
    ``decoder.ln_f.weight/bias``, ``lm_head`` [width, vocab]); other keys are ignored. ``layout``: ``plain``
    (no cache), ``cached`` (optimum's decoder_model with past: present.N.* out) or ``with_past`` (optimum's
    decoder_with_past_model: past_key_values.N.* in, present.N.decoder.* out); see the module's words.
    ``encoder_mask=False``: no ``encoder_attention_mask`` input (Whisper's decoder), the cross-attention sees
    every encoder position; the rest as with it."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout}")
    g = _Blocks(weights, heads, weights["decoder.wte"].shape[1])
    vocab = weights["lm_head"].shape[1]
    head_dim = g.width // heads
    mask_info = [helper.make_tensor_value_info("encoder_attention_mask", TensorProto.INT64,
                                               ["batch_size", "encoder_sequence_length"])] if encoder_mask else []  # fmt: skip
    if layout == "with_past":  # optimum exports it with one new token
        inputs = [*mask_info, helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", 1])]
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 1, vocab])]
    else:
        inputs = [*mask_info,
                  helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "decoder_sequence_length"]),
                  helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT,
                                                ["batch_size", "encoder_sequence_length", g.width])]  # fmt: skip
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                 ["batch_size", "decoder_sequence_length", vocab])]  # fmt: skip

    def cache(names: list[str], dim: str, into: list) -> None:
        into.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch_size", heads, dim, head_dim])
                    for n in names)  # fmt: skip

    if layout == "with_past":
        for layer in range(layers):
            cache([f"past_key_values.{layer}.decoder.{w}" for w in ("key", "value")], PAST_DECODER, inputs)
            cache([f"past_key_values.{layer}.encoder.{w}" for w in ("key", "value")], ENCODER_OUT, inputs)
        start = g.past_length("past_key_values.0.decoder.key")
        x = g.embed_after("decoder", "input_ids", start)
        causal = g.causal_after("input_ids", start)
    else:
        x = g.embed("decoder", "input_ids")
        causal = g.causal("input_ids")
    cross = g.padding("encoder_attention_mask") if encoder_mask else None
    for layer in range(layers):
        ln1_g, ln1_b, wq, wk, wv, wo, lnc_g, lnc_b, cq, ck, cv, co, ln2_g, ln2_b, fc, proj = decoder_layer_names(layer)
        h = g.norm(x, ln1_g, ln1_b)
        if layout == "plain":
            x = g.op("Add", [x, g.attention(h, h, [wq, wk, wv, wo], causal)])
            x = g.op("Add", [x, g.attention(g.norm(x, lnc_g, lnc_b), "encoder_hidden_states", [cq, ck, cv, co], cross)])
        else:
            own = [f"present.{layer}.decoder.{w}" for w in ("key", "value")]
            q = g.heads(h, wq)
            if layout == "cached":  # the self-attention's keys and values are the present
                k, v = g.heads(h, wk, own[0]), g.heads(h, wv, own[1])
            else:  # the past with this step's appended
                k, v = (g.heads(h, key) for key in (wk, wv))
                for past, new, out in zip(("key", "value"), (k, v), own, strict=True):
                    g.nodes.append(helper.make_node("Concat", [f"past_key_values.{layer}.decoder.{past}", new], [out],
                                                    axis=2))  # fmt: skip
                k, v = own
            cache(own, PRESENT_DECODER, outputs)
            x = g.op("Add", [x, g.attend(q, k, v, causal, wo)])
            q = g.heads(g.norm(x, lnc_g, lnc_b), cq)
            if layout == "cached":  # the cross-attention's keys and values, from the encoder's states
                theirs = [f"present.{layer}.encoder.{w}" for w in ("key", "value")]
                k, v = g.heads("encoder_hidden_states", ck, theirs[0]), g.heads("encoder_hidden_states", cv, theirs[1])
                cache(theirs, ENCODER_OUT, outputs)
            else:  # the encoder's past of the first step
                k, v = (f"past_key_values.{layer}.encoder.{w}" for w in ("key", "value"))
            x = g.op("Add", [x, g.attend(q, k, v, cross, co)])
        x = g.op("Add", [x, g.mlp(g.norm(x, ln2_g, ln2_b), fc, proj)])
    h = g.norm(x, "decoder.ln_f.weight", "decoder.ln_f.bias")
    g.nodes.append(helper.make_node("MatMul", [h, g.w("lm_head")], ["logits"]))
    return g.model(name, inputs, outputs)


def encoder_feeds(inputs: np.ndarray, attention_mask: np.ndarray | None) -> dict[str, np.ndarray]:
    """The encoder's feeds: ``input_ids`` and ``attention_mask``, or with no mask (a speech set)
    ``input_features``."""
    if attention_mask is None:
        return {"input_features": inputs}
    return {"input_ids": inputs, "attention_mask": attention_mask}


def mask_feed(attention_mask: np.ndarray | None) -> dict[str, np.ndarray]:
    """The decoder's ``encoder_attention_mask`` feed, none for a decoder without it (a speech set)."""
    return {} if attention_mask is None else {"encoder_attention_mask": attention_mask}


def greedy(encoder, decoder, input_ids: np.ndarray, attention_mask: np.ndarray | None, start: int, eos: int,
           max_length: int) -> list[list[int]]:  # fmt: skip
    """Greedy generation through two ONNX Runtime sessions (anything with ``run(None, feeds)``): the encoder
    once, then the decoder on the whole sequence so far at every step, as transformers.js does without a
    cache. One list of new tokens per row, each ending at its first ``eos`` (not included); ``max_length``
    counts the start token, as transformers' does. ``attention_mask`` None: a speech set, ``input_ids`` are
    the encoder's ``input_features`` and the decoder takes no ``encoder_attention_mask``."""
    states = encoder.run(None, encoder_feeds(input_ids, attention_mask))[0]
    seq = np.full((len(input_ids), 1), start, np.int64)
    done = np.zeros(len(input_ids), bool)
    while seq.shape[1] < max_length and not done.all():
        logits = decoder.run(None, {**mask_feed(attention_mask), "input_ids": seq,
                                    "encoder_hidden_states": states})[0]  # fmt: skip
        token = np.where(done, eos, logits[:, -1].argmax(-1))
        seq = np.concatenate([seq, token[:, None].astype(np.int64)], axis=1)
        done |= token == eos
    made = []
    for row in seq[:, 1:].tolist():
        made.append(row[: row.index(eos)] if eos in row else row)
    return made

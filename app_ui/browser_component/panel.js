// "In your browser": download each model from the app's own server, open it in ONNX Runtime Web, run the
// server's parity inputs, time every step and send it all back to the Python session.
// Plain ES module, no build step. Talks to Streamlit with the component messages (componentReady,
// setFrameHeight, setComponentValue); every file it loads comes from this app's server.

const runButton = document.getElementById("run");
const backendSelect = document.getElementById("backend");
const statusLine = document.getElementById("status");
const logList = document.getElementById("log");
const where = document.getElementById("where");

let args = null;
let running = false;
const finished = new Set(); // run ids this page already sent back
const started = new Set(); // run ids started here (a re-render must not start one twice)

function send(type, data) {
  window.parent.postMessage({ isStreamlitMessage: true, type, ...data }, "*");
}

function resize() {
  // The body's own height: the document's scrollHeight is at least the frame's height, so it would only grow.
  send("streamlit:setFrameHeight", { height: Math.ceil(document.body.getBoundingClientRect().height) + 12 });
}

function status(text, cls = "muted") {
  statusLine.textContent = text;
  statusLine.className = cls;
  resize();
}

function logLine(text, cls = "") {
  const li = document.createElement("li");
  li.textContent = text;
  if (cls) li.className = cls;
  logList.appendChild(li);
  resize();
  return li;
}

// The app's root URL: this page is served at <root>/component/<name>/index.html.
function appUrl(path) {
  return new URL("../../" + path, window.location.href).href;
}

function bytesFromBase64(text) {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function base64FromBytes(bytes) {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

// A one-node Identity model: opening it first starts the runtime (download and compile of its WebAssembly), so
// that one-off cost is reported on its own instead of inside the first model's session creation.
const WARMUP_MODEL = "CAg6PAoQCgF4EgF5IghJZGVudGl0eRIGd2FybXVwWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQDQ==";

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
  uint64: BigUint64Array, bool: Uint8Array,
};

function toTensor(ort, t) {
  if (t.type === "string") return new ort.Tensor("string", t.data, t.dims);
  const bytes = bytesFromBase64(t.data);
  const Kind = ARRAYS[t.type];
  if (!Kind) throw new Error(`input ${t.name} has type ${t.type}, which this page cannot build`);
  return new ort.Tensor(t.type, new Kind(bytes.buffer, 0, bytes.byteLength / Kind.BYTES_PER_ELEMENT), t.dims);
}

function fromTensor(name, tensor) {
  if (tensor.type === "string") return { name, type: "string", dims: Array.from(tensor.dims), data: Array.from(tensor.data) };
  const data = tensor.data;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return { name, type: tensor.type, dims: Array.from(tensor.dims), data: base64FromBytes(bytes) };
}

// An IEEE half (its 16 bits, as ONNX Runtime Web hands float16 data) as a number.
function halfToFloat(bits) {
  const exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff, sign = bits & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

// Each position's top class and the gap of its two best scores along the class axis, as the server keeps
// them for a tally (measure/parity.py top_two): [..., 2] float64, non-finite scores counted as 0.
function topTwo(name, tensor, axis) {
  const dims = Array.from(tensor.dims);
  const at = axis < 0 ? dims.length + axis : axis;
  const classes = dims[at];
  const outer = dims.slice(0, at).reduce((n, d) => n * d, 1);
  const inner = dims.slice(at + 1).reduce((n, d) => n * d, 1);
  const data = tensor.type === "float16" ? Float32Array.from(tensor.data, halfToFloat) : tensor.data;
  const out = new Float64Array(outer * inner * 2);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let best = -Infinity, second = -Infinity, index = 0;
      for (let c = 0; c < classes; c++) {
        let v = Number(data[(o * classes + c) * inner + i]);
        if (!Number.isFinite(v)) v = 0;
        if (v > best) { second = best; best = v; index = c; } else if (v > second) second = v;
      }
      out[(o * inner + i) * 2] = index;
      out[(o * inner + i) * 2 + 1] = best - second;
    }
  }
  const kept = [...dims.slice(0, at), ...dims.slice(at + 1), 2];
  return { name, type: "float64", dims: kept, data: base64FromBytes(new Uint8Array(out.buffer)) };
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function errorText(exc) {
  const text = (exc && (exc.message || String(exc))) || "unknown error";
  return text.length > 600 ? text.slice(0, 600) + "…" : text;
}

async function download(url) {
  const started = performance.now();
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`the server answered ${response.status} ${response.statusText}`);
  const body = new Uint8Array(await response.arrayBuffer());
  const ended = performance.now();
  const entries = performance.getEntriesByName(url);
  const entry = entries.length ? entries[entries.length - 1] : null;
  return {
    body,
    transferMs: entry ? entry.responseEnd - entry.startTime : ended - started,
    transferBytes: entry && entry.encodedBodySize ? entry.encodedBodySize : body.byteLength,
    modelBytes: body.byteLength,
    contentEncoding: response.headers.get("content-encoding") || "",
  };
}

// Models whose files add up to more than this are timed one after another (each session released before
// the next opens) instead of in interleaved rounds with every session open.
const KEEP_OPEN_BYTES = 256 * 1024 * 1024;
// Outputs sent back to the server, base64 characters in all (Streamlit's messages stop at 200 MB).
const MAX_OUTPUT_CHARS = 100 * 1024 * 1024;
let outputChars = 0;

// Download, open, first run (on the input the server's latency timed: like with like) and the outputs on the
// parity samples. Returns the result and the open session (null when it failed).
async function openModel(ort, model, inputs, backend) {
  if (inputs.set) return openSet(ort, model, inputs, backend);
  const result = { key: model.key, backend };
  let stage = "download";
  let session = null;
  try {
    const got = await download(appUrl(model.path));
    Object.assign(result, { transferMs: got.transferMs, transferBytes: got.transferBytes,
                            modelBytes: got.modelBytes, contentEncoding: got.contentEncoding });
    stage = "session";
    let t0 = performance.now();
    session = await ort.InferenceSession.create(got.body, { executionProviders: [backend] });
    result.sessionMs = performance.now() - t0;
    stage = "run";
    const feeds = (tensors) => Object.fromEntries(tensors.map((t) => [t.name, toTensor(ort, t)]));
    const timing = feeds(inputs.timing);
    t0 = performance.now();
    await session.run(timing);
    result.firstRunMs = performance.now() - t0;
    const outputs = [];
    for (const sample of inputs.samples) outputs.push(await session.run(feeds(sample)));
    stage = "outputs";
    const sent = inputs.judged ? session.outputNames.filter((name) => inputs.judged.includes(name)) : session.outputNames;
    const encoded = outputs.map((o) => sent.map((name) => fromTensor(name, o[name])));
    const chars = encoded.flat().reduce((n, t) => n + (typeof t.data === "string" ? t.data.length : 0), 0);
    if (outputChars + chars > MAX_OUTPUT_CHARS) {
      result.outputsTooLarge = chars; // ran, but its outputs are not sent back: parity is not judged
    } else {
      outputChars += chars;
      result.outputs = encoded;
      if (inputs.tally) { // more sets, sent back as each position's top class: what the server judged them by
        stage = "tally";
        result.tally = [];
        for (const sample of inputs.tally) {
          const o = await session.run(feeds(sample));
          result.tally.push(Object.entries(inputs.tallied).map(([name, axis]) => topTwo(name, o[name], axis)));
        }
      }
    }
    if (inputs.decoder) {
      stage = "generate";
      Object.assign(result, await generate(ort, session, timing, inputs.decoder));
    }
    return { result, session, timing, times: [] };
  } catch (exc) {
    result.error = errorText(exc);
    result.stage = stage;
    await release(session);
    return { result, session: null };
  }
}

// An encoder–decoder set: its encoder and decoder files downloaded and opened, each input written through it as
// the server wrote it (writeThrough), then timed as one whole output of the timing input. Its "session" is the
// pair; `once` is what a timed run does.
async function openSet(ort, model, inputs, backend) {
  const result = { key: model.key, backend };
  const set = inputs.set;
  let stage = "download";
  let pair = null;
  try {
    const files = [await download(appUrl(model.encoderPath)), await download(appUrl(model.path))];
    Object.assign(result, { transferMs: files[0].transferMs + files[1].transferMs,
                            transferBytes: files[0].transferBytes + files[1].transferBytes,
                            modelBytes: files[0].modelBytes + files[1].modelBytes,
                            contentEncoding: files[1].contentEncoding });
    stage = "session";
    let t0 = performance.now();
    pair = [await ort.InferenceSession.create(files[0].body, { executionProviders: [backend] })];
    pair.push(await ort.InferenceSession.create(files[1].body, { executionProviders: [backend] }));
    result.sessionMs = performance.now() - t0;
    stage = "run";
    const feeds = (tensors) => Object.fromEntries(tensors.map((t) => [t.name, toTensor(ort, t)]));
    const timing = feeds(inputs.timing);
    t0 = performance.now();
    const first = await writeThrough(ort, pair, set, timing, set.steps[0]);
    result.firstRunMs = performance.now() - t0;
    result.generated = first;
    result.setTokens = first.length; // tokens a second from the timed runs' median (start())
    const rows = [];
    for (const [index, sample] of inputs.samples.entries()) rows.push(await writeThrough(ort, pair, set, feeds(sample), set.steps[index]));
    result.generatedRows = rows;
    const once = () => writeThrough(ort, pair, set, timing, set.steps[0]);
    return { result, session: pair, timing, times: [], once };
  } catch (exc) {
    result.error = errorText(exc);
    result.stage = stage;
    await release(pair);
    return { result, session: null };
  }
}

// One input through a set, as the server ran it: the encoder once, then the decoder on everything written so far
// (a merged decoder on its no-cache branch, with an empty past), the greedy token each step, up to `steps` tokens
// or the end token.
async function writeThrough(ort, [enc, dec], set, feeds, steps) {
  const states = (await enc.run(feeds))[set.encoderOutput];
  const made = [set.start];
  for (let step = 0; step < steps; step++) {
    const f = { [set.decoderIds]: int64(ort, made, [1, made.length]), [set.decoderStates]: states };
    if (set.decoderMask && set.encoderMask) f[set.decoderMask] = feeds[set.encoderMask];
    for (const [name, shape, type] of set.past) {
      const dims = shape.map((d, i) => (i === 0 ? 1 : i === 2 ? 0 : d));
      f[name] = new ort.Tensor(type, new ARRAYS[type](0), dims);
    }
    if (set.useCache) f[set.useCache] = new ort.Tensor("bool", Uint8Array.from([0]), [1]);
    const token = lastArgmax((await dec.run(f))[set.logits]);
    made.push(token);
    if (set.end !== null && token === set.end) break;
  }
  return made.slice(1);
}

// The greedy token of the last position of logits [batch 1, positions, vocab].
function lastArgmax(tensor) {
  const vocab = tensor.dims[tensor.dims.length - 1];
  const data = tensor.data;
  const offset = data.length - vocab;
  let best = 0;
  for (let i = 1; i < vocab; i++) if (data[offset + i] > data[offset + best]) best = i;
  return best;
}

const int64 = (ort, values, dims) => new ort.Tensor("int64", BigInt64Array.from(values.map((v) => BigInt(v))), dims);

// A decoder LM writes in the page, as the server judged it: the prompt in one pass with an empty past, then
// one token a step through its cache (the past it returned, the mask one longer, the next position), or the
// whole sequence again without one. Tokens a second count the steps after the prompt's pass.
async function generate(ort, session, timing, dec) {
  let t0 = performance.now();
  let out = await session.run(timing);
  const prefillMs = performance.now() - t0;
  const ids = Array.from(timing[dec.inputIds].data, Number);
  const made = [lastArgmax(out[dec.logits])];
  t0 = performance.now();
  for (let step = 1; step < dec.tokens; step++) {
    const next = made[made.length - 1];
    ids.push(next);
    const feeds = {};
    if (dec.past.length) {
      feeds[dec.inputIds] = int64(ort, [next], [1, 1]);
      if (dec.positionIds) feeds[dec.positionIds] = int64(ort, [ids.length - 1], [1, 1]);
      if (dec.useCache) feeds[dec.useCache] = new ort.Tensor("bool", Uint8Array.from([1]), [1]);
      for (const [input, output] of dec.past) feeds[input] = out[output];
    } else {
      feeds[dec.inputIds] = int64(ort, ids, [1, ids.length]);
      if (dec.positionIds) feeds[dec.positionIds] = int64(ort, ids.map((_, i) => i), [1, ids.length]);
    }
    if (dec.attentionMask) feeds[dec.attentionMask] = int64(ort, ids.map(() => 1), [1, ids.length]);
    out = await session.run(feeds);
    made.push(lastArgmax(out[dec.logits]));
  }
  const stepsMs = performance.now() - t0;
  return { prefillMs, generated: made, tokensPerSecond: stepsMs > 0 ? (made.length - 1) / (stepsMs / 1000) : null };
}

async function release(session) {
  if (!session) return;
  if (Array.isArray(session)) { for (const one of session) await release(one); return; } // a set's pair
  try { await session.release(); } catch (exc) { /* released already */ }
}

// Timed runs in rounds, one run of every open model per round in rotating order, so that the runtime's
// warm-up (WebAssembly tiering up) and the machine's load hit all models alike; at least 3 runs each, then
// until `runs` each or the budget is spent.
async function timeInRounds(open, runs, budgetMs) {
  const until = performance.now() + budgetMs;
  for (let round = 0; ; round++) {
    const left = open.filter((o) => o.times.length < runs);
    if (!left.length || (round >= 3 && performance.now() > until)) break;
    for (let i = 0; i < left.length; i++) {
      const o = left[(i + round) % left.length];
      const t0 = performance.now();
      await (o.once ? o.once() : o.session.run(o.timing));
      o.times.push(performance.now() - t0);
    }
  }
  for (const o of open) {
    o.result.medianMs = o.times.length ? median(o.times) : null;
    o.result.runs = o.times.length;
  }
}

async function start() {
  if (running || !args) return;
  running = true;
  runButton.disabled = true;
  logList.textContent = "";
  const runId = args.runId;
  started.add(runId);
  outputChars = 0;
  const backend = backendSelect.value;
  try {
    status("Loading ONNX Runtime Web…");
    const module = backend === "webgpu" ? "./ort/ort.webgpu.min.mjs" : "./ort/ort.wasm.min.mjs";
    const ort = await import(module);
    ort.env.wasm.wasmPaths = new URL("./ort/", window.location.href).href; // absolute: see design.md
    if (!self.crossOriginIsolated) ort.env.wasm.numThreads = 1; // threads need COOP/COEP headers
    status("Starting ONNX Runtime Web (its WebAssembly is 14 MB)…");
    let t0 = performance.now();
    const warmup = await ort.InferenceSession.create(bytesFromBase64(WARMUP_MODEL), { executionProviders: [backend] });
    const runtimeStartMs = performance.now() - t0;
    await warmup.release();
    status("Downloading the inputs…");
    const response = await fetch(appUrl(args.inputsPath), { cache: "no-store" });
    if (!response.ok) throw new Error(`the inputs could not be downloaded (${response.status}); run the panel again`);
    const inputs = await response.json();
    const results = [];
    const open = [];
    const lines = [];
    let openBytes = 0;
    for (const [index, model] of args.models.entries()) {
      status(`Opening ${model.key} (${index + 1} of ${args.models.length})…`);
      const line = logLine(`${model.key}: running…`, "muted");
      const opened = await openModel(ort, model, inputs, backend);
      results.push(opened.result);
      lines.push(line);
      if (!opened.session) continue;
      openBytes += opened.result.modelBytes || 0;
      if (openBytes > KEEP_OPEN_BYTES) { // too big to keep every session open: time this one now, alone
        await timeInRounds([opened], args.runs, args.budgetMs);
        await release(opened.session);
      } else {
        open.push(opened);
      }
    }
    status(`Timing ${open.length} models in interleaved rounds…`);
    await timeInRounds(open, args.runs, args.budgetMs * Math.max(open.length, 1));
    for (const o of open) await release(o.session);
    for (const r of results) if (r.setTokens && r.medianMs) r.tokensPerSecond = r.setTokens / (r.medianMs / 1000);
    results.forEach((result, i) => {
      if (result.error) {
        lines[i].textContent = `${result.key}: failed (${result.stage}): ${result.error}`;
        lines[i].className = "bad";
      } else {
        lines[i].textContent = `${result.key}: session ${result.sessionMs.toFixed(0)} ms, first run ` +
          `${result.firstRunMs.toFixed(1)} ms, median ${result.medianMs == null ? "-" : result.medianMs.toFixed(1)} ms` +
          (result.tokensPerSecond ? `, ${result.tokensPerSecond.toFixed(0)} tokens/s` : "");
        lines[i].className = "ok";
      }
    });
    const version = (ort.env.versions && ort.env.versions.web) || args.version;
    const threads = ort.env.wasm.numThreads || 1;
    const userAgent = navigator.userAgent;
    for (const r of results) Object.assign(r, { userAgent, threads, runtimeStartMs, runtime: `onnxruntime-web ${version}` });
    finished.add(runId);
    status(`Done: ${results.length} models in ONNX Runtime Web ${version} (${backend}, ${threads} thread${threads > 1 ? "s" : ""}). Results below.`, "ok");
    send("streamlit:setComponentValue", { value: { runId, results, at: Date.now() }, dataType: "json" });
  } catch (exc) {
    status(`ONNX Runtime Web could not start in this browser: ${errorText(exc)}`, "bad");
    send("streamlit:setComponentValue", { value: { runId, fatal: errorText(exc), results: [], at: Date.now() }, dataType: "json" });
  } finally {
    running = false;
    runButton.disabled = false;
  }
}

function render(newArgs) {
  const changed = !args || args.runId !== newArgs.runId;
  args = newArgs;
  if (backendSelect.options.length === 1 && navigator.gpu && args.webgpuFiles) {
    backendSelect.add(new Option("WebGPU", "webgpu"));
  }
  where.textContent = `ONNX Runtime Web ${args.version}, served by this app`;
  if (!running) {
    runButton.disabled = false;
    runButton.textContent = args.done || finished.has(args.runId) ? "Run again" : "Run in this browser";
    if (changed) {
      logList.textContent = "";
      status(args.done ? "Results below (measured in this browser)." :
        `${args.models.length} models to download and run: press the button.`);
    }
  }
  if (args.autoStart && !args.done && !started.has(args.runId) && !running) start();
  resize();
}

window.addEventListener("message", (event) => {
  if (event.data && event.data.type === "streamlit:render") render(event.data.args);
});
runButton.addEventListener("click", start);
send("streamlit:componentReady", { apiVersion: 1 });

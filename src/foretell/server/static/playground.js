/* foretell playground: runs one chat request with and one without a prediction through the server's
 * OpenAI-compatible streaming endpoint and shows them side by side.
 *
 * Colouring uses the opt-in stream extension `stream_options.include_provenance` (docs/SERVER.md): each
 * chunk's choice carries `foretell.spans` ([{text, from_prediction}], concatenating to the chunk's text) and
 * the choice's running `completion_tokens`, `accepted_prediction_tokens` and `forward_passes`. The final
 * usage chunk (`stream_options.include_usage`) carries `usage` and the `foretell` stats block. Anything the
 * server does not send is shown as "–". No dependencies beyond jsdiff (vendored, for the diff view).
 */
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  const METHOD_LABELS = {
    auto: "auto",
    prediction: "prediction",
    ngram: "n-gram",
    none: "none (plain decoding)",
    draft: "draft model",
    cascade: "cascade (changes the output distribution)",
  };
  const BASE_METHODS = ["auto", "prediction", "ngram", "none"];
  const EXTRA_METHODS = ["draft", "cascade"];  // shown only when the server lists them

  const STATS = [
    ["tokens", "tokens"],
    ["tps", "tok/s"],
    ["wall", "wall time"],
    ["ttft", "first token"],
    ["accepted", "accepted"],
    ["rejected", "rejected"],
    ["passes", "forward passes"],
    ["perPass", "tokens / pass"],
  ];

  // -- one output pane --------------------------------------------------------------------------
  class Pane {
    constructor(root) {
      this.root = root;
      this.out = root.querySelector(".out");
      this.sources = root.querySelector(".sources");
      this.dd = {};
      const dl = root.querySelector(".stats");
      for (const [key, label] of STATS) {
        const div = document.createElement("div");
        div.className = "stat stat-" + key;
        const dt = document.createElement("dt");
        dt.textContent = label;
        const dd = document.createElement("dd");
        dd.dataset.stat = key;
        div.append(dt, dd);
        dl.append(div);
        this.dd[key] = dd;
      }
      this.reset();
    }

    reset() {
      this.out.textContent = "";
      this.sources.textContent = "";
      this.root.dataset.state = "idle";
      this.text = "";
      this.chunks = 0;
      this.tokens = null;  // from the provenance extension (exact) or the final usage
      this.accepted = null;
      this.rejected = null;
      this.passes = null;
      this.t0 = this.tFirst = this.tEnd = null;
      for (const dd of Object.values(this.dd)) dd.textContent = "–";
    }

    start() {
      this.reset();
      this.root.dataset.state = "running";
      this.t0 = performance.now();
      this.show();
    }

    /** Append a text delta; spans (from the provenance extension) say which parts came from the prediction. */
    append(text, spans) {
      if (!text) return;
      if (this.tFirst === null) this.tFirst = performance.now();
      this.chunks += 1;
      this.text += text;
      const out = this.out;
      const following = out.scrollHeight - out.scrollTop - out.clientHeight < 24;  // the reader is at the end
      const parts = Array.isArray(spans) && spans.length ? spans : [{ text, from_prediction: false }];
      for (const span of parts) {
        if (!span.text) continue;
        if (span.from_prediction) {
          const mark = document.createElement("mark");
          mark.className = "pred";
          mark.textContent = span.text;
          this.out.append(mark);
        } else {
          this.out.append(document.createTextNode(span.text));
        }
      }
      if (following) out.scrollTop = out.scrollHeight;
    }

    /** Running counts from the provenance extension of a chunk. */
    progress(ext) {
      if (!ext) return;
      if (Number.isFinite(ext.completion_tokens)) this.tokens = ext.completion_tokens;
      if (Number.isFinite(ext.accepted_prediction_tokens)) this.accepted = ext.accepted_prediction_tokens;
      if (Number.isFinite(ext.forward_passes)) this.passes = ext.forward_passes;
    }

    /** The final usage chunk: OpenAI's usage and foretell's stats block. */
    final(usage, stats) {
      if (usage) {
        this.tokens = usage.completion_tokens;
        const d = usage.completion_tokens_details || {};
        if (Number.isFinite(d.accepted_prediction_tokens)) this.accepted = d.accepted_prediction_tokens;
        if (Number.isFinite(d.rejected_prediction_tokens)) this.rejected = d.rejected_prediction_tokens;
      }
      if (stats && Number.isFinite(stats.forward_passes)) this.passes = stats.forward_passes;
      this.sources.textContent = describeSources(stats);
    }

    finish() {
      if (this.tEnd === null) this.tEnd = performance.now();
      this.root.dataset.state = "done";
      this.show();
    }

    fail(message) {
      this.tEnd = performance.now();
      this.root.dataset.state = "error";
      const p = document.createElement("span");
      p.className = "err";
      p.textContent = (this.text ? "\n" : "") + "Error: " + message;
      this.out.append(p);
      this.show();
    }

    get wall() {
      if (this.t0 === null) return null;
      return ((this.tEnd === null ? performance.now() : this.tEnd) - this.t0) / 1000;
    }

    show() {
      const wall = this.wall;
      const tokens = this.tokens !== null ? this.tokens : this.chunks || null;
      const approx = this.tokens === null && this.chunks > 0 ? "≈" : "";
      this.set("tokens", tokens === null ? "–" : approx + tokens);
      this.set("tps", tokens && wall ? approx + (tokens / wall).toFixed(1) : "–");
      this.set("wall", wall === null ? "–" : wall.toFixed(2) + " s");
      this.set("ttft", this.tFirst === null ? "–" : ((this.tFirst - this.t0) / 1000).toFixed(2) + " s");
      this.set("accepted", this.accepted === null ? "–" : String(this.accepted));
      this.set("rejected", this.rejected === null ? "–" : String(this.rejected));
      this.set("passes", this.passes === null ? "–" : String(this.passes));
      this.set("perPass", this.passes && tokens ? (tokens / this.passes).toFixed(2) : "–");
    }

    set(key, value) {
      if (this.dd[key].textContent !== value) this.dd[key].textContent = value;
    }
  }

  /** "draft tokens accepted / proposed: prediction 146 / 158 · n-gram 3 / 20" from the stats block. */
  function describeSources(stats) {
    const sources = stats && stats.sources;
    if (!sources) return "";
    const parts = Object.entries(sources)
      .filter(([, c]) => c && c.proposed > 0)
      .map(([name, c]) => `${METHOD_LABELS[name] || name} ${c.accepted} / ${c.proposed}`);
    return parts.length ? "Draft tokens accepted / proposed: " + parts.join(" · ") : "No draft tokens proposed.";
  }

  // -- streaming ----------------------------------------------------------------------------------
  function headers() {
    const h = { "Content-Type": "application/json" };
    const key = $("api-key").value.trim();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  async function errorMessage(resp) {
    try {
      const body = await resp.json();
      if (body && body.error) return body.error.message + (body.error.param ? " (" + body.error.param + ")" : "");
    } catch (e) { /* not JSON */ }
    return "HTTP " + resp.status;
  }

  function handleEvent(pane, data) {
    const chunk = JSON.parse(data);
    if (chunk.error) throw new Error(chunk.error.message || "stream error");
    if (chunk.choices && chunk.choices.length) {
      const choice = chunk.choices[0];
      const ext = choice.foretell;
      pane.append(choice.delta && choice.delta.content, ext && ext.spans);
      pane.progress(ext);
    }
    if (chunk.usage) pane.final(chunk.usage, chunk.foretell);
  }

  /** POST one streaming chat request and feed its chunks to ``pane``. */
  async function stream(body, pane, signal) {
    pane.start();
    const resp = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal,
    });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") return pane.finish();
          handleEvent(pane, data);
        }
      }
    }
    pane.finish();
  }

  // -- the form -------------------------------------------------------------------------------------
  function numberField(id, integer) {
    const raw = $(id).value.trim();
    if (raw === "") return null;
    const v = integer ? parseInt(raw, 10) : parseFloat(raw);
    if (!Number.isFinite(v)) throw new Error($(id).labels[0].firstChild.textContent.trim() + ": not a number");
    return v;
  }

  function buildRequests() {
    const instruction = $("instruction").value;
    const prediction = $("prediction").value;
    if (!instruction.trim() && !prediction.trim()) throw new Error("write an instruction or pick an example");
    const messages = [];
    if (instruction.trim()) messages.push({ role: "user", content: instruction });
    if ($("include-doc").checked && prediction) messages.push({ role: "user", content: prediction });
    const common = {
      model: $("model").value || "default",
      messages,
      stream: true,
      stream_options: { include_usage: true, include_provenance: true },
    };
    const maxTokens = numberField("max-tokens", true);
    const temperature = numberField("temperature", false);
    const topP = numberField("top-p", false);
    const seed = numberField("seed", true);
    const kMax = numberField("k-max", true);
    if (maxTokens !== null) common.max_tokens = maxTokens;
    if (temperature !== null) common.temperature = temperature;
    if (topP !== null) common.top_p = topP;
    if (seed !== null) common.seed = seed;
    const spec = (method) => (kMax === null ? { method } : { method, k_max: kMax });
    const withPred = Object.assign({}, common, { speculation: spec($("method").value) });
    if (prediction) withPred.prediction = { type: "content", content: prediction };
    const without = Object.assign({}, common, { speculation: spec($("baseline").value) });
    return { withPred, without };
  }

  const panes = { with: null, without: null };
  let controller = null;
  let ticker = null;

  function tick() {
    panes.with.show();
    panes.without.show();
    ticker = requestAnimationFrame(tick);
  }

  function setRunning(running) {
    $("run").disabled = running;
    $("stop").disabled = !running;
    document.body.classList.toggle("running", running);
    if (running && ticker === null) ticker = requestAnimationFrame(tick);
    if (!running && ticker !== null) {
      cancelAnimationFrame(ticker);
      ticker = null;
      panes.with.show();
      panes.without.show();
    }
  }

  /** One token of the baseline request, not streamed: puts the prompt into the server's prefix cache. */
  async function warm(body, signal) {
    const once = Object.assign({}, body, { stream: false, max_tokens: 1, speculation: { method: "none" } });
    delete once.stream_options;
    const resp = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(once), signal,
    });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    await resp.json();
  }

  async function guarded(body, pane, signal) {
    try {
      await stream(body, pane, signal);
      return true;
    } catch (e) {
      pane.fail(e.name === "AbortError" ? "stopped" : e.message);
      return false;
    }
  }

  async function run(event) {
    if (event) event.preventDefault();
    if (controller) return;
    let reqs;
    try {
      reqs = buildRequests();
    } catch (e) {
      $("run-status").textContent = "Cannot run: " + e.message;
      return;
    }
    controller = new AbortController();
    const signal = controller.signal;
    panes.with.reset();
    panes.without.reset();
    resetSummary();
    setRunning(true);
    let ok;
    if ($("warm").checked) {
      $("run-status").textContent = "Warming the prompt cache…";
      try {
        await warm(reqs.without, signal);
      } catch (e) {
        panes.with.fail(e.name === "AbortError" ? "stopped" : e.message);
        controller = null;
        setRunning(false);
        summarize(false);
        return;
      }
    }
    $("run-status").textContent = "Running…";
    if ($("order").value === "parallel") {
      ok = await Promise.all([guarded(reqs.withPred, panes.with, signal), guarded(reqs.without, panes.without, signal)]);
    } else {
      ok = [await guarded(reqs.withPred, panes.with, signal)];
      ok.push(signal.aborted ? false : await guarded(reqs.without, panes.without, signal));
    }
    controller = null;
    setRunning(false);
    summarize(ok[0] && ok[1]);
  }

  function stop() {
    if (controller) controller.abort();
  }

  // -- summary and diff -------------------------------------------------------------------------------
  function resetSummary() {
    $("speedup").textContent = "–";
    $("same").textContent = "–";
    $("summary").dataset.state = "idle";
  }

  function summarize(bothOk) {
    const a = panes.with, b = panes.without;
    if (!bothOk) {
      $("run-status").textContent = "Stopped or failed; see the panes.";
      renderDiff();
      return;
    }
    const speedup = b.wall / a.wall;
    $("speedup").textContent = speedup.toFixed(2) + "×";
    $("speedup").title = "wall time without ÷ wall time with the prediction";
    const same = a.text === b.text;
    $("same").textContent = same ? "yes ✓" : "no";
    $("summary").dataset.state = "done";
    const share = a.tokens ? Math.round((100 * (a.accepted || 0)) / a.tokens) : 0;
    $("run-status").textContent =
      `Done: ${a.tokens ?? "?"} tokens, ${share}% from the prediction; ${a.wall.toFixed(2)} s with, ` +
      `${b.wall.toFixed(2)} s without (${speedup.toFixed(2)}× speedup).`;
    renderDiff();
  }

  function renderDiff() {
    const target = $("diff");
    const output = panes.with.text || panes.without.text;
    const prediction = $("prediction").value;
    target.textContent = "";
    if (!output) {
      target.textContent = "No output yet.";
      return;
    }
    if (typeof Diff === "undefined") {
      target.textContent = "(the diff library did not load)";
      return;
    }
    const parts = $("diff-mode").value === "words" ? Diff.diffWordsWithSpace(prediction, output) : Diff.diffLines(prediction, output);
    let changes = 0;
    for (const part of parts) {
      const node = document.createElement(part.added ? "ins" : part.removed ? "del" : "span");
      node.textContent = part.value;
      if (part.added || part.removed) changes += 1;
      target.append(node);
    }
    target.dataset.changes = String(changes);
    if (!changes) target.prepend(document.createTextNode("(the output is exactly the prediction)\n"));
  }

  // -- setup ----------------------------------------------------------------------------------------
  async function loadExamples() {
    const holder = $("example-buttons");
    try {
      const resp = await fetch("/static/examples.json");
      const { examples } = await resp.json();
      for (const ex of examples) {
        const btn = document.createElement("button");
        btn.type = "button";
        btn.className = "example";
        btn.dataset.example = ex.id;
        btn.textContent = ex.title;
        btn.addEventListener("click", () => {
          $("instruction").value = ex.instruction;
          $("prediction").value = ex.prediction;
          if (ex.max_tokens) $("max-tokens").value = ex.max_tokens;
          for (const b of holder.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === btn));
          $("run-status").textContent = `Loaded the example “${ex.title}”. Press Run both.`;
        });
        holder.append(btn);
      }
    } catch (e) {
      holder.textContent = "(examples unavailable)";
    }
  }

  function setMethods(methods) {
    const select = $("method");
    const current = select.value;
    const wanted = BASE_METHODS.concat(EXTRA_METHODS.filter((m) => methods.includes(m)));
    select.textContent = "";
    for (const m of wanted) {
      const opt = document.createElement("option");
      opt.value = m;
      opt.textContent = METHOD_LABELS[m] || m;
      select.append(opt);
    }
    select.value = wanted.includes(current) ? current : "auto";
  }

  async function loadModels() {
    const status = $("server-status");
    try {
      const resp = await fetch("/v1/models", { headers: headers() });
      if (resp.status === 401) {
        status.textContent = "The server needs an API key: enter it under Model and sampling.";
        status.dataset.state = "warn";
        return;
      }
      if (!resp.ok) throw new Error(await errorMessage(resp));
      const { data } = await resp.json();
      const select = $("model");
      select.textContent = "";
      for (const card of data) {
        const opt = document.createElement("option");
        opt.value = card.id;
        opt.textContent = card.id;
        if (card.max_model_len) opt.title = `context: ${card.max_model_len} tokens`;
        select.append(opt);
      }
      setMethods((data[0] && data[0].speculation_methods) || []);
      status.textContent = "Connected: serving " + data.map((c) => c.id).join(", ") + ".";
      status.dataset.state = "ok";
    } catch (e) {
      status.textContent = "Cannot reach the server's /v1/models: " + e.message;
      status.dataset.state = "warn";
    }
  }

  function init() {
    panes.with = new Pane($("pane-with"));
    panes.without = new Pane($("pane-without"));
    $("form").addEventListener("submit", run);
    $("stop").addEventListener("click", stop);
    $("diff-mode").addEventListener("change", renderDiff);
    $("api-key").addEventListener("change", loadModels);
    document.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(e);
      else if (e.key === "Escape" && controller) stop();
    });
    if (window.matchMedia("(max-width: 480px)").matches) $("settings").open = false;  // phones: the boxes first
    loadExamples();
    loadModels();
  }

  init();
})();

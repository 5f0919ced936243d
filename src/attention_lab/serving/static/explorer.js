// attention explorer: choose a model, run it through the service, draw its attention (no libraries).
"use strict";

const $ = (id) => document.getElementById(id);
const EXAMPLES = {
  translate: "the young man reads a book in the library",
  classify: "The hotel was booked months in advance. At first the room seemed dirty, " +
    "but in the end it was wonderful. The parking lot next door was awful.",
};
let models = {};

function el(tag, props = {}, children = []) {
  const node = Object.assign(document.createElement(tag), props);
  for (const child of children) node.append(child);
  return node;
}

function shade(weight, rgb = "29, 78, 216") {  // weight in [0, 1] -> a colour whose opacity is the weight
  return `rgba(${rgb}, ${Math.max(0, Math.min(1, weight)).toFixed(3)})`;
}

function showTooltip(event, text) {
  const tip = $("tooltip");
  tip.textContent = text;
  tip.hidden = false;
  tip.style.left = `${event.clientX + 12}px`;
  tip.style.top = `${event.clientY + 12}px`;
}

function hideTooltip() { $("tooltip").hidden = true; }

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

function errorText(body, status) {
  const detail = body && body.detail;
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
  return detail ? String(detail) : `HTTP ${status}`;
}

async function loadModels() {
  const response = await fetch("/models");
  const list = await response.json();
  const select = $("model");
  for (const task of [...new Set(list.map((m) => m.task))].sort()) {
    const group = el("optgroup", { label: task });
    for (const m of list.filter((x) => x.task === task)) {
      models[m.name] = m;
      group.append(el("option", { value: m.name, textContent: `${m.name} (${m.family})` }));
    }
    select.append(group);
  }
  $("status").textContent = `${list.length} model${list.length === 1 ? "" : "s"} served`;
  onModelChange();
}

function onModelChange() {
  const m = models[$("model").value];
  if (!m) return;
  const caption = m.task === "caption";
  $("beam-field").hidden = !["translate", "caption"].includes(m.task);
  $("model-info").textContent = `${m.task}: ${m.input}`;
  $("text").hidden = caption;
  $("example").hidden = caption;
  $("image-field").hidden = !caption;
  if (caption && m.image_input === "photo") {
    $("image").accept = "image/jpeg,image/png";
    $("image-hint").textContent = "a JPEG or PNG photo, any size";
  } else if (caption) {
    const [h, w] = m.graphs[0].inputs[0].shape.slice(1);
    $("image").accept = "image/png";
    $("image-hint").textContent = Number.isInteger(h) && Number.isInteger(w) ? `${w}×${h} pixels` : "";
  }
  const text = $("text");
  if (!text.value.trim() || Object.values(EXAMPLES).includes(text.value)) text.value = EXAMPLES[m.task] || "";
}

function drawHeatmap(result) {  // rows: output tokens; columns: source words; attention is (words, tokens)
  const table = $("heatmap");
  table.replaceChildren();
  $("translate-no-attention").hidden = result.has_attention;
  if (!result.has_attention) return;
  const head = el("tr", {}, [el("th")]);
  result.source_words.forEach((w, j) => head.append(el("th", { textContent: w, className: `col-${j}` })));
  table.append(el("thead", {}, [head]));
  const body = el("tbody");
  result.tokens.forEach((token, i) => {
    const row = el("tr", { className: "heat-row" }, [el("th", { textContent: token, className: `row-${i}` })]);
    result.source_words.forEach((word, j) => {
      const weight = result.attention[j][i];
      const cell = el("td", { className: "cell", title: `${token} ← ${word}: ${weight.toFixed(3)}` });
      cell.dataset.weight = weight;
      cell.style.background = shade(weight);
      cell.addEventListener("mousemove", (e) => showTooltip(e, `${token} ← ${word}: ${weight.toFixed(3)}`));
      cell.addEventListener("mouseenter", () => table.querySelectorAll(`.row-${i}, .col-${j}`)
        .forEach((n) => n.classList.add("hover")));
      cell.addEventListener("mouseleave", () => {
        hideTooltip();
        table.querySelectorAll(".hover").forEach((n) => n.classList.remove("hover"));
      });
      row.append(cell);
    });
    body.append(row);
  });
  table.append(body);
}

function showTranslation(result) {
  $("translation").textContent = result.translation || "(empty)";
  drawHeatmap(result);
}

function bar(weight) {
  return el("div", { className: "track" }, [el("div", { className: "bar", style: `width: ${100 * weight}%` })]);
}

function showClassification(result) {
  $("label").textContent = result.label;
  $("probabilities").replaceChildren(...Object.entries(result.probabilities).map(([name, p]) =>
    el("div", { className: "prob" }, [el("span", { className: "name", textContent: name }), bar(p),
      el("span", { className: "muted", textContent: p.toFixed(3) })])));
  const weighted = result.sentence_weights !== null;
  $("classify-no-attention").hidden = weighted;
  const top = weighted ? Math.max(...result.word_weights.flat(), 1e-9) : 1;
  $("document").replaceChildren(...result.sentences.map((words, n) => {
    const w = weighted ? result.sentence_weights[n] : 0;
    const spans = words.map((word, k) => {
      const span = el("span", { className: "word", textContent: word });
      if (weighted) {
        const ww = result.word_weights[n][k];
        span.dataset.weight = ww;
        span.style.background = shade(0.8 * ww / top, "245, 158, 11");  // amber
        span.addEventListener("mousemove", (e) => showTooltip(e, `${word}: ${ww.toFixed(3)}`));
        span.addEventListener("mouseleave", hideTooltip);
      }
      return [span, " "];
    }).flat();
    return el("div", { className: "sentence" }, [
      el("span", { className: "weight", textContent: weighted ? w.toFixed(2) : "" }), bar(w),
      el("span", { className: "words" }, spans)]);
  }));
}

function photoCard(src, word, attention) {  // the photo under word's attention (h, w), scaled to its own maximum
  const [h, w] = [attention.length, attention[0].length];
  const heat = el("canvas", { className: "heat", width: w, height: h });  // the browser smooths it to the photo's size
  const top = Math.max(...attention.flat(), 1e-9);
  const pixels = heat.getContext("2d").createImageData(w, h);
  attention.flat().forEach((a, k) => pixels.data.set([220, 38, 38, Math.round(200 * a / top)], 4 * k));
  heat.getContext("2d").putImageData(pixels, 0, 0);
  heat.addEventListener("mousemove", (e) => {
    const i = Math.min(h - 1, Math.floor(e.offsetY / heat.clientHeight * h));
    const j = Math.min(w - 1, Math.floor(e.offsetX / heat.clientWidth * w));
    showTooltip(e, `${word} ← region (${i}, ${j}): ${attention[i][j].toFixed(3)}`);
  });
  heat.addEventListener("mouseleave", hideTooltip);
  return el("div", { className: "word-card" }, [el("div", { className: "photo" }, [el("img", { src, alt: word }), heat]),
    el("span", { className: "strip-word", textContent: word })]);
}

function showCaption(result, m) {
  $("caption").textContent = result.caption || "(empty)";
  $("caption-no-attention").hidden = result.has_attention;
  const photo = m.image_input === "photo";
  $("overlay").hidden = photo;  // a photo model's words are drawn over the photo itself, below
  if (photo) {
    const src = URL.createObjectURL($("image").files[0]);
    $("word-strip").replaceChildren(...result.words.map((word, t) => photoCard(src, word, result.attention[t])));
    return;
  }
  const [h, w] = result.grid;
  $("word-strip").replaceChildren(...result.words.map((word, t) => {
    const grid = el("div", { className: "attn-grid" });
    grid.style.gridTemplateColumns = `repeat(${w}, 8px)`;
    const top = Math.max(...result.attention[t].flat(), 1e-9);
    for (let i = 0; i < h; i++) {
      for (let j = 0; j < w; j++) {
        const a = result.attention[t][i][j];
        const cell = el("div");
        cell.style.background = shade(a / top, "220, 38, 38");  // each word scaled to its own maximum
        grid.append(cell);
      }
    }
    grid.addEventListener("mouseleave", hideTooltip);
    grid.addEventListener("mousemove", (e) => showTooltip(e, `${word}: max ${top.toFixed(3)}`));
    return el("div", { className: "word-card" }, [grid, el("span", { className: "strip-word", textContent: word })]);
  }));
  $("overlay").src = result.overlay;
}

function request(m) {  // fetch options for the chosen model's endpoint, or a message when input is missing
  if (m.task === "caption") {
    const file = $("image").files[0];
    if (!file) return m.image_input === "photo" ? "choose a JPEG or PNG photo first" : "choose a PNG image first";
    const form = new FormData();
    form.append("model", m.name);
    form.append("beam", String(Number($("beam").value) || 1));
    form.append("image", file, file.name);
    return { method: "POST", body: form };  // the browser sets the multipart boundary
  }
  const body = { model: m.name, text: $("text").value };
  if (m.task === "translate") body.beam = Number($("beam").value) || 1;
  return { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
}

async function run(event) {
  event.preventDefault();
  const m = models[$("model").value];
  if (!m) return;
  $("error").hidden = true;
  const options = request(m);
  if (typeof options === "string") { showError(options); return; }
  $("submit").disabled = true;
  try {
    const response = await fetch(`/${m.task}`, options);
    const result = await response.json().catch(() => null);
    if (!response.ok) { showError(errorText(result, response.status)); return; }
    $("translate-view").hidden = m.task !== "translate";
    $("classify-view").hidden = m.task !== "classify";
    $("caption-view").hidden = m.task !== "caption";
    if (m.task === "translate") showTranslation(result);
    else if (m.task === "caption") showCaption(result, m);
    else showClassification(result);
    $("latency").textContent = `${result.latency_ms.toFixed(1)} ms on the server`;
    $("output").hidden = false;
  } catch (err) {
    showError(`request failed: ${err}`);
  } finally {
    $("submit").disabled = false;
  }
}

$("form").addEventListener("submit", run);
$("model").addEventListener("change", onModelChange);
$("example").addEventListener("click", () => {
  const m = models[$("model").value];
  if (m) $("text").value = EXAMPLES[m.task] || "";
});
loadModels().catch((err) => showError(`cannot list models: ${err}`));

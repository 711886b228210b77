"""The decoder's ``--attention_dir``: PNGs per sentence, kind and layer, and an HTML page.

    write_attention_dir(records, "attention_out")
    # attention_out/sentence_001/encdec_layer_0.png ... and attention_out/index.html

``index.html`` is self-contained (no network, no files besides itself): the weights are
embedded as JSON (permille integers, ``[N][h][q][k]`` per kind) and a small script draws
the heatmap of the chosen sentence, kind, layer and head (or every head of the layer),
with the tokens on the axes and the weight of a cell on hover.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from t2t_lite.errors import UserError
from t2t_lite.monitoring.attention import (KINDS, AttentionRecord, TokenLabeler,
                                           compute_records, with_eos)
from t2t_lite.monitoring.rendering import COLORMAP, kind_layer_images, to_png


def png_paths(directory: Path, count: int, num_layers: int) -> List[Path]:
    """Every PNG ``write_attention_dir`` writes for ``count`` sentences."""
    return [directory / f"sentence_{n:03d}" / f"{kind}_layer_{layer}.png"
            for n in range(1, count + 1) for kind in KINDS for layer in range(num_layers)]


def report_data(records: Sequence[AttentionRecord]) -> Dict:
    """The page's JSON: per sentence its texts, token labels and permille weights."""
    sentences = []
    for record in records:
        entry = {"source": record.source, "target": record.target, "mode": record.mode,
                 "labels": {kind: [list(axis) for axis in record.axis_labels(kind)]
                            for kind in KINDS},
                 "weights": {kind: np.rint(record.weights[kind] * 1000).astype(int).tolist()
                             for kind in KINDS}}
        sentences.append(entry)
    return {"kinds": list(KINDS), "sentences": sentences}


def _colormap_stops(steps: int = 11) -> List[List[int]]:
    from matplotlib import colormaps
    cmap = colormaps[COLORMAP]
    return [[int(round(255 * c)) for c in cmap(i / (steps - 1))[:3]] for i in range(steps)]


def write_attention_dir(records: Sequence[AttentionRecord], directory) -> Path:
    """Writes the PNGs and ``index.html`` for ``records``; returns the page's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for number, record in enumerate(records, start=1):
        folder = directory / f"sentence_{number:03d}"
        folder.mkdir(exist_ok=True)
        for kind in KINDS:
            for layer in range(record.num_layers):
                image = kind_layer_images([record], kind, layer)[0]
                (folder / f"{kind}_layer_{layer}.png").write_bytes(to_png(image))
    payload = json.dumps(report_data(records), ensure_ascii=False, separators=(",", ":"))
    page = (_PAGE.replace("__DATA__", payload.replace("</", "<\\/"))
            .replace("__STOPS__", json.dumps(_colormap_stops()))
            .replace("__TITLE__", html.escape(f"t2t-lite attention: {len(records)} sentences")))
    path = directory / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def write_decoder_attention(model, vocabulary, sources: Sequence[str],
                            source_ids: Sequence[Sequence[int]], hypotheses: Sequence[str],
                            directory, limit: int = 20) -> Path:
    """The decoder's ``--attention_dir``: the first ``limit`` sentences, teacher-forced on
    their best hypothesis (re-tokenised); ``source_ids`` as encoded (EOS-terminated)."""
    if limit < 1:
        raise UserError(f"--attention_sentences must be >= 1, got {limit}")
    count = min(limit, len(sources))
    labeler = TokenLabeler(vocabulary)
    targets = [with_eos(ids) for ids in vocabulary.encode_batch(list(hypotheses[:count]))]
    records: List[AttentionRecord] = []
    for start in range(0, count, 8):  # small batches: padding stays short
        end = min(start + 8, count)
        records += compute_records(model, list(zip(source_ids[start:end], targets[start:end])),
                                   labeler, list(zip(sources[start:end], hypotheses[start:end])),
                                   "translation")
    return write_attention_dir(records, directory)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font: 14px sans-serif; margin: 16px; color: #222; }
label { margin-right: 14px; } select { font-size: 14px; }
#texts { margin: 12px 0; } #texts div { margin: 3px 0; }
.head { display: inline-block; vertical-align: top; margin: 0 18px 18px 0; }
.head h3 { font-size: 13px; margin: 4px 0; }
table.map { border-collapse: collapse; font-size: 11px; }
table.map td.c { width: 18px; height: 18px; padding: 0; }
table.map th { font-weight: normal; padding: 0 4px; white-space: nowrap; }
table.map th.q { text-align: right; }
table.map th.k { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left;
                 height: auto; padding: 4px 0; }
</style></head><body>
<h2>__TITLE__</h2>
<div>
<label>sentence <select id="sentence"></select></label>
<label>kind <select id="kind"></select></label>
<label>layer <select id="layer"></select></label>
<label>head <select id="head"></select></label>
</div>
<div id="texts"></div>
<div id="maps"></div>
<script>
const DATA = __DATA__;
const STOPS = __STOPS__;
const $ = (id) => document.getElementById(id);
function colour(v) {
  const x = Math.min(Math.max(v, 0), 1) * (STOPS.length - 1);
  const i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
  const c = STOPS[i].map((a, j) => Math.round(a + f * (STOPS[i + 1][j] - a)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
function fill(select, values, labels) {
  const old = select.value;
  select.innerHTML = "";
  values.forEach((v, i) => { const o = document.createElement("option");
    o.value = v; o.textContent = labels ? labels[i] : v; select.appendChild(o); });
  if (values.map(String).includes(old)) select.value = old;
}
function table(weights, queries, keys) {
  const t = document.createElement("table"); t.className = "map";
  weights.forEach((row, q) => {
    const tr = t.insertRow(); const th = document.createElement("th");
    th.className = "q"; th.textContent = queries[q]; tr.appendChild(th);
    row.forEach((w, k) => { const td = tr.insertCell(); td.className = "c";
      td.style.background = colour(w / 1000);
      td.title = `${queries[q]} -> ${keys[k]}: ${(w / 1000).toFixed(3)}`; });
  });
  const tr = t.insertRow(); tr.appendChild(document.createElement("th"));
  keys.forEach((k) => { const th = document.createElement("th"); th.className = "k";
    th.textContent = k; tr.appendChild(th); });
  return t;
}
function draw() {
  const s = DATA.sentences[+$("sentence").value], kind = $("kind").value;
  const layers = s.weights[kind];
  fill($("layer"), layers.map((_, i) => i));
  const heads = layers[0].map((_, i) => i);
  fill($("head"), ["all"].concat(heads), ["all heads"].concat(heads.map(String)));
  const layer = +$("layer").value, head = $("head").value;
  const [queries, keys] = s.labels[kind];
  $("texts").innerHTML = "";
  [["source", s.source], [`target (forced: ${s.mode})`, s.target]].forEach(([n, v]) => {
    const d = document.createElement("div"); d.innerHTML = `<b>${n}:</b> `;
    d.appendChild(document.createTextNode(v)); $("texts").appendChild(d); });
  $("maps").innerHTML = "";
  (head === "all" ? heads : [+head]).forEach((h) => {
    const box = document.createElement("div"); box.className = "head";
    const title = document.createElement("h3");
    title.textContent = `${kind} · layer ${layer} · head ${h}`;
    box.appendChild(title); box.appendChild(table(layers[layer][h], queries, keys));
    $("maps").appendChild(box);
  });
}
fill($("sentence"), DATA.sentences.map((_, i) => i),
     DATA.sentences.map((s, i) => `${i + 1}: ${s.source.slice(0, 60)}`));
fill($("kind"), DATA.kinds);
["sentence", "kind", "layer", "head"].forEach((id) => $(id).addEventListener("change", draw));
draw();
</script>
</body></html>
"""

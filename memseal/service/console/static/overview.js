// Overview: the ledger's size, the latest checkpoint and its note, the keys and their
// rotation chain, the open runs, and calls/s and the error rate from /metrics.
import { api, query } from "./api.js";
import { cosignatures } from "./crypto.js";
import { badge, h, pre, table } from "./ui.js";

const SVG = "http://www.w3.org/2000/svg";
const SAMPLES = 30;

export function parseMetrics(text) {
  let calls = 0;
  let errors = 0;
  for (const line of text.split("\n")) {
    const m = /^memseal_tool_calls_total\{tool="[^"]*",outcome="([^"]*)"\} (\d+(?:\.\d+)?)$/.exec(line);
    if (!m) continue;
    calls += Number(m[2]);
    if (m[1] !== "ok") errors += Number(m[2]);
  }
  return { calls, errors };
}

function chart() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", "320");
  svg.setAttribute("height", "80");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Tool calls per second, last minute");
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2b4acb");
  line.setAttribute("stroke-width", "2");
  const errLine = document.createElementNS(SVG, "polyline");
  errLine.setAttribute("fill", "none");
  errLine.setAttribute("stroke", "#b00020");
  errLine.setAttribute("stroke-width", "2");
  svg.append(line, errLine);
  return { svg, line, errLine };
}

function metricsPanel() {
  const { svg, line, errLine } = chart();
  const label = h("p", { "aria-live": "off" }, "Reading /metrics…");
  const panel = h("div", {}, svg, label);
  const rates = [];
  let last = null;
  async function tick() {
    if (!document.body.contains(panel) && last !== null) return; // the page was left
    try {
      const res = await fetch("/metrics");
      const now = performance.now();
      const m = parseMetrics(await res.text());
      if (last) {
        const dt = (now - last.at) / 1000;
        const calls = Math.max(0, m.calls - last.calls);
        const errors = Math.max(0, m.errors - last.errors);
        rates.push({ cps: calls / dt, eps: errors / dt });
        if (rates.length > SAMPLES) rates.shift();
        const top = Math.max(1, ...rates.map((r) => r.cps));
        const pts = (f) => rates.map((r, i) => `${(i * 320) / (SAMPLES - 1)},${78 - (f(r) / top) * 74}`).join(" ");
        line.setAttribute("points", pts((r) => r.cps));
        errLine.setAttribute("points", pts((r) => r.eps));
        const rate = calls ? ((100 * errors) / calls).toFixed(1) : "0.0";
        label.textContent = `${(calls / dt).toFixed(2)} tool calls/s, ${rate}% errors (blue: calls/s, red: errors/s; ${m.calls} calls since start)`;
      }
      last = { at: now, calls: m.calls, errors: m.errors };
    } catch (err) {
      label.textContent = `metrics unavailable: ${err.message}`;
    }
    setTimeout(tick, 2000);
  }
  tick();
  return panel;
}

export async function render() {
  const info = await api("/v1/ledger");
  const note = await api("/v1/ledger/checkpoint", { text: true });
  const lines = note.split("\n");
  const rotations = await api(`/v1/ledger/entries${query({ kind: "key_rotated", start: 0, limit: 50 })}`);
  const chain = [["first key (trust root)", info.trust_root, "—"]];
  for (const e of rotations.entries) chain.push([`rotated at seq ${e.seq}`, e.header.body.vkey, `signed by ${e.header.key}`]);
  const runs = await api(`/v1/ledger/runs${query({ limit: 100 })}`);
  const open = runs.runs.filter((r) => r.leased);
  const witnessed = cosignatures(note);
  return h(
    "section",
    { "aria-labelledby": "overview-title" },
    h("h2", { id: "overview-title" }, "Overview"),
    table("Ledger", ["field", "value"], [
      ["size", `${info.size.toLocaleString()} entries`],
      ["origin", info.origin],
      ["latest checkpoint", `size ${lines[1]}, root ${lines[2]}`],
      ["current key", info.vkey],
    ]),
    h("h3", {}, "Latest checkpoint (signed note)"),
    pre(note, "Latest checkpoint note"),
    table("Witness cosignatures the latest checkpoint claims (not checked here; memseal verify --witness VKEY checks them)", ["witness", "key id", "cosigned at"], witnessed.map((c) => [c.name, c.id, c.time])),
    witnessed.length ? null : h("p", { class: "muted" }, "No witness cosigns this checkpoint (serve --witness names witnesses)."),
    table("Keys and rotation chain", ["key", "vkey", "signature"], chain),
    rotations.next !== null ? h("p", { class: "muted" }, `Rotations listed from the first ${rotations.next.toLocaleString()} entries; the Ledger page (kind key_rotated) scans on.`) : null,
    table("Open runs (leased now)", ["run", "holder", "place", "steps"], open.map((r) => [h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id), r.holder || "", r.place, String(r.recorded_steps)])),
    open.length ? null : h("p", { class: "muted" }, "No run is leased now (among the 100 newest)."),
    h("h3", {}, "Tool calls"),
    metricsPanel(),
    h("p", {}, badge("verify"), " ", h("a", { href: "#/verify" }, "Check the checkpoint and the entries in this browser")),
  );
}



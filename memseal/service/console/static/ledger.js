// Ledger: entries paged and filtered (the API scans a bounded window per request), one
// entry's header, signed bytes, signature, key, payload (when in reach), redaction, proofs.
import { api, query } from "./api.js";
import { checkPayload } from "./crypto.js";
import { decodeB64Text, errorBox, field, h, pre, pretty, short, table } from "./ui.js";

// The shown payload against the payload_hash in the entry's own bytes, computed here (the
// entry's signature is Verify here's to check: this says the payload is the one signed for).
function payloadCheck(e, signed) {
  try {
    const how = checkPayload(e.seq, e.payload, e.salt, JSON.parse(signed).payload_hash, signed);
    const what = how === "residue" ? "each text the forget left hashes to the ref the entry signs" : "BLAKE3 of the salt and payload, computed here, is the payload_hash in the entry's bytes";
    return h("p", { class: "ok", "data-payload-check": "pass" }, `✓ payload: ${what}`);
  } catch (err) {
    return h("p", { class: "bad", role: "alert", "data-payload-check": "fail" }, `✗ seq ${e.seq}: payload hash: ${err.message}`);
  }
}

const KINDS = ["", "memory_stored", "trust_changed", "memory_forgotten", "memory_tool_call", "run_started", "run_forked", "key_rotated", "note"];
const LIMIT = 50;
// Filters survive moving to an entry and back.
const state = { kind: "", run: "", start: null };

export function payloadStatus(e) {
  if (e.header.payload_hash === null) return "no payload";
  if (e.redacted) return e.redacted_by === null || e.redacted_by === undefined ? "erased by a forget" : `erased by the forget at seq ${e.redacted_by}`;
  if (e.payload_withheld) return "withheld (outside your reach)";
  return "shown";
}

function summary(e) {
  const b = e.header.body || {};
  if (e.kind === "memory_tool_call") return `${b.run_id} step ${b.step} ${b.tool}${b.error ? " (error)" : ""}${b.supersedes !== null && b.supersedes !== undefined ? ` supersedes ${b.supersedes}` : ""}`;
  if (e.kind === "memory_stored") return `${b.item} in ${b.namespace} (${b.trust})`;
  if (e.kind === "trust_changed") return `${b.item}: ${b.previous} → ${b.trust}`;
  if (e.kind === "memory_forgotten") return `forgets ${(b.items || []).join(", ")}`;
  if (e.kind === "run_started") return `${b.run_id} at ${b.place} (${b.mode})`;
  if (e.kind === "run_forked") return `${b.run_id} diverged at step ${b.step}`;
  return short(b, 70);
}

async function list() {
  const info = await api("/v1/ledger");
  const filtered = state.kind || state.run;
  if (state.start === null) state.start = filtered ? 0 : Math.max(0, info.size - LIMIT);
  const page = await api(`/v1/ledger/entries${query({ start: state.start, limit: LIMIT, kind: state.kind, run: state.run })}`);
  const kindSel = h("select", {}, KINDS.map((k) => h("option", { value: k, selected: k === state.kind }, k || "any kind")));
  const runIn = h("input", { type: "text", value: state.run, size: 30 });
  const startIn = h("input", { type: "number", min: 0, value: state.start });
  const go = async (start) => {
    state.start = start;
    document.getElementById("main").replaceChildren(await list());
  };
  const form = h(
    "form",
    {
      "aria-label": "Filter entries",
      onsubmit: async (ev) => {
        ev.preventDefault();
        state.kind = kindSel.value;
        state.run = runIn.value.trim();
        await go(startIn.value === "" ? null : Number(startIn.value));
      },
    },
    field("Kind", kindSel),
    field("Run", runIn),
    field("From seq", startIn),
    h("button", { type: "submit" }, "Show"),
  );
  const rows = page.entries.map((e) => [
    h("a", { href: `#/ledger/${e.seq}` }, String(e.seq)),
    e.kind,
    e.at,
    e.header.key,
    summary(e),
    payloadStatus(e),
  ]);
  const scanned = page.next === null ? info.size : page.next;
  const pager = h(
    "div",
    { class: "pager" },
    state.start > 0 && !filtered ? h("button", { type: "button", class: "quiet", onclick: () => go(Math.max(0, state.start - LIMIT)) }, "Previous page") : null,
    page.next !== null ? h("button", { type: "button", class: "quiet", onclick: () => go(page.next) }, filtered ? `Scan on from seq ${page.next}` : "Next page") : null,
    h("span", { class: "muted" }, filtered ? ` ${page.entries.length} matching entries in seqs ${state.start}–${scanned - 1} of ${info.size}` : ` seqs ${state.start}–${state.start + page.entries.length - 1} of ${info.size}`),
  );
  return h(
    "section",
    { "aria-labelledby": "ledger-title" },
    h("h2", { id: "ledger-title" }, "Ledger"),
    form,
    pager,
    table("Entries", ["seq", "kind", "at", "key", "summary", "payload"], rows),
    rows.length ? null : h("p", { class: "muted" }, "No entries here."),
  );
}

async function detail(seq) {
  const e = await api(`/v1/ledger/entries/${seq}`);
  const signed = decodeB64Text(e.entry);
  const proofOut = h("div", { "aria-live": "polite" });
  const oldIn = h("input", { type: "number", min: 1 });
  const b = e.header.body || {};
  let payload;
  if (e.payload) payload = h("div", {}, payloadCheck(e, signed), pre(pretty(decodeB64Text(e.payload)), "Payload"));
  else payload = h("p", { class: e.redacted ? "bad" : "muted" }, payloadStatus(e), e.redacted && e.redacted_by !== null && e.redacted_by !== undefined ? [" (", h("a", { href: `#/ledger/${e.redacted_by}` }, `seq ${e.redacted_by}`), ")"] : null);
  const links = [];
  if (b.run_id) links.push(h("a", { href: `#/runs/${encodeURIComponent(b.run_id)}` }, `run ${b.run_id}`));
  if (typeof b.supersedes === "number") links.push(" · ", h("a", { href: `#/ledger/${b.supersedes}` }, `supersedes seq ${b.supersedes}`));
  return h(
    "section",
    { "aria-labelledby": "entry-title" },
    h("h2", { id: "entry-title" }, `Entry ${e.seq}: ${e.kind}`),
    h("p", {}, h("a", { href: "#/ledger" }, "← back to the entries"), links.length ? " · " : null, links),
    table("Header", ["field", "value"], [
      ["seq", String(e.header.seq)], ["at", e.header.at], ["kind", e.header.kind], ["prev", e.header.prev],
      ["key", e.header.key], ["redacts", JSON.stringify(e.header.redacts)], ["payload_hash", String(e.header.payload_hash)],
      ["leaf hash", e.leaf_hash], ["signature (base64)", e.signature],
    ]),
    h("h3", {}, "Body"),
    pre(JSON.stringify(b, null, 2), "Body"),
    h("h3", {}, "Signed bytes"),
    h("p", { class: "muted" }, "Ed25519 signs \"memseal/entry/v1\" 0x00 SHA-256(0x00 ‖ these bytes)."),
    pre(signed, "Signed bytes"),
    h("h3", {}, "Payload"),
    payload,
    h("h3", {}, "Proofs"),
    h("button", {
      type: "button",
      onclick: async () => {
        try {
          proofOut.replaceChildren(pre(await api(`/v1/ledger/proofs/inclusion${query({ seq })}`, { text: true }), "Inclusion proof"));
        } catch (err) {
          proofOut.replaceChildren(errorBox(err));
        }
      },
    }, "Fetch inclusion proof"),
    field("Consistency from tree size", oldIn),
    h("button", {
      type: "button",
      onclick: async () => {
        try {
          proofOut.replaceChildren(pre(await api(`/v1/ledger/proofs/consistency${query({ old: oldIn.value })}`, { text: true }), "Consistency proof"));
        } catch (err) {
          proofOut.replaceChildren(errorBox(err));
        }
      },
    }, "Fetch consistency proof"),
    h("p", { class: "muted" }, "These are the server's proofs as text; ", h("a", { href: "#/verify" }, "Verify here"), " checks them in the browser."),
    proofOut,
  );
}

export async function render({ args }) {
  if (args.length && args[0] !== "") return detail(Number(args[0]));
  return list();
}



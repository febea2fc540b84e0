// Memory: for an agent, the items in its reach (list, search exact/semantic/hybrid) through
// its own tools; for an admin, an item's signed history and the trust actions. Every read
// and action is the API's, so what is shown is what the token may see.
import { api, query } from "./api.js";
import { badge, decodeB64Text, errorBox, field, h, short, table } from "./ui.js";

// A trust change's or a forget's payload: who asked and why. A forget signed before
// forgets carried a reason has no payload: its actor and reason are unknown.
function whyOf(e) {
  if (e.payload) {
    try {
      const p = JSON.parse(decodeB64Text(e.payload));
      if (p && typeof p.reason === "string") return `by ${p.actor || "an unknown actor"}: “${p.reason}”`;
    } catch (err) {
      return "payload not readable";
    }
    return "payload in reach";
  }
  if (e.redacted) return `erased by the forget at seq ${e.redacted_by}`;
  if (e.payload_withheld) return "withheld";
  if (e.kind === "memory_forgotten") return "actor and reason not recorded";
  return "";
}

function itemRows(items) {
  return items.map((it) => [
    h("code", {}, it.id),
    badge(it.trust, it.trust),
    it.kind,
    short(it.text || "", 140),
    it.score === undefined ? "" : String(Math.round(it.score * 1000) / 1000),
  ]);
}

async function agentMemory() {
  const out = h("div", { "aria-live": "polite" });
  const qIn = h("input", { type: "search", size: 40 });
  const modeSel = h("select", {}, ["hybrid", "exact", "semantic"].map((m) => h("option", { value: m }, m)));
  let cursor = null;
  async function list(next) {
    try {
      const r = (await api("/v1/tools/memory_list", { method: "POST", body: next ? { cursor: next } : {} })).result;
      cursor = r.next_cursor || null;
      out.replaceChildren(h("div", {},
        table("Items in your reach", ["id", "trust", "kind", "text", "score"], itemRows(r.items || [])),
        cursor ? h("button", { type: "button", class: "quiet", onclick: () => list(cursor) }, "Next page") : null,
      ));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  }
  async function search() {
    try {
      const r = (await api("/v1/tools/memory_fetch", { method: "POST", body: { query: qIn.value, mode: modeSel.value } })).result;
      out.replaceChildren(table(`Hits (${r.mode})`, ["id", "trust", "kind", "text", "score"], itemRows(r.hits || [])));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  }
  const section = h(
    "section",
    { "aria-labelledby": "memory-title" },
    h("h2", { id: "memory-title" }, "Memory"),
    h("p", { class: "muted" }, "Read through this token's own tools: each read is a signed tool call."),
    h("form", { "aria-label": "Search memory", onsubmit: (ev) => { ev.preventDefault(); search(); } },
      field("Search", qIn), field("Mode", modeSel), h("button", { type: "submit" }, "Search"),
      h("button", { type: "button", class: "quiet", onclick: () => list(null) }, "List all")),
    out,
  );
  await list(null);
  return section;
}

// The items in reach for an auditor or an admin, through GET /v1/ledger/items: the API
// applies the token's reach, the page only shows what comes back.
function ledgerItems(me) {
  const out = h("div", { "aria-live": "polite" });
  const qIn = h("input", { type: "search", size: 40 });
  const modeSel = h("select", {}, ["hybrid", "exact", "semantic"].map((m) => h("option", { value: m }, m)));
  const floorSel = h("select", {}, ["stale", "unverified", "verified"].map((m) => h("option", { value: m }, m)));
  async function show(params, caption) {
    try {
      const r = await api(`/v1/ledger/items${query({ ...params, min_trust: floorSel.value, limit: 50 })}`);
      const rows = r.items.map((it) => [
        me.role === "admin" ? h("a", { href: `#/memory/${encodeURIComponent(it.id)}` }, it.id) : h("code", {}, it.id),
        badge(it.trust, it.trust),
        it.kind,
        it.namespace,
        short(it.text || "", 120),
        h("a", { href: `#/ledger/${it.seq}` }, String(it.seq)),
        it.score === undefined ? "" : String(Math.round(it.score * 1000) / 1000),
      ]);
      out.replaceChildren(h("div", {},
        table(r.mode ? `${caption} (${r.mode})` : caption, ["id", "trust", "kind", "namespace", "text", "stored at seq", "score"], rows),
        rows.length ? null : h("p", { class: "muted" }, "No items here."),
        r.next_cursor ? h("button", { type: "button", class: "quiet", onclick: () => show({ ...params, cursor: r.next_cursor }, caption) }, "Next page") : null,
      ));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  }
  const list = () => show({}, "Items in your reach");
  const form = h("form", { "aria-label": "Search memory", onsubmit: (ev) => { ev.preventDefault(); show({ query: qIn.value, mode: modeSel.value }, "Hits"); } },
    field("Search", qIn), field("Mode", modeSel), field("Lowest trust", floorSel), h("button", { type: "submit" }, "Search"),
    h("button", { type: "button", class: "quiet", onclick: list }, "List all"));
  return { element: h("div", {}, form, out), list };
}

async function auditorMemory(me) {
  const items = ledgerItems(me);
  await items.list();
  return h(
    "section",
    { "aria-labelledby": "memory-title" },
    h("h2", { id: "memory-title" }, "Memory"),
    h("p", { class: "muted" }, "The items inside your reach, as the API lists them for this token (an auditor reads; it has no tools and changes nothing)."),
    items.element,
  );
}

async function adminMemory(args, me) {
  const idIn = h("input", { type: "text", size: 40, value: args[0] || "" });
  const reasonIn = h("input", { type: "text", size: 50 });
  const out = h("div", { "aria-live": "polite" });
  const history = h("div");
  async function showHistory() {
    const id = idIn.value.trim();
    if (!id) return;
    try {
      const rows = [];
      let forgetSeq = null;
      let next = 0;
      // Each request scans a bounded window of the log; stop after a few.
      for (let i = 0; next !== null && i < 20; i++) {
        const page = await api(`/v1/ledger/entries${query({ item: id, start: next, limit: 200 })}`);
        for (const e of page.entries) {
          const b = e.header.body;
          const what = e.kind === "memory_stored" ? `stored in ${b.namespace} as ${b.trust}` : e.kind === "trust_changed" ? `trust ${b.previous} → ${b.trust}` : "forgotten";
          if (e.kind === "memory_forgotten") forgetSeq = e.seq;
          rows.push([h("a", { href: `#/ledger/${e.seq}` }, String(e.seq)), e.at, e.kind, what, e.kind === "memory_stored" && e.payload ? "text in the payload" : whyOf(e)]);
        }
        next = page.next;
      }
      history.replaceChildren(h("div", {},
        forgetSeq === null ? null : h("p", { class: "bad", "data-forgotten": String(forgetSeq) }, badge("forgotten", "bad"), ` ${id} was forgotten by the signed entry `, h("a", { href: `#/ledger/${forgetSeq}` }, `seq ${forgetSeq}`), ": every payload naming it is erased."),
        table(`History of ${id}`, ["seq", "at", "kind", "what", "payload"], rows),
        next !== null ? h("p", { class: "muted" }, `Scanned up to seq ${next}; the Ledger page scans on.`) : null,
      ));
    } catch (err) {
      history.replaceChildren(errorBox(err));
    }
  }
  function action(name, label, cls) {
    return h("button", {
      type: "button",
      class: cls,
      onclick: () => {
        const id = idIn.value.trim();
        if (!id || !reasonIn.value.trim()) {
          out.replaceChildren(errorBox(new Error("give the item id and a reason")));
          return;
        }
        const confirmBtn = h("button", {
          type: "button",
          class: "danger",
          onclick: async () => {
            try {
              const r = await api(`/v1/admin/items/${encodeURIComponent(id)}/${name}`, { method: "POST", body: { reason: reasonIn.value.trim() } });
              out.replaceChildren(
                h("p", { role: "status", class: "ok" }, `${id}: ${r.previous} → ${r.trust}`, r.seq === null ? " (unchanged)" : [" (signed entry ", h("a", { href: `#/ledger/${r.seq}` }, `seq ${r.seq}`), ")"]),
              );
              await showHistory();
            } catch (err) {
              out.replaceChildren(errorBox(err));
            }
          },
        }, `Confirm: ${label} ${id}`);
        out.replaceChildren(h("p", {}, `${label} item ${id} because “${reasonIn.value.trim()}”? This appends a signed entry.`), confirmBtn,
          h("button", { type: "button", class: "quiet", onclick: () => out.replaceChildren() }, "Cancel"));
        confirmBtn.focus();
      },
    }, label);
  }
  // Forget cannot be undone: the admin types the id again, and the API checks it too.
  function forgetAction() {
    return h("button", {
      type: "button",
      class: "danger",
      onclick: () => {
        const id = idIn.value.trim();
        if (!id) {
          out.replaceChildren(errorBox(new Error("give the item id")));
          return;
        }
        const typed = h("input", { type: "text", size: 40, autocomplete: "off", spellcheck: "false" });
        const confirmBtn = h("button", {
          type: "button",
          class: "danger",
          disabled: true,
          onclick: async () => {
            try {
              const r = await api(`/v1/admin/items/${encodeURIComponent(id)}/forget`, { method: "POST", body: { confirm: typed.value.trim(), reason: why.value.trim() } });
              const seq = r.seqs[r.seqs.length - 1];
              out.replaceChildren(
                h("p", { role: "status", class: "ok" }, `${id}: forgotten (signed entry `, h("a", { href: `#/ledger/${seq}` }, `seq ${seq}`), `; ${r.redacted.length} payloads erased)`),
              );
              await showHistory();
            } catch (err) {
              out.replaceChildren(errorBox(err));
            }
          },
        }, `Confirm: Forget ${id}`);
        // The reason is signed into the forget's payload and no forget erases it (it is the
        // record of the erasure); the API refuses a forget without one.
        const why = h("input", { type: "text", size: 50, value: reasonIn.value.trim() });
        const ready = () => { confirmBtn.disabled = typed.value.trim() !== id || !why.value.trim(); };
        typed.addEventListener("input", ready);
        why.addEventListener("input", ready);
        out.replaceChildren(
          h("p", {}, `Forget item ${id}? This appends a signed memory_forgotten entry and erases every payload that names the item. It cannot be undone.`),
          field("Type the item id to confirm", typed),
          field("Reason for the forget", why),
          h("p", { class: "muted", id: "forget-reason-note" }, "The reason stays in the log for good: do not quote the text being forgotten."),
          confirmBtn,
          h("button", { type: "button", class: "quiet", onclick: () => out.replaceChildren() }, "Cancel"),
        );
        typed.focus();
      },
    }, "Forget");
  }
  const section = h(
    "section",
    { "aria-labelledby": "memory-title" },
    h("h2", { id: "memory-title" }, "Memory"),
    h("p", { class: "muted" }, "Trust actions on an item inside your reach, each a signed trust_changed entry, and forget, a signed memory_forgotten entry. Item ids are in the Ledger (memory_stored entries)."),
    field("Item id", idIn),
    h("button", { type: "button", class: "quiet", onclick: showHistory }, "Show history"),
    field("Reason", reasonIn),
    h("div", {}, action("promote", "Promote", ""), action("reject", "Reject", "danger"), action("stale", "Mark stale", "quiet"), forgetAction()),
    out,
    history,
  );
  if (args[0]) await showHistory();
  else {
    const items = ledgerItems(me);
    section.append(h("h3", {}, "Items in your reach"), items.element);
    await items.list();
  }
  return section;
}

export async function render({ me, args }) {
  if (me.role === "agent") return agentMemory();
  if (me.role === "auditor") return auditorMemory(me);
  return adminMemory(args, me);
}

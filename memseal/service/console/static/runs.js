// Runs: the runs in the caller's reach (auditors), a run's timeline from its signed entries,
// and, for the agent that owns a run, its status and its session bundle.
import { api, query, token } from "./api.js";
import { badge, decodeB64Text, errorBox, field, h, short, table } from "./ui.js";

const RUN_PAGE = 50;
const ENTRY_PAGE = 200;
// Requests one "Load more steps" makes at most (each scans at most the API's window of
// 5,000 entries): a run interleaved thinly with others never has the page read the log whole.
const SCANS_A_LOAD = 4;

// What a lifecycle run is, from the `lifecycle` its signed run_started entry records (the
// lifecycle layer sets it when it opens the run; see docs/lifecycle.md), never from the run
// id: an id is the host's to choose. A run without it (a plain run, or one recorded before
// runs said so) is shown as a plain run.
const LIFECYCLE = {
  "session/thread": ["session", "session reads and writes of the thread"],
  "session/own": ["session", "session reads of the agent's node"],
  "session/team": ["session", "session reads of the team's node"],
  "session/brain": ["session", "session reads of the brain"],
  "session/model": ["session", "the model's own tools"],
  "session/queue": ["session", "job queue (builds queued per turn)"],
  job: ["job", "background job"],
  "job-queue": ["job", "the job queue"],
  retraction: ["job", "a retraction"],
  brain: ["brain", "a brain ingest"],
};

export function lifecycleRun(run) {
  const value = run && typeof run.lifecycle === "string" ? run.lifecycle : null;
  if (value === null) return null;
  const [kind, label] = LIFECYCLE[value] || ["other", value];
  return { kind, label };
}

// The lifecycle moment a keyed call is: start, pre/N, post/N, compact/N, queue/N (a moment
// that makes several calls keys them KEY/0, KEY/1...), and a job's learn: and supersede:.
export function lifecycleStep(key) {
  if (typeof key !== "string") return null;
  if (/^start(\/.*)?$/.test(key)) return "session start";
  const m = /^(pre|post|compact|queue)\/(\d+)(\/.*)?$/.exec(key);
  if (m) {
    const what = { pre: "context before the turn", post: "the turn logged", compact: "compaction", queue: "build queued" }[m[1]];
    return `turn ${m[2]}: ${what}`;
  }
  if (key.startsWith("learn:")) return "job: a belief stored";
  if (key.startsWith("supersede:")) return "job: a superseded belief forgotten";
  return null;
}

function kindCell(run) {
  const l = lifecycleRun(run);
  return l ? [badge(`lifecycle: ${l.kind}`, "lifecycle"), ` ${l.label}`] : "run";
}

function runLink(id) {
  return h("a", { href: `#/runs/${encodeURIComponent(id)}` }, id);
}

async function exportBundle(runId, out) {
  try {
    const res = await fetch(`/v1/runs/${encodeURIComponent(runId)}/export`, { headers: { Authorization: `Bearer ${token()}` } });
    if (!res.ok) throw new Error((await res.json()).error.message);
    const url = URL.createObjectURL(await res.blob());
    const a = h("a", { href: url, download: `${runId.replace(/[^A-Za-z0-9._-]/g, "_")}.bundle` }, "Download the bundle");
    out.replaceChildren(a, h("span", { class: "muted" }, " (check it offline: memseal verify FILE --trust VKEY)"));
    a.click();
  } catch (err) {
    out.replaceChildren(errorBox(err));
  }
}

async function agentRuns(me, args) {
  // An agent has no ledger routes: it opens its own runs by id, as the API lets it.
  const idIn = h("input", { type: "text", size: 40, value: args[0] || "" });
  const out = h("div", { "aria-live": "polite" });
  const show = async () => {
    const id = idIn.value.trim();
    if (!id) return;
    try {
      const s = await api(`/v1/runs/${encodeURIComponent(id)}`);
      const dl = h("div");
      out.replaceChildren(
        table(`Run ${s.run_id}`, ["field", "value"], Object.entries(s).map(([k, v]) => [k, String(v)])),
        h("button", { type: "button", onclick: () => exportBundle(s.run_id, dl) }, "Export the bundle"),
        dl,
      );
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  const section = h(
    "section",
    { "aria-labelledby": "runs-title" },
    h("h2", { id: "runs-title" }, "Runs"),
    h("p", { class: "muted" }, "An agent token sees the runs of its own scope, by id."),
    h("form", { onsubmit: (ev) => { ev.preventDefault(); show(); } }, field("Run id", idIn), h("button", { type: "submit" }, "Open")),
    out,
  );
  if (args[0]) await show();
  return section;
}

async function runList(before) {
  const page = await api(`/v1/ledger/runs${query({ before, limit: RUN_PAGE })}`);
  const rows = page.runs.map((r) => [
    runLink(r.run_id),
    kindCell(r),
    r.leased ? badge("leased", "warn") : badge("idle"),
    r.leased ? `${r.holder || "?"} until ${new Date(r.lease_until * 1000).toISOString()}` : "—",
    r.mode || "",
    r.place || "",
    String(r.recorded_steps),
    r.last_step === null ? "—" : String(r.last_step),
    String(r.memo_hits),
    `${r.started_at} (seq ${r.started_seq})`,
  ]);
  const section = h(
    "section",
    { "aria-labelledby": "runs-title" },
    h("h2", { id: "runs-title" }, "Runs"),
    table("Runs in your reach, newest first", ["run", "kind", "status", "lease", "mode", "place", "steps", "last step", "memo hits", "started"], rows),
    h("p", { class: "muted" }, "Memo hits: the steps every process answered from the run's memo on resume, as each process counted them (flushed with its lease renewals and its close). A hit writes no ledger entry: this is a count, not a proof."),
    rows.length ? null : h("p", { class: "muted" }, "No runs on this page."),
  );
  if (page.next_before !== null) {
    section.append(
      h("button", {
        type: "button", class: "quiet",
        onclick: async () => document.getElementById("main").replaceChildren(await runList(page.next_before)),
      }, "Older runs"),
    );
  }
  return section;
}

function argSummary(e) {
  if (e.payload) {
    try {
      const p = JSON.parse(decodeB64Text(e.payload));
      return p.arguments === null ? "(not kept: a refused call keeps only a hash)" : short(p.arguments, 90);
    } catch (err) {
      return "(payload not JSON)";
    }
  }
  if (e.redacted) return `(erased by the forget at seq ${e.redacted_by})`;
  if (e.payload_withheld) return "(withheld: outside your reach)";
  return "";
}

function outcome(b) {
  if (b.error) {
    const code = b.result && b.result.error && (b.result.error.code || b.result.error.type);
    return `error${code ? `: ${code}` : ""}`;
  }
  return `ok${b.cites && b.cites.length ? `, cites ${b.cites.length}` : ""}${b.wrote && b.wrote.length ? `, wrote seq ${b.wrote.join(", ")}` : ""}`;
}

function diff(old, neu) {
  const out = [];
  for (const f of ["tool", "fingerprint", "input_hash", "result_hash", "error", "cites", "wrote"]) {
    const a = JSON.stringify(old[f]);
    const b = JSON.stringify(neu[f]);
    if (a !== b) out.push(`${f}: ${short(a, 24)} → ${short(b, 24)}`);
  }
  return out.length ? out : ["no field of the signed body changed"];
}

// The timeline of the run entries loaded so far: each call with its step, tool, argument
// summary and outcome; a replacement marked revalidated (with the field diff against the
// call it supersedes) or forked (after a signed divergence), the replaced call superseded.
export function timeline(entries, memo = new Map(), here = new Map(), hits = new Map()) {
  const bySeq = new Map(entries.map((e) => [e.seq, e]));
  const supersededBy = new Map();
  const forks = [];
  for (const e of entries) {
    const b = e.header.body;
    if (e.kind === "memory_tool_call" && typeof b.supersedes === "number") supersededBy.set(b.supersedes, e.seq);
    if (e.kind === "run_forked") forks.push(e);
  }
  const rows = [];
  for (const e of entries) {
    const b = e.header.body;
    const seqLink = h("a", { href: `#/ledger/${e.seq}` }, String(e.seq));
    if (e.kind === "run_started") {
      rows.push({ seq: e.seq, cells: ["—", "run started", `${b.mode} at ${b.place}`, "", [badge("started")], seqLink] });
    } else if (e.kind === "run_forked") {
      rows.push({
        seq: e.seq,
        cells: [String(b.step), "divergence", `recorded ${short(b.recorded, 14)} ≠ attempted ${short(b.attempted, 14)}`, "the run went live from here, as its host asked", [badge("diverged", "diverged")], seqLink],
      });
    } else if (e.kind === "memory_tool_call") {
      // Every call entry was a live call, recorded; the one the step's memo points at is
      // what a resume replays (a memo hit), a superseded one no longer.
      const marks = [badge("live, recorded")];
      if (memo.get(b.step) === e.seq) {
        marks.push(badge("memo: a resume replays this", "ok"));
        // Every process's hits of this call (an unsigned count from the memo_hits table).
        const counted = hits.get(b.step) || 0;
        if (counted) marks.push(badge(`memo hits ×${counted} (all processes, unsigned count)`, "ok"));
        const [replayed, live] = here.get(b.step) || [0, 0];
        if (replayed) marks.push(badge(`memo hit ×${replayed} on this server`, "ok"));
        if (live) marks.push(badge(`live ×${live} on this server`));
      }
      let note = "";
      if (supersededBy.has(e.seq)) marks.push(badge(`superseded by seq ${supersededBy.get(e.seq)}`, "warn"));
      if (typeof b.supersedes === "number") {
        const forked = forks.some((f) => f.header.body.step === b.step && f.seq > b.supersedes && f.seq < e.seq);
        marks.push(forked ? badge("forked", "forked") : badge("revalidated", "revalidated"));
        const old = bySeq.get(b.supersedes);
        note = old ? diff(old.header.body, b).join("; ") : `supersedes seq ${b.supersedes}`;
      }
      if (b.key) marks.push(badge(`key ${short(b.key, 20)}`));
      const moment = lifecycleStep(b.key);
      if (moment) marks.push(badge(moment, "lifecycle"));
      rows.push({ seq: e.seq, cells: [String(b.step), b.tool, argSummary(e), [outcome(b), note ? h("div", { class: "muted" }, note) : null], marks, seqLink] });
    }
  }
  return rows;
}

async function runPage(runId, me) {
  const section = h("section", { "aria-labelledby": "run-title" }, h("h2", { id: "run-title" }, `Run ${runId}`));
  section.append(h("p", {}, h("a", { href: "#/runs" }, "← all runs")));
  const found = (await api(`/v1/ledger/runs${query({ run: runId })}`)).runs[0];
  if (!found) {
    section.append(errorBox(new Error(`no run ${runId} in your reach`)));
    return section;
  }
  const started = found.started_seq;
  const life = lifecycleRun(found);
  section.append(
    h("p", {}, found.leased ? badge("leased", "warn") : badge("idle"), ` ${found.mode} at ${found.place}; ${found.recorded_steps} recorded steps; ${found.memo_hits} memo hits in all processes${found.last_hit_at === null ? "" : ` (last counted ${new Date(found.last_hit_at * 1000).toISOString()})`}; started ${found.started_at}`),
  );
  if (life) section.append(h("p", {}, badge(`lifecycle: ${life.kind}`, "lifecycle"), ` ${life.label}`));
  // The memo: which signed call each recorded step replays on resume (paged by step).
  // For a run this server holds, also how each step's calls were answered here.
  const memo = new Map();
  const here = new Map();
  const hits = new Map();
  let heldHere = false;
  for (let after = -1, i = 0; after !== null && i < 20; i++) {
    const page = await api(`/v1/ledger/memos${query({ run: runId, after })}`);
    heldHere = page.held_here;
    for (const m of page.memos) {
      memo.set(m.step, m.seq);
      hits.set(m.step, m.hits);
      if (m.replayed_here !== null) here.set(m.step, [m.replayed_here, m.live_here]);
    }
    after = page.next_after;
  }
  const entries = [];
  let next = started;
  // The run's entries end at its newest recorded call: every call it superseded, and every
  // divergence that led to a call, lies below it, so the scan stops there.
  const end = found.last_seq === null ? started + 1 : found.last_seq + 1;
  const body = h("div");
  const more = h("button", { type: "button", class: "quiet", onclick: () => load() }, "Load more steps");
  const status = h("p", { class: "muted", "aria-live": "polite" });
  async function load() {
    let got = 0;
    for (let scans = 0; next !== null && got < ENTRY_PAGE && scans < SCANS_A_LOAD; scans++) {
      const page = await api(`/v1/ledger/entries${query({ run: runId, start: next, limit: ENTRY_PAGE, end })}`);
      entries.push(...page.entries);
      got += page.entries.length;
      next = page.next;
    }
    const rows = timeline(entries, memo, here, hits);
    body.replaceChildren(h("div", {},
      table("Timeline", ["step", "tool", "arguments", "outcome", "marks", "seq"], rows.map((r) => r.cells)),
      h("p", { class: "muted" }, "Every row is a signed entry: each call ran live and was recorded. A memo hit (a step answered from its record on resume) writes no entry; the call marked \u201cmemo\u201d is the one a resume of its step replays, byte for byte, instead of running it again. \u201cMemo hits \u00d7N\u201d counts the resumes of any process that answered the step from that call: an unsigned count (each process adds its hits with its lease renewals and its close), not a signed record."),
      heldHere ? h("p", { class: "muted" }, "This server holds the run: \u201cmemo hit \u00d7N on this server\u201d counts the calls of a step it answered from the memo since it opened the run, \u201clive \u00d7N\u201d those it ran live.") : null,
    ));
    more.hidden = next === null;
    status.textContent = next === null
      ? `All ${entries.length} entries of the run loaded (seqs ${started}\u2013${end - 1}, to its newest recorded call).`
      : `${entries.length} entries loaded; the run's entries go on from seq ${next} to seq ${end - 1}.`;
  }
  await load();
  const dl = h("div");
  section.append(
    // The API decides: an auditor gets the bundle of a run in its reach whose payloads it
    // may all read, and a refusal naming why otherwise.
    h("button", { type: "button", onclick: () => exportBundle(runId, dl) }, "Export the bundle"),
    dl,
    status,
    body,
    more,
  );
  return section;
}

export async function render({ me, args }) {
  if (me.role === "agent") return agentRuns(me, args);
  if (args.length && args[0]) return runPage(args[0], me);
  return runList(null);
}

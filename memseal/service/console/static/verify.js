// Verify here: the checkpoint, a range of entries, an entry's inclusion and the consistency
// of two checkpoints, checked in this browser from the keys the user pins. The server only
// supplies bytes; its own verdict is never read.
import { ApiError, api, query } from "./api.js";
import {
  Failure, checkPayload, cosignatures, ed25519Available, equal, handOver, hex, parseConsistency, parseNote, parseTlogProof,
  treeRoot, verifyCheckpoint, verifyCosignatures, verifyConsistency, verifyEntry, verifyInclusion,
} from "./crypto.js";
import { checkList, trustedKeys, witnessKeys } from "./checks.js";
import { tilesSection } from "./verifytiles.js";
import { field, h } from "./ui.js";

const PINNED = "memseal.pinned";
const KEPT = "memseal.kept";
const WITNESSES = "memseal.witnesses";
const PAGE = 200;
// A whole tree up to this size is rebuilt in the browser (RFC 6962 root from every leaf);
// a larger range is bound to the checkpoint by its chain and the last entry's inclusion.
const WHOLE_TREE = 20000;

function kept() {
  try {
    const list = JSON.parse(localStorage.getItem(KEPT) || "[]");
    return Array.isArray(list) ? list : [];
  } catch (e) {
    return [];
  }
}

export async function render() {
  const root = h("section", { "aria-labelledby": "verify-title" }, h("h2", { id: "verify-title" }, "Verify here"));
  root.append(
    h("p", {}, "Everything below is checked in this browser with WebCrypto (Ed25519 signatures, SHA-256 for the RFC 6962 tree), against the keys you pin here. The server only hands over bytes; its own verdict is never asked."),
  );
  if (!(await ed25519Available())) {
    root.append(
      h("div", { class: "verdict warn", role: "alert", "data-verdict": "unsupported" },
        "This browser lacks WebCrypto Ed25519, so nothing was verified here. Nothing is taken on the server's word instead: check with `memseal verify DATA --trust VKEY`, or use a browser with Ed25519 (Chromium 137+, Firefox 129+, Safari 17+)."),
    );
    return root;
  }
  // A token that reads no ledger route (an agent's) is offered the tiles alone, which the
  // server may make public (serve --tlog-public): the API's answer decides, not the role.
  let info = null;
  try {
    info = await api("/v1/ledger");
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) throw err;
  }

  // 1. The keys the user trusts: pasted or pinned, never taken from the server silently.
  const keysBox = h("textarea", { rows: 3, spellcheck: "false" });
  keysBox.value = localStorage.getItem(PINNED) || "";
  const keyNote = h("p", { class: "muted", "aria-live": "polite" });
  root.append(
    h("h3", {}, "Trusted keys"),
    field("Trusted vkeys (one a line)", keysBox),
    h("button", { type: "button", onclick: () => { localStorage.setItem(PINNED, keysBox.value.trim()); keyNote.textContent = "Pinned in this browser."; } }, "Pin these keys"),
    info ? h("button", {
      type: "button", class: "quiet",
      onclick: () => { keysBox.value = info.trust_root; keyNote.textContent = "Filled in from the server: this trusts the server for its key. Compare it with the vkey you got out of band."; },
    }, "Use the server's trust root") : null,
    keyNote,
    info ? h("p", { class: "muted" }, `The server says its first key is ${info.trust_root} and its current key ${info.vkey}.`) : null,
  );
  const witnessBox = h("textarea", { rows: 2, spellcheck: "false" });
  witnessBox.value = localStorage.getItem(WITNESSES) || "";
  const witnessNote = h("p", { class: "muted", "aria-live": "polite" });
  root.append(
    field("Witness vkeys (one a line; optional)", witnessBox),
    h("button", { type: "button", class: "quiet", onclick: () => { localStorage.setItem(WITNESSES, witnessBox.value.trim()); witnessNote.textContent = "Witness keys pinned in this browser."; } }, "Pin these witness keys"),
    witnessNote,
    h("p", { class: "muted" }, "A witness key (cosignature/v1, type 0x04; memseal witness init prints it) is checked against the checkpoint's cosignature lines: each witness given here must cosign it."),
  );

  const tiles = tilesSection(keysBox, witnessBox, info ? info.origin : null);
  if (!info) {
    root.append(tiles, h("p", { class: "muted" }, "The checks through the ledger API (a range of entries, an inclusion, a kept checkpoint's consistency) need an auditor's or admin's token; this token may read only what the server makes public."));
    return root;
  }

  // 2. The checkpoint and a range of entries.
  // A large ledger starts on its last 1,000 entries (set From seq to 0 for all of it).
  const startIn = h("input", { type: "number", min: 0, value: info.size > WHOLE_TREE ? info.size - 1000 : 0 });
  const endIn = h("input", { type: "number", min: 1 });
  const checks = checkList("Checks of the checkpoint and entries");
  const progress = h("p", { class: "muted", "aria-live": "polite" });
  let current = null; // the last checkpoint verified here
  const keepBtn = h("button", { type: "button", class: "quiet", disabled: true, onclick: () => keep() }, "Keep this checkpoint");
  const cpText = h("pre", { tabindex: "0", "aria-label": "Checkpoint note" });

  async function runRange() {
    checks.reset();
    keepBtn.disabled = true;
    try {
      const keys = await trustedKeys(keysBox.value);
      const witnesses = await witnessKeys(witnessBox.value);
      const note = await api("/v1/ledger/checkpoint", { text: true });
      cpText.textContent = note;
      // The size is read before the signature is checked (the range is bounded by it);
      // nothing is reported until the signature verifies at the end.
      const lines = note.split("\n");
      const size = Number(lines[1]);
      if (!Number.isSafeInteger(size)) throw new Failure("checkpoint", "the tree size is not a number");
      const start = Math.max(0, Number(startIn.value || 0));
      const end = Math.min(size, endIn.value === "" ? size : Number(endIn.value));
      if (!(start < end)) throw new Failure("range", `the range [${start}, ${end}) is empty (the checkpoint holds ${size} entries)`);
      let prev = "0".repeat(64);
      if (start > 0) {
        const before = await api(`/v1/ledger/entries/${start - 1}`);
        const r = await verifyEntry(start - 1, before.entry, before.signature, null, keys);
        prev = hex(r.leafHash);
        checks.ok(`entry ${start - 1} (the chain's anchor): signature`);
      }
      const whole = start === 0 && end === size && size <= WHOLE_TREE;
      const leaves = [];
      let last = null;
      const payloads = { whole: 0, residue: 0, withheld: 0, erased: 0 };
      for (let s = start; s < end; s += PAGE) {
        const page = await api(`/v1/ledger/entries${query({ start: s, limit: Math.min(PAGE, end - s) })}`);
        for (const e of page.entries) {
          const want = last === null ? start : last.seq + 1;
          if (e.seq !== want) throw new Failure("chain", `the server answered seq ${e.seq} where ${want} was due`, want);
          const r = await verifyEntry(e.seq, e.entry, e.signature, prev, keys);
          const next = await handOver(r, keys);
          if (next) checks.ok(`seq ${e.seq}: key rotated from ${r.key.id} to ${next.id}`);
          // 2b. The payload, when this token may read it, against the signed payload_hash.
          if (e.payload) payloads[checkPayload(e.seq, e.payload, e.salt, r.entry.payload_hash, r.text)] += 1;
          else if (e.payload_withheld) payloads.withheld += 1;
          else if (e.redacted) payloads.erased += 1;
          prev = hex(r.leafHash);
          if (whole) leaves.push(r.leafHash);
          last = { seq: e.seq, leafHash: r.leafHash };
        }
        if (!page.entries.length) throw new Failure("chain", `the server returned no entries from seq ${s}`, s);
        progress.textContent = `Checked ${last.seq - start + 1} of ${end - start} entries…`;
      }
      checks.ok(`entries ${start} to ${end - 1}: bytes, chain and Ed25519 signatures (${end - start} entries)`);
      checks.ok(`payloads: ${payloads.whole} whole payloads hash (BLAKE3 of salt and payload, computed here) to their signed payload_hash${payloads.residue ? `, ${payloads.residue} residues of a forget text by text` : ""}`);
      if (payloads.withheld || payloads.erased) {
        checks.note(`payloads not checked: ${payloads.withheld} withheld from this token (outside its reach), ${payloads.erased} erased by a signed forget`);
      }
      const cp = await verifyCheckpoint(note, keys, info.origin);
      checks.ok(`checkpoint of size ${cp.size}: signed by ${cp.signer.name}+${cp.signer.id}`);
      // 4b. The witnesses' cosignatures, against the witness keys given (never the log's).
      const checked = new Set();
      for (const c of await verifyCosignatures(note, witnesses)) {
        checked.add(c.id);
        checks.ok(`cosigned by witness ${c.name}+${c.id} at ${c.time}: its cosignature/v1 verifies`);
      }
      for (const c of cosignatures(note)) {
        if (!checked.has(c.id)) checks.note(`cosigned by witness ${c.name}+${c.id} at ${c.time} (not checked: give its witness vkey above)`);
      }
      if (whole) {
        const computed = await treeRoot(leaves);
        if (!equal(computed, cp.root)) throw new Failure("tree", `the root of the ${size} leaves computed here is not the checkpoint's root`);
        checks.ok(`tree: the RFC 6962 root of all ${size} leaves, computed here, is the checkpoint's`);
      } else {
        const proof = parseTlogProof(await api(`/v1/ledger/proofs/inclusion${query({ seq: last.seq, size: cp.size })}`, { text: true }));
        if (parseNote(proof.note).text !== parseNote(note).text) throw new Failure("inclusion", "the proof is against another checkpoint", last.seq);
        if (proof.index !== last.seq) throw new Failure("inclusion", `the proof is of leaf ${proof.index}`, last.seq);
        await verifyInclusion(last.seq, cp.size, last.leafHash, proof.hashes, cp.root);
        checks.ok(`inclusion: entry ${last.seq} is in the checkpoint's tree, so the chain puts every entry of the range there`);
      }
      current = cp;
      keepBtn.disabled = false;
      checks.pass(`Verified in this browser: entries ${start}–${end - 1} and the checkpoint of size ${cp.size}.`);
    } catch (err) {
      checks.fail(err);
    }
    progress.textContent = "";
  }

  root.append(
    h("h3", {}, "Checkpoint and entries"),
    h("p", { class: "muted" }, `The latest checkpoint bounds the range. A whole ledger up to ${WHOLE_TREE.toLocaleString()} entries has its tree rebuilt here; a larger range is bound to the checkpoint by its chain and its last entry's inclusion proof.`),
    field("From seq", startIn),
    field("To seq (exclusive; empty: the checkpoint's size)", endIn),
    h("button", { type: "button", onclick: runRange }, "Verify checkpoint and entries"),
    keepBtn,
    progress,
    checks.verdict,
    checks.list,
    cpText,
  );

  // 2b. The same from the log's static tiles (this server's /tlog/ or a mirror).
  root.append(tiles);

  // 3. Inclusion of one entry.
  const seqIn = h("input", { type: "number", min: 0 });
  const inc = checkList("Checks of the inclusion");
  const incText = h("pre", { tabindex: "0", "aria-label": "Inclusion proof" });
  async function runInclusion() {
    inc.reset();
    try {
      const keys = await trustedKeys(keysBox.value);
      const seq = Number(seqIn.value);
      if (seqIn.value === "" || !Number.isSafeInteger(seq) || seq < 0) throw new Failure("inclusion", "give an entry's seq");
      const e = await api(`/v1/ledger/entries/${seq}`);
      const r = await verifyEntry(seq, e.entry, e.signature, null, keys);
      inc.ok(`entry ${seq}: bytes and Ed25519 signature by ${r.key.id}`);
      const text = await api(`/v1/ledger/proofs/inclusion${query({ seq })}`, { text: true });
      incText.textContent = text;
      const proof = parseTlogProof(text);
      const cp = await verifyCheckpoint(proof.note, keys, info.origin);
      inc.ok(`the proof's checkpoint (size ${cp.size}) is signed by ${cp.signer.name}+${cp.signer.id}`);
      if (proof.index !== seq) throw new Failure("inclusion", `the proof is of leaf ${proof.index}`, seq);
      await verifyInclusion(seq, cp.size, r.leafHash, proof.hashes, cp.root);
      inc.ok(`entry ${seq} is leaf ${seq} of that tree (${proof.hashes.length} hashes)`);
      inc.pass(`Entry ${seq} is included in the checkpoint of size ${cp.size}.`);
    } catch (err) {
      inc.fail(err);
    }
  }
  root.append(
    h("h3", {}, "Inclusion of an entry"),
    field("Entry seq", seqIn),
    h("button", { type: "button", onclick: runInclusion }, "Verify inclusion"),
    inc.verdict, inc.list, incText,
  );

  // 4. Consistency between a kept checkpoint and the current one.
  const keptList = h("div");
  const con = checkList("Checks of the consistency");
  function keep() {
    if (!current) return;
    const list = kept().filter((k) => k.note !== current.note);
    list.push({ note: current.note, vkey: current.signer.text, size: current.size, kept_at: new Date().toISOString() });
    localStorage.setItem(KEPT, JSON.stringify(list.slice(-10)));
    showKept();
  }
  async function runConsistency(old) {
    con.reset();
    try {
      const oldKeys = await trustedKeys(old.vkey);
      const a = await verifyCheckpoint(old.note, oldKeys, info.origin);
      con.ok(`the kept checkpoint (size ${a.size}) is signed by ${a.signer.name}+${a.signer.id}`);
      const keys = await trustedKeys(`${keysBox.value}\n${old.vkey}`);
      const b = await verifyCheckpoint(await api("/v1/ledger/checkpoint", { text: true }), keys, info.origin);
      con.ok(`the current checkpoint (size ${b.size}) is signed by ${b.signer.name}+${b.signer.id}`);
      if (b.size < a.size) throw new Failure("consistency", `the server's checkpoint (size ${b.size}) is older than the one kept (size ${a.size}): the log went back`);
      if (a.size === b.size) {
        if (!equal(a.root, b.root)) throw new Failure("consistency", `two checkpoints of size ${a.size} with different roots: a forked log`);
      } else {
        const text = await api(`/v1/ledger/proofs/consistency${query({ old: a.size, new: b.size })}`, { text: true });
        const proof = parseConsistency(text);
        if (proof.oldSize !== a.size || proof.newSize !== b.size) throw new Failure("consistency", "the proof is between other sizes");
        await verifyConsistency(a.size, b.size, proof.hashes, a.root, b.root);
        con.ok(`RFC 9162 consistency proof (${proof.hashes.length} hashes) from ${a.size} to ${b.size}`);
      }
      con.pass(`The tree of size ${a.size} you kept is a prefix of the current tree of size ${b.size}.`);
    } catch (err) {
      con.fail(err);
    }
  }
  function showKept() {
    const list = kept();
    keptList.replaceChildren(
      list.length
        ? h("ul", {}, list.map((k) => h("li", {}, `size ${k.size}, kept ${k.kept_at} `, h("button", { type: "button", class: "quiet", onclick: () => runConsistency(k) }, `Check consistency from size ${k.size}`))))
        : h("p", { class: "muted" }, "No checkpoint kept yet: verify one above and keep it, then come back later."),
    );
  }
  showKept();
  root.append(h("h3", {}, "Consistency with a kept checkpoint"), keptList, con.verdict, con.list);
  return root;
}

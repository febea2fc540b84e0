// The Verify page's shared parts: the keys the user trusts, and a list of checks with its
// verdict (pass, partial, fail), each failure naming its step, seq and file.
import { Failure, parseVkey, parseWitnessVkey } from "./crypto.js";
import { h } from "./ui.js";

export async function trustedKeys(text) {
  const keys = new Map();
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const k = await parseVkey(line);
    keys.set(k.id, k);
  }
  if (!keys.size) throw new Failure("key", "paste or pin at least one vkey (memseal keys show)");
  return keys;
}

// The witness keys the user trusts, kept apart from the log's: a witness key is never
// accepted as a log key, nor a log key as a witness's.
export async function witnessKeys(text) {
  const keys = new Map();
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const k = await parseWitnessVkey(line);
    keys.set(k.id, k);
  }
  return keys;
}

// "seq 2: signature: ..." or, for a file of the tiles, "tile/entries/000, seq 2: signature: ...".
export function describe(err) {
  if (err instanceof Failure) {
    const where = [err.path === err.check ? null : err.path, err.seq === null || err.seq === undefined ? null : `seq ${err.seq}`].filter(Boolean).join(", ");
    return where ? `${where}: ${err.check}: ${err.message}` : `${err.check}: ${err.message}`;
  }
  return `error: ${err && err.message ? err.message : err}`;
}

export function checkList(label) {
  const list = h("ol", { class: "checks", "aria-label": label });
  const verdict = h("div", { "aria-live": "polite" });
  return {
    list,
    verdict,
    ok(text) {
      list.append(h("li", { class: "ok" }, `✓ ${text}`));
    },
    note(text) {
      list.append(h("li", { class: "muted" }, `– ${text}`));
    },
    fail(err) {
      list.append(h("li", { class: "bad" }, `✗ ${describe(err)}`));
      verdict.replaceChildren(h("div", { class: "verdict bad", role: "alert", "data-verdict": "fail" }, `Verification FAILED: ${describe(err)}`));
    },
    pass(text) {
      verdict.replaceChildren(h("div", { class: "verdict ok", role: "status", "data-verdict": "pass" }, text));
    },
    // Everything checked passed, but part of what a full check covers could not be read.
    partial(text) {
      verdict.replaceChildren(h("div", { class: "verdict warn", role: "status", "data-verdict": "partial" }, text));
    },
    reset() {
      list.replaceChildren();
      verdict.replaceChildren();
    },
  };
}

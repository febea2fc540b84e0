// Verification in the browser, from the vkey alone: nothing here trusts the server's verdict.
// RFC 6962 / RFC 9162 hashing with WebCrypto SHA-256, C2SP signed notes and memseal entry
// signatures with WebCrypto Ed25519 (see docs/formats.md and docs/ledger.md).

import { blake3Hex } from "./blake3.js";

const enc = new TextEncoder();
const subtle = globalThis.crypto && globalThis.crypto.subtle;

export class Failure extends Error {
  // A failed check: `check` names the step (signature, chain, inclusion...), `seq` the entry.
  constructor(check, message, seq = null) {
    super(message);
    this.check = check;
    this.seq = seq;
  }
}

export function b64decode(text, what = "base64") {
  if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4) {
    throw new Failure("format", `${what} is not base64`);
  }
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function b64encode(bytes) {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function concat(...parts) {
  const size = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function equal(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

export async function sha256(bytes) {
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

// RFC 6962 section 2.1: leaf and node hashes, domain-separated by 0x00 and 0x01.
export function leafHash(leaf) {
  return sha256(concat(new Uint8Array([0]), leaf));
}

export function nodeHash(left, right) {
  return sha256(concat(new Uint8Array([1]), left, right));
}

// The root of n leaf hashes: split at the largest power of two smaller than n.
export async function treeRoot(leaves) {
  if (leaves.length === 0) return sha256(new Uint8Array(0));
  let level = leaves.slice();
  // Bottom-up, carrying an odd last node up unchanged: the same tree as the recursive split.
  while (level.length > 1) {
    const next = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(await nodeHash(level[i], level[i + 1]));
    if (level.length % 2) next.push(level[level.length - 1]);
    level = next;
  }
  return level[0];
}

// RFC 9162 2.1.3.2: verify an inclusion proof of leaf `index` in a tree of `size` leaves.
export async function verifyInclusion(index, size, leaf, proof, root) {
  if (!(index < size)) throw new Failure("inclusion", `leaf ${index} is outside a tree of ${size}`, index);
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (p.length !== 32) throw new Failure("inclusion", "a proof hash is not 32 bytes", index);
    if (sn === 0) throw new Failure("inclusion", "the proof is too long", index);
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  if (sn !== 0) throw new Failure("inclusion", "the proof is too short", index);
  if (!equal(r, root)) throw new Failure("inclusion", "the proof does not lead to the checkpoint's root", index);
}

// RFC 9162 2.1.4.2: verify that the tree of size1 (root1) is a prefix of size2 (root2).
export async function verifyConsistency(size1, size2, proof, root1, root2) {
  if (!(0 < size1 && size1 <= size2)) throw new Failure("consistency", `sizes ${size1} and ${size2} are out of order`);
  if (size1 === size2) {
    if (proof.length) throw new Failure("consistency", "a proof between equal sizes must be empty");
    if (!equal(root1, root2)) throw new Failure("consistency", "two checkpoints of one size have different roots");
    return;
  }
  if (proof.length === 0) throw new Failure("consistency", "the proof is empty");
  if (proof.some((p) => p.length !== 32)) throw new Failure("consistency", "a proof hash is not 32 bytes");
  // When size1 is a power of two the old root is the first node of the path.
  const path = (size1 & (size1 - 1)) === 0 ? [root1, ...proof] : proof.slice();
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) throw new Failure("consistency", "the proof is too long");
    if (fn % 2 === 1 || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  if (sn !== 0) throw new Failure("consistency", "the proof is too short");
  if (!equal(fr, root1)) throw new Failure("consistency", `the proof does not lead to the root of size ${size1}`);
  if (!equal(sr, root2)) throw new Failure("consistency", `the proof does not lead to the root of size ${size2}`);
}

// A C2SP vkey: name+<key id hex>+base64(0x01 || 32-byte Ed25519 public key).
export async function parseVkey(text) {
  // The base64 part may itself hold "+": split at the first two only.
  const m = /^([^+\s]+)\+([^+]*)\+(\S+)$/.exec(text.trim());
  const parts = m ? [m[1], m[2], m[3]] : [];
  if (parts.length !== 3 || !/^[0-9a-f]{8}$/.test(parts[1])) {
    throw new Failure("key", "a vkey reads name+<8 hex digits>+base64");
  }
  const [name, id] = parts;
  const raw = b64decode(parts[2], "the vkey's key");
  // A witness's key (type 0x04) is never a log key, whatever its bytes.
  if (raw[0] === ALG_COSIGNATURE_V1) throw new Failure("key", `${name}+${id} is a witness's cosignature key (type 0x04), not a log key: give it as a witness key`);
  if (raw.length !== 33 || raw[0] !== 1) throw new Failure("key", "the vkey is not an Ed25519 key (0x01 and 32 bytes)");
  const pub = raw.slice(1);
  const computed = (await sha256(concat(enc.encode(name), new Uint8Array([0x0a, 0x01]), pub))).slice(0, 4);
  if (hex(computed) !== id) throw new Failure("key", `the vkey's key id ${id} is not the one its name and key give (${hex(computed)})`);
  const key = await subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  return { text: text.trim(), name, id, keyId: computed, key };
}

export function ed25519Verify(key, signature, message) {
  return subtle.verify({ name: "Ed25519" }, key, signature, message);
}

// Whether this browser verifies Ed25519 (RFC 8032 test 1: the empty message).
export async function ed25519Available() {
  try {
    const pub = hexBytes("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    const sig = hexBytes(
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    );
    const key = await subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    return (await subtle.verify({ name: "Ed25519" }, key, sig, new Uint8Array(0))) === true;
  } catch (err) {
    return false;
  }
}

export function hexBytes(text) {
  if (!/^([0-9a-f]{2})*$/.test(text)) throw new Failure("format", "not lowercase hex");
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// A C2SP signed note: text ending in \n, a blank line, then `— name base64(id || sig)` lines.
export function parseNote(note) {
  const cut = note.lastIndexOf("\n\n");
  if (cut < 0 || !note.endsWith("\n")) throw new Failure("checkpoint", "not a signed note (no blank line before the signatures)");
  const text = note.slice(0, cut + 1);
  const sigs = [];
  for (const line of note.slice(cut + 2).split("\n").slice(0, -1)) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m) throw new Failure("checkpoint", `a signature line is malformed: ${JSON.stringify(line)}`);
    const raw = b64decode(m[2], "a note signature");
    // Lines of other key types (a witness's cosignature: 4 + 8 + 64 bytes) are ignored unless
    // their key is trusted, so only the key id's 4 bytes are required of every line.
    if (raw.length < 4) throw new Failure("checkpoint", "a note signature is shorter than its 4-byte key id");
    sigs.push({ name: m[1], id: hex(raw.slice(0, 4)), sig: raw.slice(4) });
  }
  if (!sigs.length) throw new Failure("checkpoint", "the note carries no signature");
  return { text, sigs };
}

// A checkpoint note verified with `keys` (a Map id -> parsed vkey): at least one known key
// signs it and every known key's signature verifies; unknown keys' signatures are ignored.
export async function verifyCheckpoint(note, keys, origin = null) {
  const { text, sigs } = parseNote(note);
  let signed = null;
  for (const s of sigs) {
    const k = keys.get(s.id);
    if (!k || k.name !== s.name) continue;
    if (s.sig.length !== 64) throw new Failure("checkpoint", `the signature by ${k.name}+${k.id} is not 64 bytes`);
    if (!(await ed25519Verify(k.key, s.sig, enc.encode(text)))) {
      throw new Failure("checkpoint", `the signature by ${k.name}+${k.id} does not verify`);
    }
    signed = k;
  }
  if (!signed) throw new Failure("checkpoint", "no trusted key signs the checkpoint");
  const lines = text.split("\n");
  if (lines.length < 4) throw new Failure("checkpoint", "the checkpoint body is too short");
  if (origin !== null && lines[0] !== origin) throw new Failure("checkpoint", `origin ${lines[0]} is not ${origin}`);
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new Failure("checkpoint", "the tree size is not a decimal number");
  const root = b64decode(lines[2], "the checkpoint root");
  if (root.length !== 32) throw new Failure("checkpoint", "the root is not 32 bytes");
  return { origin: lines[0], size: Number(lines[1]), root, signer: signed, note };
}

// The witness cosignatures (C2SP cosignature/v1) a note claims: each line whose signature
// is 8 timestamp bytes and 64 signature bytes, as {name, id, time} (time: ISO 8601 text, or
// "invalid time" past what a Date holds, since any line can say anything). Shown only:
// verifyCosignatures checks them against the witness keys the user gives.
export function cosignatures(note) {
  return parseNote(note).sigs.filter((s) => s.sig.length === 72).map((s) => {
    let seconds = 0;
    for (let i = 0; i < 8; i++) seconds = seconds * 256 + s.sig[i];
    const when = new Date(seconds * 1000);
    return { name: s.name, id: s.id, time: Number.isNaN(when.getTime()) ? "invalid time" : when.toISOString() };
  });
}

// C2SP tlog-cosignature: a witness key is name+<key id>+base64(0x04 || 32-byte Ed25519 key),
// its id SHA-256(name || 0x0A || 0x04 || key)[:4], so it never matches a log key's id.
export const ALG_COSIGNATURE_V1 = 0x04;
const MAX_TIMESTAMP = (1n << 63n) - 1n;
// How far in the future a cosignature's time may lie (clock drift), as memseal verify allows.
const MAX_FUTURE_SKEW = 300;

export async function parseWitnessVkey(text) {
  const m = /^([^+\s]+)\+([^+]*)\+(\S+)$/.exec(text.trim());
  if (!m || !/^[0-9a-f]{8}$/.test(m[2])) throw new Failure("witness key", "a witness vkey reads name+<8 hex digits>+base64");
  const [, name, id] = m;
  const raw = b64decode(m[3], "the witness vkey's key");
  if (raw[0] === 1) throw new Failure("witness key", `${name}+${id} is a log's note key (type 0x01), not a witness's cosignature key (0x04)`);
  if (raw.length !== 33 || raw[0] !== ALG_COSIGNATURE_V1) throw new Failure("witness key", `${name}+${id} is not a cosignature/v1 key (0x04 and 32 bytes)`);
  const pub = raw.slice(1);
  const computed = (await sha256(concat(enc.encode(name), new Uint8Array([0x0a, ALG_COSIGNATURE_V1]), pub))).slice(0, 4);
  if (hex(computed) !== id) throw new Failure("witness key", `the witness vkey's key id ${id} is not the one its name and key give (${hex(computed)})`);
  const key = await subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  return { text: text.trim(), name, id, key };
}

// The cosignatures of `note` by the trusted witnesses `witnesses` (a Map id -> parsed witness
// vkey), each checked: 8 big-endian timestamp bytes (at most 2^63-1, not past now + 5 min)
// and an Ed25519 signature over "cosignature/v1\ntime <t>\n" and the note's text. A line of
// a trusted witness that fails is a failure naming it; so is a trusted witness with no line.
// Lines of other keys are ignored, as the signed-note rules say. Returns [{name, id, time}].
export async function verifyCosignatures(note, witnesses, now = Date.now() / 1000) {
  const { text, sigs } = parseNote(note);
  const verified = new Map();
  for (const s of sigs) {
    const w = witnesses.get(s.id);
    if (!w || w.name !== s.name) continue;
    const who = `${w.name}+${w.id}`;
    if (s.sig.length !== 72) throw new Failure("cosignature", `the cosignature by ${who} is not 8 + 64 bytes`);
    let t = 0n;
    for (let i = 0; i < 8; i++) t = (t << 8n) | BigInt(s.sig[i]);
    if (t > MAX_TIMESTAMP) throw new Failure("cosignature", `the cosignature by ${who} has a timestamp past 2^63-1`);
    if (t > BigInt(Math.floor(now + MAX_FUTURE_SKEW))) throw new Failure("cosignature", `the cosignature by ${who} is dated in the future (${t})`);
    const message = enc.encode(`cosignature/v1\ntime ${t}\n${text}`);
    if (!(await ed25519Verify(w.key, s.sig.slice(8), message))) {
      throw new Failure("cosignature", `the cosignature by ${who} does not verify`);
    }
    verified.set(w.id, { name: w.name, id: w.id, time: new Date(Number(t) * 1000).toISOString() });
  }
  for (const w of witnesses.values()) {
    if (!verified.has(w.id)) throw new Failure("cosignature", `no cosignature by the witness ${w.name}+${w.id}`);
  }
  return [...verified.values()];
}

// A C2SP tlog-proof: the header, optional extra, index, hashes, a blank line, the note.
export function parseTlogProof(text) {
  const blank = text.indexOf("\n\n");
  if (blank < 0) throw new Failure("inclusion", "the proof has no blank line before its checkpoint");
  const head = text.slice(0, blank).split("\n");
  if (head[0] !== "c2sp.org/tlog-proof@v1") throw new Failure("inclusion", "not a c2sp.org/tlog-proof@v1");
  let i = 1;
  if (head[i] && head[i].startsWith("extra ")) i++;
  const m = /^index (0|[1-9][0-9]*)$/.exec(head[i] || "");
  if (!m) throw new Failure("inclusion", "the proof names no index");
  const hashes = head.slice(i + 1).map((h) => b64decode(h, "a proof hash"));
  return { index: Number(m[1]), hashes, note: text.slice(blank + 2) };
}

// memseal/consistency-proof@v1: the sizes and roots, then one base64 hash a line.
export function parseConsistency(text) {
  const lines = text.split("\n");
  if (lines[0] !== "memseal/consistency-proof@v1") throw new Failure("consistency", "not a memseal/consistency-proof@v1");
  const old = /^old (\d+) (\S+)$/.exec(lines[1] || "");
  const neu = /^new (\d+) (\S+)$/.exec(lines[2] || "");
  if (!old || !neu) throw new Failure("consistency", "the proof names no sizes");
  return {
    oldSize: Number(old[1]),
    newSize: Number(neu[1]),
    hashes: lines.slice(3).filter((l) => l).map((h) => b64decode(h, "a proof hash")),
  };
}

const ENTRY_CONTEXT = enc.encode("memseal/entry/v1\u0000");

// An entry's payload against the payload_hash its signed bytes carry (`signedHash`, read
// from the verified entry, never from the server's decoded header): BLAKE3 of the 16-byte
// salt and the payload. A residue (what a forget left: salt "", {"texts": {ref: [salt,
// text]}}) is checked text by text: each text hashes with its salt to its ref, and the
// signed entry carries the ref as {"$t": ref}. Returns "whole" or "residue".
export function checkPayload(seq, payloadB64, saltHex, signedHash, leafText) {
  const payload = b64decode(payloadB64, `entry ${seq}'s payload`);
  if (typeof signedHash !== "string") throw new Failure("payload hash", "a payload is served, but the signed entry commits to none", seq);
  if (saltHex === "") {
    let texts;
    try {
      texts = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload)).texts;
    } catch (err) {
      texts = null;
    }
    if (texts === null || typeof texts !== "object" || Array.isArray(texts)) throw new Failure("payload hash", "the residue is not a JSON object of texts", seq);
    for (const [ref, pair] of Object.entries(texts)) {
      if (!Array.isArray(pair) || pair.length !== 2 || !/^[0-9a-f]{32}$/.test(pair[0]) || typeof pair[1] !== "string") {
        throw new Failure("payload hash", `residue text ${ref.slice(0, 12)} is not [salt, text]`, seq);
      }
      if (blake3Hex(concat(hexBytes(pair[0]), enc.encode(pair[1]))) !== ref) {
        throw new Failure("payload hash", `residue text ${ref.slice(0, 12)} does not hash to its ref`, seq);
      }
      if (!leafText.includes(`{"$t":"${ref}"}`)) throw new Failure("payload hash", `residue text ${ref.slice(0, 12)} is not referenced by the signed entry`, seq);
    }
    return "residue";
  }
  if (typeof saltHex !== "string" || !/^[0-9a-f]{32}$/.test(saltHex)) throw new Failure("payload hash", "the payload's salt is not 16 bytes of hex", seq);
  const computed = blake3Hex(concat(hexBytes(saltHex), payload));
  if (computed !== signedHash) {
    throw new Failure("payload hash", `BLAKE3 of the salt and payload is ${computed.slice(0, 12)}…, not the signed payload_hash ${signedHash.slice(0, 12)}…`, seq);
  }
  return "whole";
}

// One entry's own checks: its bytes name `seq` and chain to `prev`, its key is trusted, its
// Ed25519 signature over "memseal/entry/v1" 0x00 leaf-hash verifies. Returns the leaf hash,
// the decoded entry and its text (payloads: checkPayload, with the entry's payload_hash).
export async function verifyEntry(seq, leafB64, sigB64, prevHex, keys) {
  const leaf = b64decode(leafB64, `entry ${seq}'s bytes`);
  return verifyEntryBytes(seq, leaf, b64decode(sigB64, `entry ${seq}'s signature`), prevHex, keys);
}

// verifyEntry on raw bytes, as the tiles carry them (an entry bundle and its signatures).
export async function verifyEntryBytes(seq, leaf, sig, prevHex, keys) {
  let entry;
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(leaf);
    entry = JSON.parse(text);
  } catch (err) {
    throw new Failure("format", "the entry bytes are not UTF-8 JSON", seq);
  }
  if (entry === null || typeof entry !== "object" || entry.v !== 1) throw new Failure("format", "not a v1 entry", seq);
  if (entry.seq !== seq) throw new Failure("format", `the entry says seq ${entry.seq}`, seq);
  const lh = await leafHash(leaf);
  if (prevHex !== null && entry.prev !== prevHex) {
    throw new Failure("chain", `prev ${String(entry.prev).slice(0, 12)}… is not the leaf hash of entry ${seq - 1}`, seq);
  }
  const k = keys.get(entry.key);
  if (!k) throw new Failure("unknown key", `signed by key ${entry.key}, which is not trusted here`, seq);
  if (sig.length !== 64 || !(await ed25519Verify(k.key, sig, concat(ENTRY_CONTEXT, lh)))) {
    throw new Failure("signature", `the Ed25519 signature by key ${entry.key} does not verify`, seq);
  }
  return { leafHash: lh, entry, text, key: k };
}

// The key history: a key_rotated entry hands over from its signer to the key its body names,
// and from there on only the new key signs. Returns the new key, or null for other kinds.
export async function handOver(checked, keys) {
  if (checked.entry.kind !== "key_rotated") return null;
  const next = await parseVkey(String(checked.entry.body && checked.entry.body.vkey));
  keys.delete(checked.key.id);
  keys.set(next.id, next);
  return next;
}

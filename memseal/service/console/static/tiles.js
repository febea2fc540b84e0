// The log read back from its C2SP tlog-tiles alone (docs/auditing.md): the signed checkpoint,
// the hash tiles of height 8, the entry bundles and memseal's signature bundles, fetched from
// this server's /tlog/ or any mirror that allows CORS. The same checks as
// `memseal verify --tiles`: each entry along the key history (verifyEntryBytes, the console's
// port of check_entry), every hash tile against the hashes the entries make, the root of all
// leaves against the checkpoint's. No DOM here: verifytiles.js shows it.
import {
  Failure, concat, equal, handOver, hex, nodeHash, parseNote, sha256, verifyCheckpoint, verifyEntryBytes,
} from "./crypto.js";

export const HEIGHT = 8;
export const WIDTH = 1 << HEIGHT;
const HASH = 32;
const SIGNATURE = 64;
const MAX_ENTRY = 0xffff;
const MAX_CHECKPOINT = 64 * 1024;

// The spec's path form of a tile index: 3-digit groups, all but the last x-prefixed.
export function encodeIndex(n) {
  if (!Number.isSafeInteger(n) || n < 0) throw new Failure("tiles", `tile index ${n} is not a whole number`);
  let digits = String(n);
  digits = "0".repeat((3 - (digits.length % 3)) % 3) + digits;
  const groups = digits.match(/.{3}/g);
  return [...groups.slice(0, -1).map((g) => `x${g}`), groups[groups.length - 1]].join("/");
}

// kind: "hashes" (at `level`), "entries" or "signatures"; width 256 for a full tile.
export function tilePath(kind, index, width = WIDTH, level = 0) {
  const head = kind === "hashes" ? `tile/${level}` : kind === "entries" ? "tile/entries" : "signatures";
  return `${head}/${encodeIndex(index)}${width === WIDTH ? "" : `.p/${width}`}`;
}

function limitOf(kind, width) {
  if (kind === "entries") return width * (2 + MAX_ENTRY);
  return width * (kind === "signatures" ? SIGNATURE : HASH);
}

function bad(check, path, message, seq = null) {
  const err = new Failure(check, message, seq);
  err.path = path;
  return err;
}

// A reader of the tiles under `base` (an absolute URL ending in /). The console's token goes
// only to this console's own origin: a mirror elsewhere never sees it.
export function tileReader(base, token) {
  const url = new URL(base);
  const own = url.origin === location.origin;
  const headers = own && token ? { Authorization: `Bearer ${token}` } : {};
  const read = async (path, limit, fresh = false) => {
    let res;
    try {
      res = await fetch(new URL(path, url), { headers, cache: fresh ? "no-cache" : "default", credentials: "omit" });
    } catch (err) {
      const cors = own ? "" : " (a mirror on another origin must send Access-Control-Allow-Origin)";
      throw bad("fetch", path, `cannot fetch ${new URL(path, url).href}: ${err.message}${cors}`);
    }
    if (res.status === 401 || res.status === 403) {
      const why = own
        ? "this token may not read it (the tiles take an auditor's or admin's token, unless the server runs with --tlog-public, and --tlog-public-entries for the entry bundles)"
        : "the mirror wants a token, and the console sends its token only to its own server";
      const err = bad("refused", path, `the server refused ${path} (${res.status}): ${why}`);
      err.refused = res.status;
      throw err;
    }
    if (res.status === 404) {
      const err = bad("missing", path, `${path} is missing (404)`);
      err.missing = true;
      throw err;
    }
    if (res.status !== 200) throw bad("fetch", path, `${path} answered ${res.status}`);
    // Read against the most such a file can hold, so a hostile mirror's endless body is cut.
    const reader = res.body.getReader();
    const parts = [];
    let total = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > limit) {
        reader.cancel();
        throw bad("tiles", path, `${path} holds more than the ${limit.toLocaleString()} bytes such a file can`);
      }
      parts.push(value);
    }
    return concat(...parts);
  };
  return {
    base: url.href,
    sendsToken: own && Boolean(token),
    checkpoint: async () => read("checkpoint", MAX_CHECKPOINT, true),
    tile: (kind, index, width, level = 0) => read(tilePath(kind, index, width, level), limitOf(kind, width)),
  };
}

function split(data, size, width, path, what) {
  if (data.length !== width * size) throw bad("tiles", path, `${what} has ${data.length} bytes, want ${width * size}`);
  const out = [];
  for (let at = 0; at < data.length; at += size) out.push(data.subarray(at, at + size));
  return out;
}

export function decodeBundle(data, width, path) {
  const leaves = [];
  let at = 0;
  while (at < data.length) {
    if (at + 2 > data.length) throw bad("tiles", path, "the entry bundle ends inside a length prefix");
    const length = (data[at] << 8) | data[at + 1];
    if (at + 2 + length > data.length) throw bad("tiles", path, `the bundle's entry ${leaves.length} runs past its end`);
    leaves.push(data.subarray(at + 2, at + 2 + length));
    at += 2 + length;
  }
  if (leaves.length !== width) throw bad("tiles", path, `the entry bundle holds ${leaves.length} entries, want ${width}`);
  return leaves;
}

// The root of a complete subtree over a power of two of hashes (what a full tile contributes
// to the level above); each level's digests are asked of WebCrypto together.
async function subtreeRoot(hashes) {
  let level = hashes;
  while (level.length > 1) {
    const pairs = [];
    for (let i = 0; i < level.length; i += 2) pairs.push(nodeHash(level[i], level[i + 1]));
    level = await Promise.all(pairs);
  }
  return level[0];
}

// Rolls leaf hashes up tile by tile, comparing each hash tile (from level `from`) with the
// hashes below it, and gives the RFC 6962 root of the leaves pushed so far at any point.
class Rollup {
  constructor(reader, from) {
    this.reader = reader;
    this.from = from;
    this.pending = [];
    this.done = [];
    this.count = 0;
    this.checked = 0;
  }

  async push(level, digest) {
    if (level === 0) this.count += 1;
    if (level === this.pending.length) {
      this.pending.push([]);
      this.done.push(0);
    }
    this.pending[level].push(digest);
    if (this.pending[level].length === WIDTH) {
      const hashes = this.pending[level];
      this.pending[level] = [];
      await this.compare(level, this.done[level], WIDTH, hashes);
      this.done[level] += 1;
      await this.push(level + 1, await subtreeRoot(hashes));
    }
  }

  async compare(level, index, width, hashes) {
    if (level < this.from) return;
    const path = tilePath("hashes", index, width, level);
    const data = await this.reader.tile("hashes", index, width, level);
    if (!equal(data, concat(...hashes))) {
      const first = (index * WIDTH) * WIDTH ** level;
      throw bad("hash tile", path, `${path} differs from the hashes the ${level ? "tiles below" : "entries"} make (its first leaf is entry ${first})`);
    }
    this.checked += 1;
  }

  async finish() {
    for (let level = 0; level < this.pending.length; level++) {
      if (this.pending[level].length) await this.compare(level, this.done[level], this.pending[level].length, this.pending[level]);
    }
  }

  // The root folds the perfect subtrees of the size's binary form from the right (largest
  // first: the higher levels' pending hashes hold the earlier leaves).
  async root() {
    const perfect = [];
    for (let level = this.pending.length - 1; level >= 0; level--) {
      const p = this.pending[level];
      let at = 0;
      for (let bit = HEIGHT - 1; bit >= 0; bit--) {
        if (p.length & (1 << bit)) {
          perfect.push(await subtreeRoot(p.slice(at, at + (1 << bit))));
          at += 1 << bit;
        }
      }
    }
    if (!perfect.length) return sha256(new Uint8Array(0));
    let r = perfect[perfect.length - 1];
    for (let i = perfect.length - 2; i >= 0; i--) r = await nodeHash(perfect[i], r);
    return r;
  }
}

// The checkpoint's text and size, read before its signature is checked (the walk is bounded
// by it); the signature is checked before anything is reported.
function readCheckpoint(raw) {
  let note;
  try {
    note = new TextDecoder("utf-8", { fatal: true }).decode(raw);
  } catch (err) {
    throw bad("checkpoint", "checkpoint", "the checkpoint is not UTF-8 text");
  }
  const lines = note.split("\n");
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1] || "") || !Number.isSafeInteger(Number(lines[1]))) {
    throw bad("checkpoint", "checkpoint", "the tree size is not a number this browser can count to");
  }
  return { note, origin: lines[0], size: Number(lines[1]) };
}

async function checkNote(note, keys, origin) {
  try {
    return await verifyCheckpoint(note, keys, origin);
  } catch (err) {
    if (err instanceof Failure) err.path = "checkpoint";
    throw err;
  }
}

function signedByPinned(note, keys) {
  return parseNote(note).sigs.some((s) => keys.has(s.id) && keys.get(s.id).name === s.name);
}

// Each entry of one bundle: its bytes, chain and signature along the key history.
async function checkBundle(reader, index, width, state, on) {
  const path = tilePath("entries", index, width);
  const raw = index === 0 && state.first ? state.first : await reader.tile("entries", index, width);
  const leaves = decodeBundle(raw, width, path);
  const sigPath = tilePath("signatures", index, width);
  const sigs = split(await reader.tile("signatures", index, width), SIGNATURE, width, sigPath, "the signature bundle");
  for (let i = 0; i < width; i++) {
    const seq = index * WIDTH + i;
    let r;
    try {
      r = await verifyEntryBytes(seq, leaves[i], sigs[i], state.prev, state.keys);
    } catch (err) {
      if (err instanceof Failure) err.path = path;
      if (state.unpinned && seq === 0 && err.check === "unknown key") {
        throw bad("checkpoint", "checkpoint", `no key pinned here signs the checkpoint, nor entry 0 (${err.message}): the pinned key is not this log's`);
      }
      throw err;
    }
    const next = await handOver(r, state.keys);
    if (next) on.ok(`seq ${seq}: key rotated from ${r.key.id} to ${next.id}`);
    state.prev = hex(r.leafHash);
    await state.roll.push(0, r.leafHash);
    if (state.roll.count === state.keptSize) state.keptRoot = await state.roll.root();
  }
}

// The leaf hashes from the level-0 hash tiles, when no entry bundle can be read: what the
// signed checkpoint commits to is checked, not what the entries say.
async function rollHashTiles(reader, size, state, on) {
  for (let index = 0; index * WIDTH < size; index++) {
    const width = Math.min(WIDTH, size - index * WIDTH);
    const path = tilePath("hashes", index, width);
    for (const leaf of split(await reader.tile("hashes", index, width), HASH, width, path, "the hash tile")) {
      await state.roll.push(0, leaf);
      if (state.roll.count === state.keptSize) state.keptRoot = await state.roll.root();
    }
    on.progress(Math.min(size, (index + 1) * WIDTH), size);
  }
}

// Verify the tiled log at `reader` with `keys` (a Map id -> parsed vkey, changed in place
// along the key history). `kept(origin)` gives the checkpoint of that log verified here
// before ({note, size, root}) or null,
// `on` gets ok(text), note(text) and progress(done, total). Returns what was checked:
// {cp, mode: "entries" | "hashes", refused, tiles, kept}; throws a Failure naming the file.
export async function verifyTiles(reader, keys, { origin = null, kept: keptFor = () => null, on }) {
  const read = readCheckpoint(await reader.checkpoint());
  const { note, size } = read;
  const kept = keptFor(read.origin);
  const unpinned = !signedByPinned(note, keys);
  // A pinned key's signature is checked before the size costs anything; one by a later key
  // waits for the walk to hand that key over (as memseal verify --tiles does).
  if (!unpinned) await checkNote(note, keys, origin);
  if (kept && kept.size > size) {
    throw bad("consistency", "checkpoint", `the checkpoint's size ${size} is below the ${kept.size} verified here before: the log went back`);
  }
  const state = { keys, prev: "0".repeat(64), unpinned, keptSize: kept ? kept.size : -1, keptRoot: null, first: null };
  let mode = "entries";
  let refused = null;
  try {
    // The first bundle says whether the entries can be read at all (403: not to this token).
    if (size) state.first = await reader.tile("entries", 0, Math.min(WIDTH, size));
  } catch (err) {
    if (!err.refused && !err.missing) throw err;
    mode = "hashes";
    refused = err;
  }
  state.roll = new Rollup(reader, mode === "entries" ? 0 : 1);
  if (mode === "entries") {
    for (let index = 0; index * WIDTH < size; index++) {
      const width = Math.min(WIDTH, size - index * WIDTH);
      await checkBundle(reader, index, width, state, on);
      on.progress(index * WIDTH + width, size);
    }
    if (size) on.ok(`entries 0 to ${size - 1}: bytes, chain and Ed25519 signatures along the key history (${size} entries, ${Math.ceil(size / WIDTH)} bundles)`);
  } else {
    if (unpinned) {
      throw bad("checkpoint", "checkpoint", `no key pinned here signs the checkpoint, and without the entry bundles (${refused.message}) no key_rotated entry can hand a later key over: pin the log's current key`);
    }
    await rollHashTiles(reader, size, state, on);
  }
  await state.roll.finish();
  const cp = await checkNote(note, keys, origin);
  on.ok(`checkpoint of size ${cp.size}: signed by ${cp.signer.name}+${cp.signer.id}`);
  const root = await state.roll.root();
  if (!equal(root, cp.root)) {
    throw bad("tree", "checkpoint", `the root of the ${size} leaves computed here is not the checkpoint's root`);
  }
  const tiles = state.roll.checked + (mode === "hashes" ? Math.ceil(size / WIDTH) : 0);
  on.ok(`tree: ${tiles} hash tiles hold what the ${mode === "entries" ? "entries make" : "leaf hashes make"}, and the RFC 6962 root of all ${size} leaves, computed here, is the checkpoint's`);
  if (kept && kept.size > 0) {
    if (!equal(state.keptRoot, kept.root)) {
      throw bad("consistency", "checkpoint", `the first ${kept.size} leaves make another root than the checkpoint verified here before: a forked log`);
    }
    on.ok(`consistency: the checkpoint of size ${kept.size} verified here before is the root of this tree's first ${kept.size} leaves`);
  }
  return { cp, mode, refused, tiles, kept };
}

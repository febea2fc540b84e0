// BLAKE3 (the default hash mode, 32-byte output), written for this console from the BLAKE3
// specification (github.com/BLAKE3-team/BLAKE3-specs): WebCrypto has no BLAKE3, and the
// ledger's payload hashes are BLAKE3 over the payload's salt and bytes. Plain and portable,
// not fast: the console hashes one page of payloads at a time. Tested against the Python
// blake3 package and the specification's vectors (tests/browser/test_console_payloads.py).

const IV = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
const CHUNK_START = 1;
const CHUNK_END = 2;
const PARENT = 4;
const ROOT = 8;
const BLOCK = 64;
const CHUNK = 1024;

function rotr(x, n) {
  return (x >>> n) | (x << (32 - n));
}

// The quarter-round G on state words a, b, c, d with message words x and y.
function g(s, a, b, c, d, x, y) {
  s[a] = (s[a] + s[b] + x) | 0;
  s[d] = rotr(s[d] ^ s[a], 16);
  s[c] = (s[c] + s[d]) | 0;
  s[b] = rotr(s[b] ^ s[c], 12);
  s[a] = (s[a] + s[b] + y) | 0;
  s[d] = rotr(s[d] ^ s[a], 8);
  s[c] = (s[c] + s[d]) | 0;
  s[b] = rotr(s[b] ^ s[c], 7);
}

// The compression function: 16 output words from a chaining value, a 16-word block, the
// 64-bit counter, the block's length and the flags.
function compress(cv, m, counter, blockLen, flags) {
  const s = new Int32Array(16);
  for (let i = 0; i < 8; i++) s[i] = cv[i];
  for (let i = 0; i < 4; i++) s[8 + i] = IV[i];
  s[12] = counter % 0x100000000;
  s[13] = Math.floor(counter / 0x100000000);
  s[14] = blockLen;
  s[15] = flags;
  let w = Int32Array.from(m);
  for (let r = 0; r < 7; r++) {
    g(s, 0, 4, 8, 12, w[0], w[1]);
    g(s, 1, 5, 9, 13, w[2], w[3]);
    g(s, 2, 6, 10, 14, w[4], w[5]);
    g(s, 3, 7, 11, 15, w[6], w[7]);
    g(s, 0, 5, 10, 15, w[8], w[9]);
    g(s, 1, 6, 11, 12, w[10], w[11]);
    g(s, 2, 7, 8, 13, w[12], w[13]);
    g(s, 3, 4, 9, 14, w[14], w[15]);
    if (r < 6) w = Int32Array.from(PERMUTATION, (p) => w[p]);
  }
  const out = new Uint32Array(16);
  for (let i = 0; i < 8; i++) {
    out[i] = s[i] ^ s[i + 8];
    out[i + 8] = s[i + 8] ^ cv[i];
  }
  return out;
}

// A block of up to 64 bytes as 16 little-endian words, zero-padded.
function words(bytes, start, end) {
  const m = new Uint32Array(16);
  for (let i = start; i < end; i++) m[(i - start) >> 2] |= bytes[i] << (8 * ((i - start) & 3));
  return m;
}

// One chunk's chaining value (its last block with ROOT when the chunk is the whole input).
function chunkCv(bytes, index, root) {
  const start = index * CHUNK;
  const end = Math.min(bytes.length, start + CHUNK);
  let cv = IV;
  let at = start;
  for (let first = true; ; first = false) {
    const stop = Math.min(end, at + BLOCK);
    const last = stop === end;
    let flags = (first ? CHUNK_START : 0) | (last ? CHUNK_END : 0);
    if (last && root) flags |= ROOT;
    cv = compress(cv, words(bytes, at, stop), index, stop - at, flags).slice(0, 8);
    if (last) return cv;
    at = stop;
  }
}

// The chaining value of chunks [first, first + count): a left subtree of the largest power
// of two chunks smaller than count, the rest on the right, joined by a parent node.
function subtreeCv(bytes, first, count, root) {
  if (count === 1) return chunkCv(bytes, first, root);
  let left = 1;
  while (left * 2 < count) left *= 2;
  const block = new Uint32Array(16);
  block.set(subtreeCv(bytes, first, left, false), 0);
  block.set(subtreeCv(bytes, first + left, count - left, false), 8);
  return compress(IV, block, 0, BLOCK, PARENT | (root ? ROOT : 0)).slice(0, 8);
}

// BLAKE3 of `bytes` (a Uint8Array): 32 bytes.
export function blake3(bytes) {
  const chunks = Math.max(1, Math.ceil(bytes.length / CHUNK));
  const cv = subtreeCv(bytes, 0, chunks, true);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = (cv[i >> 2] >>> (8 * (i & 3))) & 0xff;
  return out;
}

export function blake3Hex(bytes) {
  return Array.from(blake3(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

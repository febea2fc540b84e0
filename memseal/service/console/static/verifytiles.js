// Verify here, from the tiles: the log read back from its C2SP tlog-tiles (this server's
// /tlog/ or a static mirror), with the keys pinned on the page; see tiles.js for the checks.
import { token } from "./api.js";
import { Failure, b64decode, cosignatures, verifyCosignatures } from "./crypto.js";
import { checkList, trustedKeys, witnessKeys } from "./checks.js";
import { tileReader, verifyTiles } from "./tiles.js";
import { field, h } from "./ui.js";

// The last checkpoint verified from the tiles, per log origin, so the next visit checks the
// log only grew from it (whichever mirror serves it). This browser's own record.
const KEPT_TILES = "memseal.tiles.kept";

function keptNotes() {
  try {
    const kept = JSON.parse(localStorage.getItem(KEPT_TILES) || "{}");
    return kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {};
  } catch (e) {
    return {};
  }
}

function keptFor(origin) {
  const note = keptNotes()[origin];
  if (typeof note !== "string") return null;
  const lines = note.split("\n");
  try {
    return { note, size: Number(lines[1]), root: b64decode(lines[2], "the kept root") };
  } catch (e) {
    return null;
  }
}

function keep(cp) {
  const kept = keptNotes();
  kept[cp.origin] = cp.note;
  localStorage.setItem(KEPT_TILES, JSON.stringify(kept));
}

function forget() {
  localStorage.removeItem(KEPT_TILES);
}

function refusedText(refused, sendsToken) {
  if (refused.refused) {
    const who = sendsToken ? "this console's token may not read them (entry bundles need an auditor or admin token, unless the server runs with --tlog-public-entries)" : "the mirror asks for a token, and the console sends its token only to its own server";
    return `Entry bundles refused (${refused.refused} on ${refused.path}): ${who}.`;
  }
  return `Entry bundles not published (${refused.path} is missing): the mirror serves the hash tiles only.`;
}

// `ownOrigin`: the log's origin as this server's API gives it (null when it cannot be read).
export function tilesSection(keysBox, witnessBox, ownOrigin) {
  const own = new URL("../tlog/", document.baseURI).href;
  const baseIn = h("input", { type: "url", size: 50, value: own, spellcheck: "false" });
  const checks = checkList("Checks of the tiles");
  const progress = h("p", { class: "muted", "aria-live": "polite" });
  const keptNote = h("p", { class: "muted" });
  let last = 0;
  const on = {
    ok: (text) => checks.ok(text),
    note: (text) => checks.note(text),
    progress(done, total) {
      // Updated at most ten times a second: a long log still shows it moving.
      const now = Date.now();
      if (now - last < 100 && done < total) return;
      last = now;
      progress.textContent = `Checked ${done.toLocaleString()} of ${total.toLocaleString()} entries (${Math.floor((100 * done) / Math.max(total, 1))}%)…`;
    },
  };

  function showKept() {
    const list = Object.entries(keptNotes()).map(([origin, note]) => `${origin} at size ${note.split("\n")[1]}`);
    keptNote.replaceChildren(
      list.length ? `Kept in this browser from earlier runs: ${list.join("; ")}. The next run checks the log only grew from it. ` : "No checkpoint kept from the tiles yet: a passing run keeps its checkpoint here. ",
      list.length ? h("button", { type: "button", class: "quiet", onclick: () => { forget(); showKept(); } }, "Forget kept tile checkpoints") : null,
    );
  }

  async function run() {
    checks.reset();
    progress.textContent = "";
    try {
      const keys = await trustedKeys(keysBox.value);
      const witnesses = await witnessKeys(witnessBox.value);
      let base;
      try {
        base = new URL(baseIn.value.trim().replace(/\/?$/, "/"), document.baseURI).href;
      } catch (e) {
        throw new Failure("tiles", `${baseIn.value} is not a URL`);
      }
      const reader = tileReader(base, token());
      checks.note(`reading ${reader.base}${reader.sendsToken ? " with this console's token" : " without a token"}`);
      const result = await verifyTiles(reader, keys, { origin: base === own ? ownOrigin : null, kept: keptFor, on });
      const kept = result.kept;
      // The witnesses' cosignatures (a served checkpoint carries them under serve --witness).
      const checked = new Set();
      for (const c of await verifyCosignatures(result.cp.note, witnesses)) {
        checked.add(c.id);
        checks.ok(`cosigned by witness ${c.name}+${c.id} at ${c.time}: its cosignature/v1 verifies`);
      }
      for (const c of cosignatures(result.cp.note)) {
        if (!checked.has(c.id)) checks.note(`cosigned by witness ${c.name}+${c.id} at ${c.time} (not checked: give its witness vkey above)`);
      }
      keep(result.cp);
      showKept();
      if (result.mode === "entries") {
        checks.pass(`Verified in this browser from the tiles: all ${result.cp.size} entries and the checkpoint of size ${result.cp.size}${kept ? `, consistent with the size ${kept.size} kept before` : ""}.`);
      } else {
        checks.note(`not checked: the entries' bytes, chain and signatures, and the key history (they are in the entry bundles)`);
        checks.partial(`${refusedText(result.refused, reader.sendsToken)} Checked from the hash tiles alone: the checkpoint's signature, every hash tile against the checkpoint's root${kept ? ", and consistency with the checkpoint kept before" : ""}. The entries themselves were NOT checked.`);
      }
    } catch (err) {
      checks.fail(err);
    }
    progress.textContent = "";
  }

  showKept();
  return h(
    "div",
    {},
    h("h3", {}, "Checkpoint and entries from the tiles"),
    h("p", { class: "muted" }, "The log as C2SP tlog-tiles (the signed checkpoint, hash tiles, entry bundles), read from this server's /tlog/ or a static mirror that allows CORS: every entry's signature and chain along the key history, every hash tile, and the tree's root against the checkpoint's. The console's token is sent to this server only, never to a mirror elsewhere."),
    field("Tiles base URL", baseIn),
    h("button", { type: "button", onclick: run }, "Verify from the tiles"),
    progress,
    checks.verdict,
    checks.list,
    keptNote,
  );
}

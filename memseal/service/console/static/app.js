// The console's shell: sign-in, the pages the token's role may use, and a hash router.
import { api, signIn, signOut, token } from "./api.js";
import { errorBox, field, h } from "./ui.js";

const PAGES = [
  { path: "overview", title: "Overview", roles: ["auditor", "admin"], load: () => import("./overview.js") },
  { path: "ledger", title: "Ledger", roles: ["auditor", "admin"], load: () => import("./ledger.js") },
  // An agent's Verify page reads the log's tiles only, when the server makes them public;
  // it is never an agent's first page.
  { path: "verify", title: "Verify here", roles: ["agent", "auditor", "admin"], landing: ["auditor", "admin"], load: () => import("./verify.js") },
  { path: "runs", title: "Runs", roles: ["agent", "auditor", "admin"], load: () => import("./runs.js") },
  { path: "memory", title: "Memory", roles: ["agent", "auditor", "admin"], load: () => import("./memory.js") },
  { path: "tokens", title: "Tokens", roles: ["admin"], load: () => import("./tokens.js") },
];

let me = null;
const main = document.getElementById("main");

function signInPage(message) {
  const input = h("input", { type: "password", autocomplete: "off", required: true, size: 50 });
  const form = h(
    "form",
    {
      onsubmit: async (ev) => {
        ev.preventDefault();
        signIn(input.value);
        await start();
      },
    },
    h("h2", {}, "Sign in"),
    h("p", {}, "Paste a memseal API token (", h("code", {}, "memseal tokens add"), "). It is kept in this tab only and sent to this server's API, which decides what you see."),
    message ? errorBox(message) : null,
    field("API token", input),
    h("button", { type: "submit" }, "Sign in"),
  );
  main.replaceChildren(form);
  document.getElementById("nav").replaceChildren();
  document.getElementById("who").replaceChildren();
  input.focus();
}

function pagesFor(role) {
  return PAGES.filter((p) => p.roles.includes(role));
}

function renderNav(current) {
  const nav = document.getElementById("nav");
  nav.replaceChildren(
    ...pagesFor(me.role).map((p) =>
      h("a", { href: `#/${p.path}`, "aria-current": p.path === current ? "page" : null }, p.title),
    ),
  );
  document.getElementById("who").replaceChildren(
    `${me.role} at ${me.place} (reach ${me.reach})${me.label ? ` · ${me.label}` : ""} `,
    h("button", { class: "quiet", type: "button", onclick: () => { signOut(); me = null; location.hash = ""; signInPage(); } }, "Sign out"),
  );
}

async function route() {
  if (!me) return;
  const [path, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const pages = pagesFor(me.role);
  const page = pages.find((p) => p.path === path) || pages.find((p) => !p.landing || p.landing.includes(me.role));
  renderNav(page.path);
  document.title = `${page.title} · memseal`;
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const mod = await page.load();
    const view = await mod.render({ me, args: rest.map(decodeURIComponent) });
    main.replaceChildren(view);
  } catch (err) {
    if (err && err.status === 401) return signInPage(err.message);
    main.replaceChildren(h("h2", {}, page.title), errorBox(err));
  }
  main.focus({ preventScroll: true });
}

async function start() {
  if (!token()) return signInPage();
  try {
    me = await api("/v1/me");
  } catch (err) {
    signOut();
    return signInPage(err.message);
  }
  await route();
}

window.addEventListener("hashchange", route);
start();

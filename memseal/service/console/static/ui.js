// DOM helpers: every datum goes in as text (textContent), never as HTML, so nothing a
// ledger entry or a memory holds can run in the page that shows it.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function table(caption, columns, rows) {
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((cell) => h("td", {}, cell))))),
  );
}

export function pre(text, label) {
  return h("pre", { tabindex: "0", "aria-label": label }, text);
}

export function errorBox(err) {
  return h("p", { class: "bad", role: "alert" }, err && err.message ? err.message : String(err));
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}` }, text);
}

export function field(label, input) {
  const id = `f-${label.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}-${Math.random().toString(36).slice(2, 7)}`;
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}

export function decodeB64Text(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new TextDecoder().decode(bytes);
}

export function pretty(jsonText) {
  try {
    return JSON.stringify(JSON.parse(jsonText), null, 2);
  } catch (e) {
    return jsonText;
  }
}

export function short(text, n = 80) {
  const s = typeof text === "string" ? text : JSON.stringify(text);
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

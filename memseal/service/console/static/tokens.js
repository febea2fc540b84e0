// Tokens (admin): the tokens within the admin's reach, mint one (shown once), revoke.
import { api } from "./api.js";
import { badge, errorBox, field, h, table } from "./ui.js";

export async function render() {
  const listed = await api("/v1/admin/tokens");
  const out = h("div", { "aria-live": "polite" });
  const roleSel = h("select", {}, ["agent", "auditor", "admin"].map((r) => h("option", { value: r }, r)));
  const placeIn = h("input", { type: "text", size: 40, required: true, placeholder: "team:acme/agent:writer" });
  const reachIn = h("input", { type: "text", size: 30, placeholder: "default for the role" });
  const labelIn = h("input", { type: "text", size: 30 });
  const readOnly = h("input", { type: "checkbox" });
  const rows = listed.tokens.map((t) => [
    h("code", {}, t.id), t.role, t.place, t.reach, t.writes ? "writes" : "read-only", t.label, t.created_at,
    t.revoked_at ? badge(`revoked ${t.revoked_at}`, "bad") : h("button", {
      type: "button", class: "danger",
      onclick: async (ev) => {
        const btn = ev.currentTarget;
        if (btn.dataset.armed !== "1") {
          btn.dataset.armed = "1";
          btn.textContent = `Confirm revoke ${t.id}`;
          return;
        }
        try {
          await api(`/v1/admin/tokens/${encodeURIComponent(t.id)}`, { method: "DELETE" });
          document.getElementById("main").replaceChildren(await render());
        } catch (err) {
          out.replaceChildren(errorBox(err));
        }
      },
    }, `Revoke ${t.id}`),
  ]);
  return h(
    "section",
    { "aria-labelledby": "tokens-title" },
    h("h2", { id: "tokens-title" }, "Tokens"),
    table("Tokens within your reach", ["id", "role", "place", "reach", "writes", "label", "created", ""], rows),
    h("form", {
      "aria-label": "Mint a token",
      onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          const body = { role: roleSel.value, place: placeIn.value.trim(), label: labelIn.value, read_only: readOnly.checked };
          if (reachIn.value.trim()) body.reach = reachIn.value.trim();
          const made = await api("/v1/admin/tokens", { method: "POST", body });
          out.replaceChildren(
            h("p", { role: "status" }, `Token ${made.info.id} (${made.info.role} at ${made.info.place}). It is shown this once: copy it now.`),
            h("pre", { tabindex: "0", "aria-label": "New token", "data-token": "new" }, made.token),
          );
        } catch (err) {
          out.replaceChildren(errorBox(err));
        }
      },
    },
    h("h3", {}, "Mint a token"),
    field("Role", roleSel), field("Place", placeIn), field("Reach", reachIn), field("Read only", readOnly), field("Label", labelIn),
    h("button", { type: "submit" }, "Mint")),
    out,
  );
}

// Webhooks: the list, creation (the signing secret shown once, with a copy button), deletion,
// and each endpoint's deliveries with their state, filterable and paged.

import { api } from "./api.js";
import { clearErrors, confirmDialog, copy, errorAlert, field, focusHeading, h, heading, loading, showErrors, toast, when } from "./dom.js";

const EVENTS = ["link.created", "link.clicked", "link.updated", "link.deleted"];

export function webhooksPage() {
  const list = h("div", { "aria-live": "polite" }, loading("Loading webhooks…"));
  const secretBox = h("div");
  const form = h("form", { class: "panel", novalidate: true },
    h("h2", {}, "Add an endpoint"),
    h("div", { class: "form-error", tabindex: "-1" }),
    field({ label: "Endpoint URL", name: "targetUrl", type: "url", required: true, placeholder: "https://example.com/hooks/shortlink" }),
    h("fieldset", {}, h("legend", {}, "Events"),
      h("input", { type: "hidden", name: "events", id: "events-anchor" }),
      h("div", { class: "row" }, EVENTS.map((e, i) => field({ label: e, name: `event-${e}`, type: "checkbox", value: e, checked: i < 2 }))),
      h("p", { class: "field-error", id: "events-anchor-error" })),
    h("button", { type: "submit", class: "primary" }, "Add endpoint"));

  async function load() {
    try {
      const hooks = await api("GET", "/webhooks");
      const items = Array.isArray(hooks) ? hooks : hooks.items;
      list.replaceChildren(items.length === 0
        ? h("div", { class: "empty panel" }, h("p", {}, "No endpoints yet. Add one below to receive signed events."))
        : hookTable(items, load));
    } catch (error) {
      list.replaceChildren(errorAlert(error));
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const events = EVENTS.filter((e) => form.elements[`event-${e}`].checked);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const hook = await api("POST", "/webhooks", { body: { targetUrl: form.elements.targetUrl.value.trim(), events } });
      form.reset();
      secretBox.replaceChildren(secretPanel(hook, () => {
        secretBox.replaceChildren();
        focusHeading(); // the button pressed went with the panel
      }));
      secretBox.querySelector("button").focus();
      load();
    } catch (error) {
      showErrors(form, error);
    } finally {
      button.disabled = false;
    }
  });

  load();
  return h("section", {}, heading("Webhooks"),
    h("p", { class: "muted" }, "Endpoints receive signed POST requests (Standard Webhooks) when links are created, clicked, changed or deleted."),
    secretBox, list, form);
}

/** The secret, once: it cannot be read again after this panel is dismissed. */
function secretPanel(hook, dismiss) {
  return h("section", { class: "panel", "aria-labelledby": "secret-title" },
    h("h2", { id: "secret-title" }, "Signing secret"),
    h("p", {}, `Copy the secret of ${hook.targetUrl} now: it is shown only this once. Receivers use it to verify the webhook-signature header.`),
    h("div", { class: "secret" },
      h("output", { "aria-label": "Signing secret", class: "code" }, hook.secret),
      h("button", { type: "button", onclick: () => copy(hook.secret, "Secret copied") }, "Copy secret"),
      h("button", { type: "button", onclick: dismiss }, "I have saved it")));
}

function hookTable(hooks, reload) {
  return h("div", { class: "table-wrap" }, h("table", { class: "cards" },
    h("caption", { class: "visually-hidden" }, "Webhook endpoints"),
    h("thead", {}, h("tr", {}, ["Endpoint", "Events", "State", "Created", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, hooks.map((hook) => h("tr", {},
      h("td", { "data-label": "Endpoint", class: "destination" }, hook.targetUrl),
      h("td", { "data-label": "Events" }, hook.events.map((e) => h("span", { class: "tag" }, e))),
      h("td", { "data-label": "State" }, hook.active === false ? `disabled ${when(hook.disabledAt)}`
        : hook.consecutiveFailures ? `active, ${hook.consecutiveFailures} failures in a row` : "active"),
      h("td", { "data-label": "Created" }, when(hook.createdAt)),
      h("td", { "data-label": "Actions" }, h("div", { class: "actions" },
        h("a", { class: "button small", href: `#/webhooks/${encodeURIComponent(hook.id)}`, "aria-label": `Deliveries to ${hook.targetUrl}` }, "Deliveries"),
        h("button", { type: "button", class: "small danger", "aria-label": `Delete ${hook.targetUrl}`, onclick: async () => {
          const sure = await confirmDialog({ title: "Delete this endpoint?", body: `${hook.targetUrl} will receive no more events.`, confirm: "Delete endpoint" });
          if (!sure) return;
          try {
            await api("DELETE", `/webhooks/${encodeURIComponent(hook.id)}`);
            toast("Endpoint deleted");
            reload();
            focusHeading(); // the row, and the button that had focus, are gone
          } catch (error) {
            toast(`Could not delete: ${error.message}`);
          }
        } }, "Delete"))))))));
}

export async function deliveriesPage(id) {
  let hook;
  try {
    hook = await api("GET", `/webhooks/${encodeURIComponent(id)}`);
  } catch (error) {
    return h("section", {}, heading("Deliveries"), errorAlert(error), h("a", { href: "#/webhooks" }, "Back to the webhooks"));
  }
  const filter = h("form", { class: "panel row", "aria-label": "Filter deliveries" },
    field({ label: "State", name: "state", control: "select", options: [["", "Any"], ["pending", "Pending"], ["delivered", "Delivered"], ["failed", "Failed"]] }),
    h("button", { type: "submit" }, "Apply"),
    h("button", { type: "button", class: "refresh" }, "Refresh"));
  const status = h("div", { "aria-live": "polite" });
  const body = h("tbody");
  const table = h("table", { class: "cards", hidden: true },
    h("caption", { class: "visually-hidden" }, "Deliveries, newest first"),
    h("thead", {}, h("tr", {}, ["Event", "Type", "State", "Attempts", "Last answer", "Created", "Updated"].map((t) => h("th", { scope: "col" }, t)))),
    body);
  const more = h("button", { type: "button", hidden: true }, "Load more");
  let cursor = null;
  let generation = 0; // answers to a superseded request (filter applied meanwhile) are dropped

  async function load(reset) {
    const mine = reset ? ++generation : generation;
    if (reset) { cursor = null; body.replaceChildren(); }
    // Disabled until the page is in: a second click would ask for the same cursor again.
    more.disabled = true;
    status.replaceChildren(loading("Loading deliveries…"));
    try {
      const state = filter.elements.state.value;
      const page = await api("GET", `/webhooks/${encodeURIComponent(hook.id)}/deliveries`, { query: { state, cursor } });
      if (mine !== generation) return;
      const items = Array.isArray(page) ? page : page.items;
      body.append(...items.filter((d) => !state || d.state === state).map(deliveryRow));
      cursor = Array.isArray(page) ? null : page.nextCursor;
      more.hidden = !cursor;
      table.hidden = body.childElementCount === 0;
      status.replaceChildren(body.childElementCount ? ""
        : h("div", { class: "empty panel" }, state ? `No deliveries with state ${state}.` : "No deliveries yet."));
    } catch (error) {
      if (mine !== generation) return;
      status.replaceChildren(errorAlert(error));
    } finally {
      if (mine === generation) more.disabled = false;
    }
  }
  filter.addEventListener("submit", (e) => { e.preventDefault(); load(true); });
  filter.querySelector(".refresh").addEventListener("click", () => load(true));
  more.addEventListener("click", () => load(false));
  load(true);
  return h("section", {}, heading("Deliveries"), h("p", { class: "muted destination" }, hook.targetUrl),
    h("p", {}, h("a", { href: "#/webhooks" }, "Back to the webhooks")),
    filter, status, h("div", { class: "table-wrap" }, table), more);
}

function deliveryRow(d) {
  const answer = d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : d.lastError ?? "—";
  const next = d.state === "pending" && d.nextAttemptAt ? ` (next try ${when(d.nextAttemptAt)})` : "";
  return h("tr", {},
    h("td", { "data-label": "Event", class: "code" }, d.eventId),
    h("td", { "data-label": "Type" }, d.type),
    h("td", { "data-label": "State", class: `state-${d.state}` }, d.state + next),
    h("td", { "data-label": "Attempts", class: "num" }, d.attempts),
    h("td", { "data-label": "Last answer" }, answer),
    h("td", { "data-label": "Created" }, when(d.createdAt)),
    h("td", { "data-label": "Updated" }, when(d.updatedAt)));
}

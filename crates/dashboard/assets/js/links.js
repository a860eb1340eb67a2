// The landing page: the workspace's totals and its links, with search, tag filter, the archived
// toggle, "Load more", copy, QR, delete.

import { api } from "./api.js";
import { confirmDialog, copy, count, errorAlert, field, focusHeading, h, heading, loading, toast, when } from "./dom.js";

const PAGE = 20;

export function linksPage() {
  const filters = h("form", { class: "panel row", role: "search", "aria-label": "Filter links" },
    field({ label: "Search", name: "search", type: "search", placeholder: "slug or destination", maxlength: 253 }),
    field({ label: "Tag", name: "tag", type: "text", placeholder: "any tag" }),
    field({ label: "Show archived links", name: "archived", type: "checkbox" }),
    h("button", { type: "submit" }, "Apply"));
  filters.firstChild.classList.add("grow");
  const stats = h("dl", { class: "stats", "aria-label": "Workspace totals" });
  const status = h("div", { "aria-live": "polite" });
  const body = h("tbody");
  const table = h("table", { class: "cards", hidden: true },
    h("caption", { class: "visually-hidden" }, "Links, newest first"),
    h("thead", {}, h("tr", {}, ["Short link", "Destination", "Tags", "Clicks", "Created", "Actions"]
      .map((t) => h("th", { scope: "col", class: t === "Clicks" ? "num" : undefined }, t)))),
    body);
  const more = h("button", { type: "button", hidden: true }, "Load more");

  let cursor = null;
  let query = {};
  let generation = 0; // answers to a superseded request (filters changed meanwhile) are dropped
  async function load(reset) {
    const mine = reset ? ++generation : generation;
    if (reset) { cursor = null; body.replaceChildren(); }
    more.disabled = true;
    status.replaceChildren(loading(reset ? "Loading links…" : "Loading more links…"));
    try {
      const page = await api("GET", "/links", { query: { limit: PAGE, cursor, ...query } });
      if (mine !== generation) return;
      body.append(...page.items.map((link) => row(link, reload, filterByTag)));
      cursor = page.nextCursor;
      table.hidden = body.childElementCount === 0;
      more.hidden = !cursor;
      status.replaceChildren(body.childElementCount === 0 ? empty(query) : "");
    } catch (error) {
      if (mine !== generation) return;
      table.hidden = body.childElementCount === 0;
      more.hidden = body.childElementCount === 0;
      // A server without link options refuses the parameters themselves as unknown.
      const unknownParameter = error.status === 400 && /unknown/i.test(error.message);
      status.replaceChildren(errorAlert(error,
        ...(unknownParameter ? ["Searching, tags and archived links need a server with link options."] : [])));
    } finally {
      more.disabled = false;
    }
  }

  /** After a deletion: the list from the start, and the totals again. */
  function reload() {
    load(true);
    totals(stats);
  }
  function filterByTag(tag) {
    filters.elements.tag.value = tag;
    filters.requestSubmit();
  }

  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const f = filters.elements;
    query = { search: f.search.value.trim(), tag: f.tag.value.trim(), archived: f.archived.checked ? "true" : "" };
    load(true);
  });
  more.addEventListener("click", () => load(false));
  load(true).then(() => totals(stats));

  return h("section", {},
    h("div", { class: "row page-head" }, heading("Links"), h("span", { class: "grow" }),
      h("a", { class: "button", href: "#/import" }, "Import CSV"),
      h("a", { class: "button primary", href: "#/links/new" }, "New link")),
    stats, filters, status, h("div", { class: "table-wrap" }, table), more);
}

function empty(query) {
  const filtered = query.search || query.tag;
  return h("div", { class: "empty panel" },
    h("p", {}, filtered ? "No link matches these filters." : "No links yet."),
    filtered ? null : h("p", {}, h("a", { href: "#/links/new" }, "Create your first link"), " or ", h("a", { href: "#/import" }, "import a CSV file"), "."));
}

function row(link, reload, filterByTag) {
  const code = encodeURIComponent(link.shortCode);
  const flags = [link.archived && "archived", link.passwordProtected && "password", link.expiresAt && `expires ${when(link.expiresAt)}`].filter(Boolean);
  return h("tr", {},
    h("td", { "data-label": "Short link", class: "short-link" }, h("a", { class: "code", href: link.shortUrl, rel: "noreferrer", target: "_blank" }, link.shortUrl),
      flags.length ? h("div", { class: "hint" }, flags.join(" · ")) : null),
    // A destination may be thousands of characters: a few lines of it, the whole on hover (and
    // to a screen reader, which reads the text, not the clipped box).
    h("td", { "data-label": "Destination", class: "destination" }, h("div", { class: "clamp", title: link.destination }, link.destination)),
    h("td", { "data-label": "Tags" }, (link.tags ?? []).map((t) =>
      h("button", { type: "button", class: "tag", "aria-label": `Show links tagged ${t}`, onclick: () => filterByTag(t) }, t))),
    h("td", { "data-label": "Clicks", class: "num" }, count(link.clicks)),
    h("td", { "data-label": "Created" }, when(link.createdAt)),
    h("td", { "data-label": "Actions" }, h("div", { class: "actions" },
      h("button", { type: "button", class: "small", "aria-label": `Copy ${link.shortUrl}`, onclick: () => copy(link.shortUrl, "Short URL copied") }, "Copy"),
      h("button", { type: "button", class: "small", "aria-label": `QR code of ${link.shortCode}`,
        onclick: () => openQr(link) }, "QR"),
      h("a", { class: "button small", href: `#/links/${code}/analytics`, "aria-label": `Analytics of ${link.shortCode}` }, "Analytics"),
      h("a", { class: "button small", href: `#/links/${code}/edit`, "aria-label": `Edit ${link.shortCode}` }, "Edit"),
      h("button", { type: "button", class: "small danger", "aria-label": `Delete ${link.shortCode}`,
        onclick: () => remove(link, reload) }, "Delete"))));
}

/** True while the QR module loads: on a first visit that takes a request, and a second click
 * meanwhile would open a second dialog. */
let qrLoading = false;
async function openQr(link) {
  if (qrLoading) return;
  qrLoading = true;
  try {
    (await import("./qr.js")).openQr(link);
  } catch (error) {
    toast(`The QR code dialog could not be loaded: ${error.message}`);
  } finally {
    qrLoading = false;
  }
}

async function remove(link, reload) {
  const sure = await confirmDialog({
    title: "Delete this link?",
    body: `${link.shortUrl} will stop redirecting at once, and its click counts go with it. This cannot be undone.`,
    confirm: "Delete link",
  });
  if (!sure) return;
  try {
    await api("DELETE", `/links/${encodeURIComponent(link.id)}`);
    toast(`Deleted ${link.shortCode}`);
    reload();
    focusHeading(); // the row, and the button that had focus, are gone
  } catch (error) {
    toast(`Could not delete: ${error.message}`);
  }
}

/** Links and clicks: counted from the list (pages of 100, up to 10,000 links, archived ones
 * included: their clicks are in the 30 days' figure too), and clicks in the last 30 days from
 * analytics when the server has it. */
async function totals(stats) {
  stats.replaceChildren();
  const stat = (label) => {
    const dd = h("dd", {}, "…");
    stats.append(h("div", { class: "stat" }, h("dt", {}, label), dd));
    return dd;
  };
  const links = stat("Links");
  const clicks = stat("Clicks, all time");
  const recent = stat("Clicks, last 30 days");
  api("GET", "/analytics", { query: { groupBy: "count" } })
    .then((data) => { recent.textContent = count(data.clicks); })
    .catch(() => { recent.textContent = "—"; recent.title = "Analytics is not available on this server"; });
  let n = 0, sum = 0, cursor = null, pages = 0;
  try {
    do {
      const page = await api("GET", "/links", { query: { limit: 100, cursor, archived: "true" } });
      n += page.items.length;
      sum += page.items.reduce((s, l) => s + (l.clicks ?? 0), 0);
      cursor = page.nextCursor;
    } while (cursor && ++pages < 100);
    links.textContent = `${count(n)}${cursor ? "+" : ""}`;
    clicks.textContent = `${count(sum)}${cursor ? "+" : ""}`;
  } catch {
    links.textContent = clicks.textContent = "—";
  }
}

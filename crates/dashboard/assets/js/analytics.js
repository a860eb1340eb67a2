// Analytics of the workspace or of one link: totals, a time series with interval and range
// pickers, breakdowns, and the CSV export (fetched with the key, saved through a blob URL).

import { api, apiBlob } from "./api.js";
import { alert, count, download, errorAlert, field, focusHeading, h, heading, loading } from "./dom.js";
import { breakdown, timeSeriesChart } from "./chart.js";

/** [groupBy, title, the filter its keys go to]. */
const BREAKDOWNS = [["countries", "Countries", "country"], ["cities", "Cities", "city"], ["devices", "Devices", "device"],
  ["browsers", "Browsers", "browser"], ["os", "Operating systems", "os"], ["referrers", "Referrers", "referrer"]];
const DAY = 86_400_000;

/** The links breakdown names link ids: each entry shown gets its link's short code and a way to
 * its analytics (a link deleted since keeps its id, without a way). */
function withShortCodes(entries) {
  return Promise.all(entries.map(async (entry) => {
    if (entry.key === null) return entry;
    try {
      const link = await api("GET", `/links/${encodeURIComponent(entry.key)}`);
      return { ...entry, label: link.shortCode, href: `#/links/${encodeURIComponent(link.shortCode)}/analytics` };
    } catch {
      return entry;
    }
  }));
}

export async function analyticsPage(code) {
  let link = null;
  if (code) {
    try {
      link = await api("GET", `/links/${encodeURIComponent(code)}`);
    } catch (error) {
      return h("section", {}, heading("Analytics"), errorAlert(error));
    }
  }
  // The workspace's page also ranks its links.
  const breakdowns = link ? BREAKDOWNS : [["links", "Links"], ...BREAKDOWNS];
  const timezone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const form = h("form", { class: "panel row", "aria-label": "Period" },
    field({ label: "Range", name: "range", control: "select", value: "30",
      options: [["1", "Last 24 hours"], ["7", "Last 7 days"], ["30", "Last 30 days"], ["90", "Last 90 days"], ["365", "Last 12 months"], ["custom", "Custom dates"]] }),
    field({ label: "From", name: "start", type: "date", disabled: true }),
    field({ label: "To (inclusive)", name: "end", type: "date", disabled: true }),
    field({ label: "Interval", name: "interval", control: "select", value: "day",
      options: [["hour", "Hour"], ["day", "Day"], ["week", "Week"], ["month", "Month"]] }),
    h("button", { type: "submit", class: "primary" }, "Show"),
    h("button", { type: "button", class: "export" }, "Export CSV"));
  const status = h("div", { "aria-live": "polite" });
  const content = h("div");
  const filters = new Map(); // filter parameter → value, from picking a breakdown's entry
  const chips = h("div", { class: "actions", role: "group", "aria-label": "Filters" });
  const showFilters = () => chips.replaceChildren(...[...filters].map(([name, value]) =>
    h("button", { type: "button", class: "tag", "data-filter": name, "aria-label": `Remove the filter ${name} ${value}`,
      onclick: () => unpick(name) }, `${name}: ${value} ✕`)));
  // The entry or chip that was pressed is gone once the page is drawn again: focus goes to the
  // chip that undoes the choice, or after a removal to the next chip (the heading when none is left).
  const pick = (name) => name && ((key) => {
    filters.set(name, key);
    showFilters();
    chips.querySelector(`[data-filter="${name}"]`).focus();
    load();
  });
  const unpick = (name) => {
    const index = [...filters.keys()].indexOf(name);
    filters.delete(name);
    showFilters();
    const next = chips.children[Math.min(index, chips.children.length - 1)];
    if (next) next.focus();
    else focusHeading();
    load();
  };

  const period = () => {
    const f = form.elements;
    if (f.range.value === "custom") {
      const end = f.end.value ? new Date(new Date(f.end.value).getTime() + DAY).toISOString().slice(0, 10) : undefined;
      return { start: f.start.value || undefined, end };
    }
    const now = Date.now();
    return { start: new Date(now - Number(f.range.value) * DAY).toISOString(), end: new Date(now + 60_000).toISOString() };
  };
  const base = () => ({ linkId: link?.id, timezone, ...period(), ...Object.fromEntries(filters) });
  // What the page shows, for the export: the form may hold a range not yet applied with "Show".
  let shown = null;

  async function load() {
    status.replaceChildren(loading("Loading analytics…"));
    const q = base();
    shown = q;
    const interval = form.elements.interval.value;
    try {
      const [total, series, ...groups] = await Promise.all([
        api("GET", "/analytics", { query: { ...q, groupBy: "count" } }),
        api("GET", "/analytics", { query: { ...q, groupBy: "timeseries", interval } }),
        ...breakdowns.map(([by]) => api("GET", "/analytics", { query: { ...q, groupBy: by, limit: 10 } }).then((entries) =>
          (by === "links" ? withShortCodes(entries) : entries))),
      ]);
      if (shown !== q) return; // a later load is on its way
      status.replaceChildren();
      content.replaceChildren(
        h("dl", { class: "stats" },
          h("div", { class: "stat" }, h("dt", {}, "Clicks"), h("dd", {}, count(total.clicks))),
          h("div", { class: "stat" }, h("dt", {}, "Unique visitors"), h("dd", {}, count(total.uniqueVisitors)))),
        h("section", { class: "panel" }, h("h2", {}, `Clicks per ${interval}`), timeSeriesChart(series, interval)),
        h("div", { class: "breakdowns" }, breakdowns.map(([, title, filter], i) => breakdown(title, groups[i], pick(filter)))));
    } catch (error) {
      if (shown !== q) return;
      content.replaceChildren();
      status.replaceChildren(errorAlert(error,
        ...(error.status === 404 && /route/i.test(error.message) ? ["This server does not offer analytics yet."] : [])));
    }
  }

  form.elements.range.addEventListener("change", () => {
    const custom = form.elements.range.value === "custom";
    form.elements.start.disabled = form.elements.end.disabled = !custom;
  });
  form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
  form.querySelector(".export").addEventListener("click", async () => {
    status.replaceChildren(loading("Preparing the export…"));
    try {
      const blob = await apiBlob("/analytics/export", { ...(shown ?? base()), format: "csv" }, "text/csv");
      download(blob, `clicks-${link?.shortCode ?? "workspace"}.csv`);
      status.replaceChildren(alert("ok", "The export was downloaded."));
    } catch (error) {
      status.replaceChildren(alert("error", `Export failed: ${error.message}`));
    }
  });
  load();

  return h("section", {}, heading(link ? `Analytics of ${link.shortCode}` : "Analytics of the workspace"),
    link ? h("p", { class: "muted destination" }, `${link.shortUrl} → ${link.destination}`) : null,
    form, chips, status, content);
}

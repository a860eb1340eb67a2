// Bulk import: a CSV file with a header (`destination,customSlug[,option…]`), sent 100 rows at
// a time through /links/bulk, with a progress bar and a result for every row. A row's error never
// stops the others, and failed rows can be retried or downloaded to fix.

import { api } from "./api.js";
import { alert, download, field, h, heading } from "./dom.js";
import { csvLine, parseCsv } from "./csv.js";

const BATCH = 100;
/** Columns a file may have, and how a cell becomes the API's value. */
const COLUMNS = {
  destination: String, customSlug: String, title: String, description: String, image: String,
  expiresAt: String, expiredUrl: String, password: String, ios: String, android: String,
  // A number when it is one; otherwise the text, for the API to refuse by name.
  maxClicks: integer, redirectType: integer,
  tags: (s) => s.split("|").map((t) => t.trim()).filter(Boolean),
  archived: boolean,
  error: null, // the explanation a download of failed rows adds; ignored on the way back in
};

function integer(s) {
  return /^-?\d+$/.test(s) ? Number(s) : s;
}

/** A cell that cannot become the API's value: its row fails with this, and is not sent. */
class CellProblem extends Error {
  constructor(column, message) { super(message); this.column = column; }
}

function boolean(s) {
  if (/^(true|yes|1)$/i.test(s)) return true;
  if (/^(false|no|0)$/i.test(s)) return false;
  // Read as "not archived", a typo would silently publish a link meant to be hidden.
  throw new CellProblem("archived", `archived must be true or false (or yes/no, 1/0), not "${s}".`);
}

export function importPage() {
  const form = h("form", { class: "panel", novalidate: true },
    h("div", { class: "form-error", tabindex: "-1" }),
    field({ label: "CSV file", name: "file", type: "file", accept: ".csv,text/csv", required: true,
      hint: ["First line: the column names. ", h("code", {}, "destination"), " is required; ", h("code", {}, "customSlug"),
        " and the link options (", h("code", {}, "tags"), " separated by |, ", h("code", {}, "expiresAt"), ", ",
        h("code", {}, "maxClicks"), ", ", h("code", {}, "password"), ", ", h("code", {}, "title"), ", …) are optional."] }),
    h("button", { type: "submit", class: "primary" }, "Import"));
  const progress = h("progress", { max: 1, value: 0, "aria-label": "Import progress", hidden: true });
  const summary = h("div", { "aria-live": "polite" });
  const results = h("div");
  let rows = []; // { line, body, problem?, result?: {link} | {error} }
  let header = [];
  const buttons = () => [form.querySelector("button"), ...summary.querySelectorAll("button")];

  async function send(pending) {
    for (const row of pending.filter((r) => r.problem)) row.result = { error: row.problem };
    const sendable = pending.filter((r) => !r.problem);
    progress.hidden = false;
    progress.max = pending.length;
    progress.value = pending.length - sendable.length;
    for (let start = 0; start < sendable.length; start += BATCH) {
      const batch = sendable.slice(start, start + BATCH);
      summary.replaceChildren(`Importing rows ${start + 1}–${start + batch.length} of ${sendable.length}…`);
      const answer = await sendBatch(batch.map((r) => r.body));
      batch.forEach((row, i) => { row.result = answer[i]; });
      progress.value += batch.length;
    }
    show();
  }

  /** One import at a time: a second click while one runs would send every row again. Called
   * before anything is awaited, so a double click cannot slip in between. */
  let busy = false;
  async function exclusive(work) {
    if (busy) return;
    busy = true;
    for (const b of buttons()) b.disabled = true;
    try { await work(); } finally {
      busy = false;
      for (const b of buttons()) b.disabled = false;
    }
  }

  function show() {
    const failed = rows.filter((r) => r.result?.error);
    const created = rows.filter((r) => r.result?.link).length;
    summary.replaceChildren(alert(failed.length ? "error" : "ok",
      `${created} created, ${failed.length} failed, of ${rows.length} rows.`),
      failed.length ? h("div", { class: "actions" },
        h("button", { type: "button", onclick: () => exclusive(() => send(failed)) }, "Retry the failed rows"),
        h("button", { type: "button", onclick: () => downloadFailed(header, failed) }, "Download the failed rows")) : "");
    results.replaceChildren(resultTable(rows));
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    exclusive(async () => {
      const box = form.querySelector(".form-error");
      box.replaceChildren();
      const file = form.elements.file.files[0];
      if (!file) return box.replaceChildren(alert("error", "Choose a CSV file first."));
      try {
        ({ header, rows } = readFile(await file.text()));
      } catch (problem) {
        return box.replaceChildren(alert("error", problem.message));
      }
      results.replaceChildren();
      await send(rows);
    });
  });

  return h("section", {}, heading("Import links from CSV"), form, progress, summary, results);
}

/** The file's rows as creation requests; throws on a file that cannot be read at all. */
function readFile(text) {
  const [first, ...data] = parseCsv(text);
  if (!first) throw new Error("The file is empty.");
  const header = first.cells.map((c) => c.trim());
  const unknown = header.filter((c) => !(c in COLUMNS));
  if (unknown.length) throw new Error(`Unknown column${unknown.length > 1 ? "s" : ""}: ${unknown.join(", ")}. Known: ${Object.keys(COLUMNS).join(", ")}.`);
  if (!header.includes("destination")) throw new Error("The first line must name the columns and include `destination`.");
  if (!data.length) throw new Error("The file has a header but no rows.");
  return {
    header,
    rows: data.map(({ line, cells }) => {
      const body = {};
      let problem;
      header.forEach((name, i) => {
        const cell = (cells[i] ?? "").trim();
        if (cell === "" || !COLUMNS[name]) return;
        try {
          body[name] = COLUMNS[name](cell);
        } catch (bad) {
          if (!(bad instanceof CellProblem)) throw bad;
          problem = { code: "VALIDATION_FAILED", message: bad.message, details: [{ field: bad.column, message: bad.message }] };
        }
      });
      return { line, cells, body, problem };
    }),
  };
}

/** One bulk request (the client waits out the rate limit); on a failure of the whole request,
 * every row of it gets that error, to retry later. */
async function sendBatch(bodies) {
  try {
    return await api("POST", "/links/bulk", { body: bodies });
  } catch (error) {
    return bodies.map(() => ({ error: { code: error.code, message: error.message, details: error.details } }));
  }
}

function resultTable(rows) {
  return h("div", { class: "table-wrap" }, h("table", { class: "cards" },
    h("caption", {}, "Result of every row"),
    h("thead", {}, h("tr", {}, ["Line", "Destination", "Result"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((row) => h("tr", {},
      h("td", { "data-label": "Line" }, row.line),
      h("td", { "data-label": "Destination", class: "destination" }, row.body.destination ?? ""),
      row.result?.link
        ? h("td", { "data-label": "Result", class: "state-created" }, "Created ", h("a", { href: row.result.link.shortUrl, class: "code" }, row.result.link.shortUrl))
        : h("td", { "data-label": "Result", class: "state-failed" }, explain(row.result?.error)))))));
}

/** The error in words: each field it names with what is wrong with it, or its message. */
function explain(error) {
  if (!error) return "Not sent";
  const details = (error.details ?? []).map((d) => `${d.field}: ${d.message}`);
  return details.length ? details.join(" — ") : error.message;
}

/** The failed rows as the file had them, with why each failed in an `error` column. A file
 * downloaded here comes back with that column: the new error takes its place, so the file has
 * one `error` column however often it goes round (the first, where it was; others dropped). */
function downloadFailed(header, failed) {
  const errorAt = header.includes("error") ? header.indexOf("error") : header.length;
  const line = (cell, error) => csvLine([...header, "error"].flatMap((name, i) =>
    (i === errorAt ? [error] : name === "error" ? [] : [cell(i)])));
  const text = line((i) => header[i], "error")
    + failed.map((r) => line((i) => r.cells[i] ?? "", explain(r.result.error))).join("");
  download(new Blob([text], { type: "text/csv" }), "failed-rows.csv");
}

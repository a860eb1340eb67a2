// Create and edit a link, with every option of the API. Only what is filled in (create) or
// changed (edit) is sent, and the API's errors appear beside the fields they name.

import { api } from "./api.js";
import { clearErrors, errorAlert, field, h, heading, showErrors, toast } from "./dom.js";

/** The page: a new link, or the one with this code. */
export async function linkFormPage(code) {
  let link = null;
  if (code) {
    try {
      link = await api("GET", `/links/${encodeURIComponent(code)}`);
    } catch (error) {
      return h("section", {}, heading("Edit link"), errorAlert(error), h("a", { href: "#/links" }, "Back to the links"));
    }
  }
  const v = (name) => link?.[name] ?? "";
  const form = h("form", { class: "panel", novalidate: true },
    h("div", { class: "form-error", tabindex: "-1" }),
    h("div", { class: "fields" },
      field({ label: "Destination URL", name: "destination", type: "url", required: true, wide: true, value: v("destination"),
        placeholder: "https://example.com/page", autocomplete: "url" }),
      field({ label: code ? "Short code" : "Custom short code (optional)", name: "customSlug", value: v("shortCode"),
        hint: code ? "Letters, digits, - and _; up to 64. A new code takes effect at once, and the old short URL stops working."
          : "Letters, digits, - and _; up to 64. Left empty, one is made for you.", autocomplete: "off" }),
      field({ label: "Tags (optional)", name: "tags", value: (link?.tags ?? []).join(", "), hint: "Up to 10, separated by commas." })),
    h("fieldset", {}, h("legend", {}, "Expiry"),
      h("div", { class: "fields" },
        field({ label: "Expires at", name: "expiresAt", type: "datetime-local", value: localInput(link?.expiresAt), hint: "In your time zone." }),
        field({ label: "Maximum clicks", name: "maxClicks", type: "number", min: 1, step: 1, value: v("maxClicks") }),
        field({ label: "After expiry, redirect to", name: "expiredUrl", type: "url", value: v("expiredUrl"), hint: "Empty: the link answers 410 Gone." }))),
    h("fieldset", {}, h("legend", {}, "Redirect"),
      h("div", { class: "fields" },
        field({ label: "Redirect type", name: "redirectType", control: "select", value: String(link?.redirectType ?? "302"),
          options: [["302", "302 Found (default)"], ["301", "301 Moved Permanently"], ["307", "307 Temporary Redirect"], ["308", "308 Permanent Redirect"]] }),
        field({ label: "Password", name: "password", type: "password", autocomplete: "new-password",
          hint: link?.passwordProtected ? "This link has a password. Type a new one to change it; leave empty to keep it." : "Visitors must enter it before the redirect." }),
        link?.passwordProtected ? field({ label: "Remove the password", name: "removePassword", type: "checkbox" }) : null,
        field({ label: "iOS destination", name: "ios", type: "url", value: v("ios") }),
        field({ label: "Android destination", name: "android", type: "url", value: v("android") }),
        field({ label: "Destinations by country", name: "geo", control: "textarea", wide: true,
          value: Object.entries(link?.geo ?? {}).map(([c, u]) => `${c} ${u}`).join("\n"),
          hint: "One per line: a two-letter country code, a space, the URL (GB https://example.co.uk/)." }))),
    h("fieldset", {}, h("legend", {}, "Link preview (for social networks)"),
      h("div", { class: "fields" },
        field({ label: "Title", name: "title", value: v("title") }),
        field({ label: "Image URL", name: "image", type: "url", value: v("image") }),
        field({ label: "Description", name: "description", control: "textarea", wide: true, value: v("description") }))),
    field({ label: "Archived (hidden from the list; still redirects)", name: "archived", type: "checkbox", checked: Boolean(link?.archived) }),
    h("div", { class: "actions" },
      h("button", { type: "submit", class: "primary" }, code ? "Save changes" : "Create link"),
      h("a", { class: "button", href: "#/links" }, "Cancel")));
  const initial = code ? values(form) : null;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    let body;
    try {
      checkInputs(form);
      const now = values(form);
      body = code ? changes(initial, now, link.tags ?? []) : creation(now);
    } catch (problem) {
      return showLocal(form, problem);
    }
    if (code && Object.keys(body).length === 0) return toast("Nothing changed");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const saved = code
        ? await api("PATCH", `/links/${encodeURIComponent(link.id)}`, { body })
        : await api("POST", "/links", { body });
      toast(code ? `Saved ${saved.shortCode}` : `Created ${saved.shortUrl}`);
      location.hash = "#/links";
    } catch (error) {
      showErrors(form, besideTheField(error));
    } finally {
      button.disabled = false;
    }
  });

  return h("section", {}, heading(code ? `Edit ${link.shortCode}` : "New link"),
    code ? h("p", { class: "muted" }, link.shortUrl) : null, form);
}

/** The form's values in the API's shapes ("" for empty). */
function values(form) {
  const f = form.elements;
  const text = (name) => f[name].value.trim();
  return {
    destination: text("destination"),
    customSlug: text("customSlug"),
    tags: text("tags"),
    expiresAt: f.expiresAt.value ? new Date(f.expiresAt.value).toISOString() : "",
    maxClicks: text("maxClicks"),
    expiredUrl: text("expiredUrl"),
    redirectType: f.redirectType.value,
    password: f.password.value,
    removePassword: Boolean(f.removePassword?.checked),
    ios: text("ios"),
    android: text("android"),
    geo: text("geo"),
    title: text("title"),
    description: text("description"),
    image: text("image"),
    archived: f.archived.checked,
  };
}

/** A problem found before sending: [field, message]. */
class LocalProblem extends Error {
  constructor(fieldName, message) { super(message); this.field = fieldName; }
}

/** What the browser could not read: a date-time typed in part has the value "", which would
 * otherwise be taken for "no expiry". */
function checkInputs(form) {
  if (form.elements.expiresAt.validity.badInput) {
    throw new LocalProblem("expiresAt", "Enter both a date and a time, or clear the field for no expiry.");
  }
}

/** The API names no field in a 409 SLUG_CONFLICT, but it is the short code's: shown beside it. */
function besideTheField(error) {
  if (error.code !== "SLUG_CONFLICT" || error.details?.length) return error;
  return { message: "Please correct the field below.", details: [{ field: "customSlug", message: error.message }] };
}

/** The tags in the field's text, separated by commas. The API allows a comma in a tag: one the
 * link already has (`existing`) is kept whole where the text still holds it, so that saving the
 * form does not split it. */
function tagsOf(text, existing) {
  const whole = existing.filter((t) => t.includes(","));
  const tags = [];
  let rest = text.trimStart();
  while (rest) {
    const known = whole.find((t) => rest.startsWith(t) && /^\s*(,|$)/.test(rest.slice(t.length)));
    const comma = rest.indexOf(",");
    const end = known ? known.length : comma === -1 ? rest.length : comma;
    const tag = rest.slice(0, end).trim();
    if (tag) tags.push(tag);
    rest = rest.slice(end).replace(/^\s*,/, "").trimStart();
  }
  return tags;
}

function convert(name, value, existingTags = []) {
  switch (name) {
    case "tags":
      return tagsOf(value, existingTags);
    case "maxClicks": {
      if (value === "") return null;
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1) throw new LocalProblem("maxClicks", "Maximum clicks must be a whole number of at least 1.");
      return n;
    }
    case "redirectType":
      return Number(value);
    case "geo": {
      if (!value) return null;
      const geo = {};
      for (const [i, line] of value.split("\n").entries()) {
        if (!line.trim()) continue;
        const [country, url, extra] = line.trim().split(/\s+/);
        if (!url || extra || !/^[A-Za-z]{2}$/.test(country)) {
          throw new LocalProblem("geo", `Line ${i + 1}: write a two-letter country code, a space and a URL.`);
        }
        geo[country.toUpperCase()] = url;
      }
      return geo;
    }
    default:
      return value === "" ? null : value;
  }
}

const OPTIONS = ["tags", "expiresAt", "maxClicks", "expiredUrl", "redirectType", "password", "ios", "android", "geo", "title", "description", "image"];

/** A creation request: the destination, and each option that was set. */
function creation(now) {
  const body = { destination: now.destination };
  if (now.customSlug) body.customSlug = now.customSlug;
  for (const name of OPTIONS) {
    const value = convert(name, now[name]);
    const unset = value === null || (Array.isArray(value) && value.length === 0) || (name === "redirectType" && value === 302);
    if (!unset) body[name] = value;
  }
  if (now.archived) body.archived = true;
  return body;
}

/** A PATCH: only what changed (null clears an option); `tags` the link's tags. */
function changes(before, now, tags) {
  const body = {};
  if (now.destination !== before.destination) body.destination = now.destination;
  if (now.customSlug !== before.customSlug) body.customSlug = now.customSlug;
  for (const name of OPTIONS) {
    if (name === "password") continue;
    if (now[name] !== before[name]) body[name] = convert(name, now[name], tags);
  }
  if (now.password) body.password = now.password;
  else if (now.removePassword) body.password = null;
  if (now.archived !== before.archived) body.archived = now.archived;
  return body;
}

function showLocal(form, problem) {
  if (!(problem instanceof LocalProblem)) throw problem;
  showErrors(form, { message: "Please correct the field below.", details: [{ field: problem.field, message: problem.message }] });
}

/** An RFC 3339 instant as a datetime-local value in the reader's zone. */
function localInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}


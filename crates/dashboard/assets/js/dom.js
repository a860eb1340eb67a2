// Building the page. Every piece of data goes in as text (textContent or an attribute), never as
// markup, so nothing the API returns can become code.

/** An element: `h("a", {href, class: "x", onclick}, "text", child…)`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : String(c))));
  return el;
}

/** An SVG element, for the chart. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  el.append(...children.flat().filter((c) => c !== null && c !== undefined));
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "text") el.textContent = value;
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
}

let nextId = 0;
/** A unique id for label/control pairs. */
const uid = (prefix) => `${prefix}-${++nextId}`;

/**
 * A labelled control with a place for its error: `field({label, name, …})`. `control` is
 * "input" (default), "select" (with `options`: [[value, text]]), or "textarea".
 */
export function field({ label, name, control = "input", hint, options = [], wide = false, ...attrs }) {
  const id = uid(name);
  const errorId = `${id}-error`;
  const hintId = hint ? `${id}-hint` : undefined;
  const described = [hintId, errorId].filter(Boolean).join(" ");
  let input;
  if (control === "select") {
    const { value: chosen, ...rest } = attrs;
    input = h("select", { id, name, "aria-describedby": described, ...rest },
      options.map(([value, text]) => h("option", { value, selected: String(chosen ?? "") === value }, text)));
  } else if (control === "textarea") {
    const { value, ...rest } = attrs;
    input = h("textarea", { id, name, "aria-describedby": described, ...rest });
    input.value = value ?? "";
  } else {
    const { value, checked, ...rest } = attrs;
    input = h("input", { id, name, "aria-describedby": described, ...rest });
    if (value !== undefined && value !== null) input.value = value;
    if (checked) input.checked = input.defaultChecked = true;
  }
  const isCheck = attrs.type === "checkbox";
  const wrapper = h("div", { class: `field${wide ? " wide" : ""}${isCheck ? " check" : ""}` },
    isCheck ? h("label", { for: id }, input, label) : [h("label", { for: id }, label), input],
    hint ? h("p", { class: "hint", id: hintId }, hint) : null,
    h("p", { class: "field-error", id: errorId }));
  return wrapper;
}

/** Clears a form's inline errors. */
export function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  form.querySelector(".form-error")?.replaceChildren();
}

/**
 * Shows an API error on a form: each of `details` beside the control named by its field (the
 * part before any `.` or `[`), the rest, and the message, at the top. Focuses the first bad field.
 */
export function showErrors(form, error) {
  clearErrors(form);
  const general = [];
  let first = null;
  for (const detail of error.details ?? []) {
    const name = String(detail.field ?? "").split(/[.[]/)[0];
    const input = name && form.elements.namedItem(name);
    const slot = input instanceof Element && document.getElementById(`${input.id}-error`);
    if (slot) {
      slot.textContent = slot.textContent ? `${slot.textContent} ${detail.message}` : detail.message;
      input.setAttribute("aria-invalid", "true");
      // A group's error is anchored on a hidden input (the webhook's events), which cannot take
      // focus: the group's first control does.
      first ??= input.type === "hidden" ? input.closest("fieldset")?.querySelector("input:not([type=hidden])") ?? input : input;
    } else {
      general.push(`${detail.field}: ${detail.message}`);
    }
  }
  const box = form.querySelector(".form-error");
  box?.replaceChildren(alert("error", error.message, ...general));
  if (first) first.focus();
  else box?.focus();
}

/** A message box: kind is "error", "ok" or "info". */
export function alert(kind, ...text) {
  return h("div", { class: `alert ${kind}`, role: kind === "error" ? "alert" : "status" },
    text.flatMap((t, i) => (i ? [h("br"), t] : [t])));
}

/** An API error in words: its message, each of its details, then any `more` lines. */
export function errorAlert(error, ...more) {
  const details = (error.details ?? []).filter((d) => d.message !== error.message).map((d) => `${d.field}: ${d.message}`);
  return alert("error", error.message, ...details, ...more);
}

/** The loading state. */
export const loading = (what = "Loading…") => h("p", { class: "loading", role: "status" }, what);

/** A short message in the status area at the bottom of the screen. */
export function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 2500);
}

/** Copies text, and says so. */
export async function copy(text, what = "Copied") {
  try {
    await navigator.clipboard.writeText(text);
    toast(`${what} to the clipboard`);
  } catch {
    toast("Copying was refused by the browser; select the text and copy it by hand");
  }
}

/** Saves a Blob as a file through a temporary object URL. */
export function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A page heading that takes focus after navigation, so screen readers announce the page. */
export const heading = (text) => h("h1", { tabindex: "-1" }, text);

/** Moves focus to the page's heading (or the page, without one): after an action removed the
 * control that had it, focus would otherwise fall back to the document's start. */
export function focusHeading() {
  const main = document.getElementById("main");
  (main.querySelector("h1") ?? main).focus();
}

/** A date as the reader writes it. */
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

/** A number with the reader's grouping. */
export const count = (n) => (typeof n === "number" ? n.toLocaleString() : "—");

/**
 * A confirmation dialog; resolves true when confirmed. Escape or Cancel resolves false and
 * returns focus where it was.
 */
export function confirmDialog({ title, body, confirm, danger = true }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const dialog = h("dialog", { "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, body),
      h("div", { class: "actions" },
        h("button", { type: "button", autofocus: true, onclick: () => dialog.close("cancel") }, "Cancel"),
        h("button", { type: "button", class: danger ? "danger primary" : "primary", onclick: () => dialog.close("confirm") }, confirm)));
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener?.focus?.();
      resolve(dialog.returnValue === "confirm");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

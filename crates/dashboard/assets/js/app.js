// The dashboard's entry: sign-in, and a hash router (#/links, #/links/new, #/links/CODE/edit,
// #/links/CODE/analytics, #/analytics, #/import, #/webhooks, #/webhooks/ID) that renders one page
// into <main>.

import { api, session, whenUnauthorized } from "./api.js";
import { alert, clearErrors, field, focusHeading, h, heading, loading, showErrors } from "./dom.js";
import { linksPage } from "./links.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");

/** [pattern, loader]: pages other than the landing one load on first visit. */
const routes = [
  [/^#\/links\/new$/, async () => (await import("./link-form.js")).linkFormPage()],
  [/^#\/links\/([^/]+)\/edit$/, async (code) => (await import("./link-form.js")).linkFormPage(code)],
  [/^#\/links\/([^/]+)\/analytics$/, async (code) => (await import("./analytics.js")).analyticsPage(code)],
  [/^#\/analytics$/, async () => (await import("./analytics.js")).analyticsPage()],
  [/^#\/import$/, async () => (await import("./import.js")).importPage()],
  [/^#\/webhooks$/, async () => (await import("./webhooks.js")).webhooksPage()],
  [/^#\/webhooks\/([^/]+)$/, async (id) => (await import("./webhooks.js")).deliveriesPage(id)],
  [/^#\/links$/, linksPage],
];

let signInNotice = null;
/** While a key is being tried, a 401 is the sign-in form's to explain. */
let signingIn = false;

/** Counts navigations: a page that finishes loading after a later navigation is dropped, or it
 * would replace the page the person went on to. */
let navigations = 0;

async function render() {
  const navigation = ++navigations;
  if (!session.key()) return renderSignIn();
  nav.hidden = false;
  const hash = location.hash || "#/links";
  for (const a of nav.querySelectorAll("a")) {
    const current = hash === a.hash || hash.startsWith(`${a.hash}/`);
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const route = routes.find(([pattern]) => pattern.test(hash));
  let page;
  try {
    const parts = route && decodedParts(hash.match(route[0]));
    page = parts ? await route[1](...parts) : notFound();
  } catch (error) {
    // A page's module is fetched on its first visit: with the server gone, that fails before
    // the page can say anything itself. Anything else is a fault of the page: it goes to the
    // console too.
    const unreachable = error instanceof TypeError && /import|fetch/i.test(error.message);
    if (!unreachable) console.error(error);
    page = notLoaded(unreachable);
  }
  if (navigation !== navigations) return;
  main.replaceChildren(page);
  const title = page.querySelector("h1");
  document.title = title ? `${title.textContent} · shortlink` : "shortlink";
  focusHeading();
}

/** A route's parts, decoded; `null` for a path no link or page can have (`%E0%A4%A` is no
 * character). */
function decodedParts(match) {
  try {
    return match.slice(1).map(decodeURIComponent);
  } catch {
    return null;
  }
}

function notFound() {
  return h("section", {}, heading("Page not found"),
    h("p", {}, "There is no such page. ", h("a", { href: "#/links" }, "Go to your links"), "."));
}

function notLoaded(unreachable) {
  return h("section", {}, heading("This page could not be loaded"),
    alert("error", unreachable
      ? "The server could not be reached, so this page's code did not arrive. Check your connection and that the server is running, then reload."
      : "Something went wrong while preparing this page. Reloading may help."),
    h("p", {}, h("button", { type: "button", onclick: () => location.reload() }, "Reload")));
}

function renderSignIn() {
  nav.hidden = true;
  document.title = "Sign in · shortlink";
  const form = h("form", { class: "panel", novalidate: true },
    h("div", { class: "form-error", tabindex: "-1" }, signInNotice),
    field({ label: "API key", name: "key", type: "password", autocomplete: "off", required: true,
      hint: ["The key from the first-run banner, or from ", h("code", {}, "shortlink key create --workspace NAME"),
        ". It stays in this tab only and is forgotten when you close it."] }),
    h("button", { type: "submit", class: "primary" }, "Sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = form.elements.key.value.trim();
    if (!key) return showErrors(form, { message: "Enter your API key.", details: [{ field: "key", message: "An API key is required." }] });
    session.signIn(key);
    signingIn = true;
    // A previous refusal stays no longer than it is true, and the button cannot send the key
    // again while it is tried (which may take a while: a rate-limited address waits its turn).
    clearErrors(form);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    form.querySelector(".form-error").replaceChildren(loading("Checking the key…"));
    try {
      await api("GET", "/links", { query: { limit: 1 } });
      signInNotice = null;
      if (!location.hash || location.hash === "#/signin") location.hash = "#/links";
      else render();
    } catch (error) {
      session.signOut();
      showErrors(form, error.status === 401
        ? { message: "This key was not accepted.", details: [{ field: "key", message: "Unknown or revoked key." }] }
        : error);
    } finally {
      signingIn = false;
      button.disabled = false;
    }
  });
  main.replaceChildren(h("section", { class: "signin" }, heading("Sign in"), form));
  form.elements.key.focus();
}

whenUnauthorized(() => {
  if (signingIn) return;
  session.signOut();
  signInNotice = alert("error", "Your key is no longer accepted; sign in again.");
  render();
});

document.getElementById("sign-out").addEventListener("click", () => {
  session.signOut();
  signInNotice = alert("info", "You are signed out.");
  render();
});

// "Skip to content" must not go through the router: `#main` is no route, and changing the hash
// would render "Page not found" (or a fresh, empty sign-in form).
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  focusHeading();
});

addEventListener("hashchange", render);
render();

// The QR dialog: a preview that follows the chosen format, size, colours, margin and error
// correction, and a download of exactly what is shown.

import { apiBlob } from "./api.js";
import { download, errorAlert, field, h } from "./dom.js";

/** Opens the dialog for a link. */
export function openQr(link) {
  const opener = document.activeElement;
  const form = h("form", { class: "fields", novalidate: true },
    field({ label: "Format", name: "format", control: "select", options: [["svg", "SVG"], ["png", "PNG"]] }),
    field({ label: "Size (pixels)", name: "size", type: "number", min: 64, max: 4096, step: 1, value: 512 }),
    field({ label: "Foreground", name: "fg", type: "color", value: "#000000" }),
    field({ label: "Background", name: "bg", type: "color", value: "#ffffff" }),
    field({ label: "Margin (modules)", name: "margin", type: "number", min: 0, max: 16, value: 4 }),
    field({ label: "Error correction", name: "level", control: "select", value: "M",
      options: [["L", "L (7%)"], ["M", "M (15%)"], ["Q", "Q (25%)"], ["H", "H (30%)"]] }));
  const preview = h("div", { class: "qr-preview", "aria-live": "polite" });
  const downloadButton = h("button", { type: "button", class: "primary", disabled: true }, "Download");
  const dialog = h("dialog", { "aria-labelledby": "qr-title" },
    h("h2", { id: "qr-title" }, `QR code of ${link.shortUrl}`),
    form, preview,
    h("div", { class: "actions" }, downloadButton,
      h("button", { type: "button", onclick: () => dialog.close() }, "Close")));

  let current = null; // { blob, url, name }
  let timer;
  let requests = 0; // an answer to any but the latest request is stale: the form changed since
  async function refresh() {
    const f = form.elements;
    const query = { shortCode: link.id, format: f.format.value, size: f.size.value, fg: f.fg.value, bg: f.bg.value, margin: f.margin.value, level: f.level.value };
    const mine = ++requests;
    downloadButton.disabled = true;
    try {
      const blob = await apiBlob("/qr", query, query.format === "png" ? "image/png" : "image/svg+xml");
      if (mine !== requests) return;
      if (current) URL.revokeObjectURL(current.url);
      current = { blob, url: URL.createObjectURL(blob), name: `${link.shortCode}-qr.${query.format}` };
      preview.replaceChildren(h("img", { src: current.url, alt: `QR code that opens ${link.shortUrl}`, width: 320, height: 320 }));
      downloadButton.disabled = false;
    } catch (error) {
      if (mine !== requests) return;
      if (current) URL.revokeObjectURL(current.url);
      current = null;
      preview.replaceChildren(errorAlert(error));
    }
  }
  form.addEventListener("input", () => {
    downloadButton.disabled = true; // until the preview shows the new choice
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  });
  form.addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  downloadButton.addEventListener("click", () => current && download(current.blob, current.name));
  dialog.addEventListener("close", () => {
    requests++; // an answer still on its way finds the dialog gone
    clearTimeout(timer);
    if (current) URL.revokeObjectURL(current.url);
    dialog.remove();
    opener?.focus?.();
  });
  document.body.append(dialog);
  dialog.showModal();
  refresh();
}

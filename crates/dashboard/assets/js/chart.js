// A small time-series chart in SVG: an area and a line of clicks per bucket, with the axes
// labelled. Described in words for screen readers, with the numbers in a table beside it.

import { h, svg } from "./dom.js";

const LEFT = 44, RIGHT = 12, TOP = 12, BOTTOM = 28;

/** `points`: [{start, clicks, uniqueVisitors}], oldest first. */
export function timeSeriesChart(points, interval) {
  const label = (iso) => {
    const d = new Date(iso);
    return interval === "hour" ? d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit" })
      : interval === "month" ? d.toLocaleDateString([], { year: "numeric", month: "short" })
      : d.toLocaleDateString([], { month: "short", day: "numeric" });
  };
  const total = points.reduce((s, p) => s + p.clicks, 0);
  const busiest = points.reduce((b, p) => (p.clicks > (b?.clicks ?? -1) ? p : b), null);
  const description = points.length
    ? `${total} clicks from ${label(points[0].start)} to ${label(points.at(-1).start)}; the busiest was ${label(busiest.start)} with ${busiest.clicks}.`
    : "No data.";
  const table = h("details", {}, h("summary", {}, "Show the numbers"),
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Period"), h("th", { scope: "col", class: "num" }, "Clicks"), h("th", { scope: "col", class: "num" }, "Unique visitors"))),
      h("tbody", {}, points.map((p) => h("tr", {}, h("td", {}, label(p.start)), h("td", { class: "num" }, p.clicks), h("td", { class: "num" }, p.uniqueVisitors)))))));
  const box = h("div", { class: "chart" }, table);

  // Drawn at the width it is shown at, one unit a pixel, so the labels are the size the style
  // sheet gives them: one drawing scaled to every width made them 5 px tall on a phone.
  let plot = null;
  const draw = (width) => {
    const next = drawing(points, interval, label, description, width);
    if (plot) plot.replaceWith(next);
    else box.prepend(next);
    plot = next;
  };
  draw(800);
  let frame = 0;
  new ResizeObserver(([entry]) => {
    const width = Math.round(entry.contentRect.width);
    // Redrawn in the next frame, not in the observer's callback: the new drawing's height is
    // itself a resize, which the browser would report as a loop.
    if (width > 0 && width !== Number(plot.dataset.width) && !frame) {
      frame = requestAnimationFrame(() => { frame = 0; draw(Math.round(box.clientWidth) || width); });
    }
  }).observe(box);
  return box;
}

/** The SVG itself, `width` units wide. */
function drawing(points, interval, label, description, width) {
  const W = Math.max(280, width);
  const H = Math.round(Math.min(300, Math.max(180, W * 0.3)));
  const max = Math.max(1, ...points.map((p) => p.clicks));
  const top = niceCeiling(max);
  const x = (i) => LEFT + (points.length < 2 ? (W - LEFT - RIGHT) / 2 : (i * (W - LEFT - RIGHT)) / (points.length - 1));
  const y = (v) => TOP + (H - TOP - BOTTOM) * (1 - v / top);
  const line = points.map((p, i) => `${x(i).toFixed(1)},${y(p.clicks).toFixed(1)}`).join(" ");
  const ticks = [0, top / 2, top];
  // As many labels on the time axis as fit side by side.
  const room = Math.max(2, Math.floor((W - LEFT - RIGHT) / (interval === "hour" ? 110 : 72)));
  const every = Math.max(1, Math.ceil(points.length / room));
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, "data-width": width, role: "img", "aria-label": `Clicks per ${interval}: ${description}` },
    ticks.flatMap((t) => [
      svg("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: y(t), y2: y(t) }),
      svg("text", { class: "tick", x: LEFT - 6, y: y(t) + 4, "text-anchor": "end" }, String(t)),
    ]),
    points.length ? svg("polygon", { class: "area", points: `${x(0)},${y(0)} ${line} ${x(points.length - 1)},${y(0)}` }) : null,
    points.length ? svg("polyline", { class: "line", points: line }) : null,
    points.length <= 60 ? points.map((p, i) => svg("circle", { class: "dot", cx: x(i), cy: y(p.clicks), r: 3 },
      svg("title", {}, `${label(p.start)}: ${p.clicks} clicks, ${p.uniqueVisitors} unique visitors`))) : null,
    points.map((p, i) => (i % every === 0
      ? svg("text", { x: x(i), y: H - 8, "text-anchor": anchor(i, points.length) }, label(p.start)) : null)));
}

/** The ends' labels are kept inside the drawing. */
function anchor(i, n) {
  if (n > 1 && i === 0) return "start";
  if (n > 1 && i === n - 1) return "end";
  return "middle";
}

/** 1, 2 or 5 times a power of ten, at least `n`. */
function niceCeiling(n) {
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= n);
}

/** A ranked list with a bar for each entry's share. An entry shows its `label` (else its key);
 * one with an `href` links there; otherwise, with `pick`, each known entry is a button that calls
 * it with the entry's key (to filter by it). */
export function breakdown(title, entries, pick) {
  const max = Math.max(1, ...entries.map((e) => e.clicks));
  return h("section", { class: "panel breakdown", "aria-label": title }, h("h2", {}, title),
    entries.length === 0 ? h("p", { class: "muted" }, "No clicks in this period.")
      : h("ol", {}, entries.map((e) => {
        const bar = h("span");
        bar.style.width = `${(100 * e.clicks) / max}%`;
        const text = e.label ?? e.key ?? "Unknown";
        const name = e.href ? h("a", { href: e.href }, text)
          : pick && e.key !== null
            ? h("button", { type: "button", class: "link-button", "aria-label": `Only ${text} (${title})`, onclick: () => pick(e.key) }, text)
            : h("span", {}, text);
        return h("li", {}, name, h("span", { class: "num" }, `${e.clicks.toLocaleString()} ${e.clicks === 1 ? "click" : "clicks"}`),
          h("div", { class: "bar", "aria-hidden": "true" }, bar));
      })));
}

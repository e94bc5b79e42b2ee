// Building the page: every piece of text goes in through textContent, never as HTML, so
// whatever a bullet, a file name or a mail subject holds is shown as text and runs nothing.

/** Whether the screen is mostly touched (a phone, a tablet): texts then speak of taps, not keys. */
export const TOUCH = window.matchMedia("(hover: none) and (pointer: coarse)").matches;

/** The modifier key shortcuts name: ⌘ on Apple devices, Ctrl elsewhere. */
export const MOD = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent) ? "⌘" : "Ctrl";

/** An element: h("a", {href: "/x", class: "row"}, "text", child, …). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "href" && !isSafeHref(String(value))) {
      continue; // a javascript: or data: link stays inert
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Same-origin paths, http(s) and mailto links only. */
export function isSafeHref(href) {
  if (href.startsWith("/") || href.startsWith("#")) return !href.startsWith("//");
  try {
    return ["http:", "https:", "mailto:"].includes(new URL(href).protocol);
  } catch {
    return false;
  }
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** Text with [start, end) character ranges wrapped in <mark>. */
export function highlighted(text, ranges = []) {
  const out = [];
  let at = 0;
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  for (const [start, end] of sorted) {
    if (start < at || end <= start) continue;
    out.push(text.slice(at, start), h("mark", {}, text.slice(start, end)));
    at = end;
  }
  out.push(text.slice(at));
  return out.filter((part) => part !== "");
}

export function formatDate(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return isNaN(date) ? "" : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

let toastTimer = null;
/** A short message in the corner; errors stay until the next message. */
export function toast(message, { error = false } = {}) {
  const el = document.getElementById("toast");
  el.textContent = message;
  el.classList.toggle("toast-error", error);
  el.classList.add("toast-shown");
  clearTimeout(toastTimer);
  if (!error) toastTimer = setTimeout(() => el.classList.remove("toast-shown"), 3000);
}

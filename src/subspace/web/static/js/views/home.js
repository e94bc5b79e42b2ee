// The start page: what this workspace holds, newest pages first.

import { get, query } from "../api.js";
import { clear, formatDate, h } from "../dom.js";
import { state } from "../state.js";

export async function render(container, _params, { signal }) {
  const pages = await get(`/api/pages${query({ kb_id: state.kbId })}`, { signal });
  document.title = "Subspace";
  const list = h("ul", { class: "card-list" }, pages.map((page) =>
    h("li", {}, h("a", { href: `/p/${page.id}`, "data-link": true }, page.title || "Untitled"),
      h("span", { class: "muted" }, ` · ${formatDate(page.updated_at)}`))));
  clear(container).append(
    h("h1", {}, "Start"),
    h("p", { class: "lead" }, "Search everything with ", h("kbd", {}, "Ctrl K"), " (", h("kbd", {}, "⌘K"),
      " on a Mac), or open a page."),
    pages.length ? list : h("p", { class: "muted" }, "No pages yet: make one with New page."),
  );
}

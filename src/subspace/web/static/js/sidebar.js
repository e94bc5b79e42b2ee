// The sidebar: knowledge bases, the pages of the one in use (with a filter), and New page.
// Below 700 px it is a drawer behind the menu button.

import { get, post, query } from "./api.js";
import { promptDialog } from "./dialog.js";
import { clear, h, toast } from "./dom.js";
import { BASE_VIEWS, navigate } from "./router.js";
import { on, state } from "./state.js";

let pages = [];
let loading = 0; // the latest request for the list; an older answer arriving later is dropped

export async function installSidebar() {
  document.getElementById("kb-select").addEventListener("change", (event) => switchTo(event.target.value));
  installDrawer();
  document.getElementById("new-kb").addEventListener("click", createKnowledgeBase);
  document.getElementById("new-page").addEventListener("click", async () => {
    const { createPage } = await import("./views/home.js");
    createPage();
  });
  document.getElementById("page-filter").addEventListener("input", drawPages);
  document.getElementById("show-hidden-pages").addEventListener("change", () => loadPages());
  on("kb-changed", () => {
    document.getElementById("kb-select").value = state.kbId;
    loadPages();
  });
  on("pages-changed", () => loadPages());
  document.addEventListener("view-rendered", markCurrent);
  await loadKnowledgeBases();
  await loadPages();
}

export async function loadKnowledgeBases() {
  state.knowledgeBases = await get("/api/knowledge-bases");
  const select = clear(document.getElementById("kb-select"));
  for (const kb of state.knowledgeBases) {
    select.append(h("option", { value: kb.id, selected: kb.id === state.kbId }, kb.name));
  }
}

async function loadPages() {
  const hidden = document.getElementById("show-hidden-pages").checked;
  const request = ++loading;
  const listed = await get(`/api/pages${query({ kb_id: state.kbId, include_hidden: hidden || null })}`);
  if (request !== loading) return;
  pages = listed;
  drawPages();
}

function drawPages() {
  const filter = document.getElementById("page-filter").value.trim().toLowerCase();
  const list = clear(document.getElementById("page-list"));
  const shown = pages.filter((p) => !filter || (p.title || "").toLowerCase().includes(filter));
  for (const page of shown) {
    const hiddenAs = page.deleted_at ? "deleted" : page.archived_at ? "archived" : null;
    list.append(h("li", {}, h("a", { href: `/p/${page.id}`, "data-link": true, dataset: { pageId: page.id } },
      page.title || "Untitled", hiddenAs && h("span", { class: "page-state" }, hiddenAs))));
  }
  if (!shown.length) list.append(h("li", { class: "muted" }, filter ? "No page matches." : "No pages yet."));
  markCurrent();
}

function markCurrent() {
  for (const link of document.querySelectorAll("#sidebar a[data-link]")) {
    const here = link.getAttribute("href") === window.location.pathname;
    link.toggleAttribute("aria-current", here);
  }
}

/**
 * Show base `kbId`: a view of a base's content (start, files, mail) stays and shows the other
 * base; a page, file or message belongs to its base, so the start view of the new one opens.
 */
function switchTo(kbId) {
  const path = window.location.pathname;
  const stays = BASE_VIEWS.has(path);
  navigate(`${stays ? path : "/"}?kb=${kbId}`);
}

async function createKnowledgeBase() {
  const kb = await promptDialog({
    title: "New knowledge base",
    label: "Name",
    placeholder: "Research, Team handbook …",
    submit: (name) => post("/api/knowledge-bases", { name }),
  });
  if (!kb) return;
  await loadKnowledgeBases();
  toast(`Created the knowledge base “${kb.name}”.`);
  switchTo(kb.id);
}

/** Below 700 px: the menu button opens the sidebar over the view; Esc, the scrim or a link closes it. */
function installDrawer() {
  const app = document.querySelector(".app");
  const button = document.getElementById("open-drawer");
  const sidebar = document.getElementById("sidebar");
  let scrim = null;
  const close = ({ refocus = true } = {}) => {
    if (!app.classList.contains("drawer-open")) return;
    app.classList.remove("drawer-open");
    button.setAttribute("aria-expanded", "false");
    scrim?.remove();
    scrim = null;
    if (refocus) button.focus();
  };
  button.addEventListener("click", () => {
    app.classList.add("drawer-open");
    button.setAttribute("aria-expanded", "true");
    scrim = h("div", { class: "drawer-scrim", onclick: () => close() });
    app.append(scrim);
    sidebar.querySelector("a, button, select, input")?.focus();
  });
  sidebar.addEventListener("keydown", (event) => {
    if (event.key === "Escape") close();
  });
  sidebar.addEventListener("click", (event) => {
    if (event.target.closest("a[data-link]")) close({ refocus: false });
  });
  document.addEventListener("view-rendered", () => close({ refocus: false }));
}

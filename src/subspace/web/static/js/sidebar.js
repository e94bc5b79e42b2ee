// The sidebar: knowledge bases, and the pages of the one in use: pinned ones first, then
// the pages made in the app, then the folders pages were imported from (folded until opened),
// sorted by last change or title, with a filter that matches anywhere in a title. Below
// 700 px it is a drawer behind the menu button.

import { get, post, query } from "./api.js";
import { promptDialog } from "./dialog.js";
import { clear, h, toast } from "./dom.js";
import { folderOf, folderTree, matchPages, sortPages } from "./pagetree.js";
import { BASE_VIEWS, navigate } from "./router.js";
import { on, state } from "./state.js";

const SHOWN_MATCHES = 200; // pages a filter lists; the rest are counted, not drawn
const SORT_KEY = "subspace.page-sort";

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
  const sort = document.getElementById("page-sort");
  sort.value = localStorage.getItem(SORT_KEY) === "title" ? "title" : "recent";
  sort.addEventListener("change", () => {
    localStorage.setItem(SORT_KEY, sort.value);
    drawPages();
  });
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

let pinned = new Set(); // the pinned pages' ids, read once a drawing

function drawPages() {
  pinned = pinnedIds();
  const filter = document.getElementById("page-filter").value;
  const sorted = sortPages(pages, document.getElementById("page-sort").value);
  const list = clear(document.getElementById("page-list"));
  if (filter.trim()) {
    const matches = matchPages(sorted, filter);
    list.append(...matches.slice(0, SHOWN_MATCHES).map((page) => pageRow(page, { withFolder: true })));
    if (matches.length > SHOWN_MATCHES) {
      list.append(h("li", { class: "muted page-more" },
        `${(matches.length - SHOWN_MATCHES).toLocaleString()} more: type more of the title.`));
    }
    if (!matches.length) list.append(h("li", { class: "muted" }, "No page matches."));
  } else if (!pages.length) {
    list.append(h("li", { class: "muted" }, "No pages yet."));
  } else {
    const pins = sorted.filter((page) => pinned.has(page.id));
    if (pins.length) {
      list.append(h("li", { class: "page-group" }, h("span", { class: "page-group-name" }, "Pinned"),
        h("ul", { "aria-label": "Pinned" }, pins.map((page) => pageRow(page)))));
    }
    drawFolder(list, folderTree(sorted));
  }
  markCurrent();
}

/** A folder's pages, then its folders, each folded until opened (and drawn when it is). */
function drawFolder(list, folder) {
  list.append(...folder.pages.map((page) => pageRow(page)));
  const open = openFolders();
  for (const sub of folder.folders) {
    const inner = h("ul", { class: "folder-pages", hidden: true });
    const toggle = h("button", {
      type: "button",
      class: "folder-toggle",
      "aria-expanded": "false",
      dataset: { path: sub.path },
      onclick: () => setFolderOpen(toggle, inner, sub, toggle.getAttribute("aria-expanded") !== "true"),
    }, h("span", { class: "folder-name" }, sub.name), h("span", { class: "folder-count" }, String(sub.count)));
    list.append(h("li", { class: "folder" }, toggle, inner));
    if (open.has(sub.path)) setFolderOpen(toggle, inner, sub, true, { remember: false });
  }
}

function setFolderOpen(toggle, inner, folder, opened, { remember = true } = {}) {
  toggle.setAttribute("aria-expanded", String(opened));
  inner.hidden = !opened;
  if (opened && !inner.childElementCount) drawFolder(inner, folder);
  if (remember) {
    const open = openFolders();
    if (opened) open.add(folder.path);
    else open.delete(folder.path);
    localStorage.setItem(foldersKey(), JSON.stringify([...open]));
  }
}

function pageRow(page, { withFolder = false } = {}) {
  const hiddenAs = page.deleted_at ? "deleted" : page.archived_at ? "archived" : null;
  const title = page.title || "Untitled";
  const isPinned = pinned.has(page.id);
  const folder = withFolder ? folderOf(page).join(" › ") : "";
  return h("li", { class: "page-row" },
    h("a", { href: `/p/${page.id}`, "data-link": true, dataset: { pageId: page.id }, title: folder ? `${folder} › ${title}` : title },
      h("span", { class: "page-title-text" }, title, hiddenAs && h("span", { class: "page-state" }, hiddenAs)),
      folder && h("span", { class: "page-folder" }, folder)),
    h("button", {
      type: "button",
      class: "pin",
      "aria-pressed": String(isPinned),
      "aria-label": `${isPinned ? "Unpin" : "Pin"} “${title}”`,
      title: isPinned ? "Unpin" : "Pin to the top",
      onclick: () => togglePin(page.id),
    }, isPinned ? "★" : "☆"));
}

// Pins and open folders are kept in this browser, per knowledge base.
const pinsKey = () => `subspace.pins.${state.kbId}`;
const foldersKey = () => `subspace.folders.${state.kbId}`;

function readSet(key) {
  try {
    const ids = JSON.parse(localStorage.getItem(key) || "[]");
    return new Set(Array.isArray(ids) ? ids.map(String) : []);
  } catch {
    return new Set();
  }
}

const pinnedIds = () => readSet(pinsKey());
const openFolders = () => readSet(foldersKey());

function togglePin(pageId) {
  const pins = pinnedIds();
  if (pins.has(pageId)) pins.delete(pageId);
  else pins.add(pageId);
  localStorage.setItem(pinsKey(), JSON.stringify([...pins]));
  drawPages();
  // The focus stays on a pin of the page: its first row's (the pinned one, once pinned).
  document.querySelector(`#page-list a[data-page-id="${pageId}"] + .pin`)?.focus();
}

/** Mark the open page's link, opening the folders that hold it. */
function markCurrent() {
  const current = pages.find((page) => window.location.pathname === `/p/${page.id}`);
  if (current && !document.getElementById("page-filter").value.trim()) {
    let path = "";
    for (const name of folderOf(current)) {
      path = path ? `${path}/${name}` : name;
      const toggle = document.querySelector(`#page-list .folder-toggle[data-path="${CSS.escape(path)}"]`);
      if (toggle?.getAttribute("aria-expanded") === "false") toggle.click();
    }
  }
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

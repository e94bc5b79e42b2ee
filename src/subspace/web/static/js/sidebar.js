// The sidebar: knowledge bases, the pages of the one in use (with a filter), and New page.

import { get, post, query } from "./api.js";
import { clear, h, toast } from "./dom.js";
import { navigate } from "./router.js";
import { emit, on, state } from "./state.js";

let pages = [];

export async function installSidebar() {
  document.getElementById("kb-select").addEventListener("change", (event) => {
    state.kbId = event.target.value;
  });
  document.getElementById("new-kb").addEventListener("click", createKnowledgeBase);
  document.getElementById("new-page").addEventListener("click", createPage);
  document.getElementById("page-filter").addEventListener("input", drawPages);
  document.getElementById("show-hidden-pages").addEventListener("change", () => loadPages());
  on("kb-changed", () => loadPages());
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
  pages = await get(`/api/pages${query({ kb_id: state.kbId, include_hidden: hidden || null })}`);
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

async function createPage() {
  try {
    const page = await post("/api/pages", { title: "Untitled", kb_id: state.kbId });
    emit("pages-changed");
    navigate(`/p/${page.id}`);
  } catch (error) {
    toast(error.message, { error: true });
  }
}

async function createKnowledgeBase() {
  const name = window.prompt("Name of the new knowledge base");
  if (!name || !name.trim()) return;
  try {
    const kb = await post("/api/knowledge-bases", { name: name.trim() });
    await loadKnowledgeBases();
    state.kbId = kb.id;
    await loadKnowledgeBases();
  } catch (error) {
    toast(error.message, { error: true });
  }
}

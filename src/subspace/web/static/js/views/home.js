// The start view: what the knowledge base holds, its recently edited pages, a New page action,
// and, while it is empty, how to begin.

import { get, post, query } from "../api.js";
import { clear, formatDate, h, MOD, toast, TOUCH } from "../dom.js";
import { navigate } from "../router.js";
import { emit, state } from "../state.js";

const RECENT = 8; // pages listed under "Recent pages"

export async function createPage() {
  try {
    const page = await post("/api/pages", { title: "Untitled", kb_id: state.kbId });
    emit("pages-changed");
    navigate(`/p/${page.id}`);
  } catch (error) {
    toast(error.message, { error: true });
  }
}

function stat(number, label, href) {
  const body = [h("span", { class: "stat-number" }, number.toLocaleString()), h("span", { class: "stat-label" }, label)];
  return h("li", {}, href ? h("a", { class: "card", href, "data-link": true }, ...body) : h("div", { class: "card" }, ...body));
}

function plural(n, one, many) {
  return n === 1 ? one : many;
}

export async function render(container, _params, { signal }) {
  const kbId = state.kbId;
  const [pages, overview] = await Promise.all([
    get(`/api/pages${query({ kb_id: kbId })}`, { signal }),
    get(`/api/knowledge-bases/${kbId}/overview`, { signal }),
  ]);
  const kb = state.knowledgeBases.find((k) => k.id === kbId);
  document.title = "Subspace";
  const empty = !overview.pages && !overview.files && !overview.mail;
  const recent = pages.slice(0, RECENT); // the list comes most recently changed first
  clear(container).append(
    h("div", { class: "view-head" },
      h("h1", {}, kb ? kb.name : "Start"),
      h("button", { type: "button", class: "primary", id: "start-new-page", onclick: createPage }, "+ New page")),
    TOUCH
      ? h("p", { class: "hint muted" }, "Tap Search to find anything in pages, bullets, files and mail, "
        + "or to ask a question and get an answer with its sources.")
      : h("p", { class: "hint muted" }, "Find anything with ", h("kbd", {}, `${MOD} K`),
        ": pages, bullets, files and mail. Ask a question there with ", h("kbd", {}, "⇧ Enter"), ". ",
        h("kbd", {}, "?"), " lists every key."),
    h("ul", { class: "cards", "aria-label": "What this knowledge base holds" },
      stat(overview.pages, plural(overview.pages, "page", "pages")),
      stat(overview.files, plural(overview.files, "file", "files"), "/files"),
      stat(overview.mail, plural(overview.mail, "message", "messages"), "/mail"),
      // Only while there is some: "3 items still being indexed for meaning".
      overview.pending_embeddings
        ? stat(overview.pending_embeddings, `${plural(overview.pending_embeddings, "item", "items")} still being indexed for meaning`)
        : null),
    ...(overview.embedding_progress
      ? [h("p", { class: "muted", id: "embedding-progress", role: "status" },
        `Search by meaning is catching up: ${overview.embedding_progress}. Search by words finds everything already.`)]
      : []),
    empty
      ? h("div", { class: "empty-state" }, h("strong", {}, "This knowledge base is empty"),
        h("p", {}, "Start a page, upload files on Files, or import mail on Mail; everything is searchable as soon as it is saved."),
        h("button", { type: "button", class: "primary", onclick: createPage }, "+ New page"))
      : h("section", { "aria-labelledby": "recent-head" },
        h("h2", { id: "recent-head" }, "Recent pages"),
        recent.length
          ? h("ul", { class: "item-list" }, recent.map((page) => h("li", {},
            h("a", { href: `/p/${page.id}`, "data-link": true }, page.title || "Untitled"),
            h("span", { class: "muted" }, formatDate(page.updated_at)))))
          : h("p", { class: "muted" }, "No pages yet in this knowledge base.")),
  );
}

// A page as an outline: the title and bullets edited in place, saved as you type, with archive,
// delete and restore in the header. `#<nodeId>` opens the page at that bullet.

import { get, patch, post, del } from "../api.js";
import { clear, formatDate, h, toast } from "../dom.js";
import { Outline } from "../outline.js";
import { SaveQueue } from "../savequeue.js";
import { emit } from "../state.js";
import { renderTagsPanel } from "../tags.js";
import { installDropUpload } from "../upload.js";

const TYPING_PAUSE_MS = 400; // the title is saved once typing stops this long
const STATE_TEXT = {
  saving: "Saving…",
  saved: "Saved",
  retrying: "Not saved — retrying",
  error: "Not saved",
};
const STALE_MESSAGE = "This page changed in another window; reloaded the newer version.";

export async function render(container, { pageId }, { signal }) {
  const page = await get(`/api/pages/${pageId}`, { signal });
  const view = new PageView(container, page);
  view.draw();
  if (!view.revealHash() && !page.nodes.length && page.title === "Untitled") {
    view.title.focus(); // a new page: type its title first
    view.title.select();
  }
  return () => view.close();
}

class PageView {
  constructor(container, page) {
    this.container = container;
    this.page = page;
    this.titleTimer = null;
    this.saveState = h("span", { class: "save-state", role: "status", "aria-live": "polite" }, "Saved");
    this.notices = h("div", { class: "page-notices" });
    this.queue = new SaveQueue({
      version: page.version,
      onState: (state, message) => this.showState(state, message),
      onStale: (refused) => this.stale(refused),
      onRejected: (op, error) => this.rejected(op, error),
    });
    this.onHash = () => this.revealHash();
    this.onUnload = (event) => {
      if (!this.queue.idle) event.preventDefault();
    };
    window.addEventListener("hashchange", this.onHash);
    window.addEventListener("beforeunload", this.onUnload);
    this.onResize = () => this.outline?.fitAll();
    window.addEventListener("resize", this.onResize);
  }

  draw() {
    const page = this.page;
    document.title = `${page.title || "Untitled"} · Subspace`;
    this.title = h("input", {
      type: "text",
      class: "page-title",
      "aria-label": "Page title",
      placeholder: "Untitled",
      readonly: Boolean(page.deleted_at),
    });
    this.title.value = page.title;
    this.title.addEventListener("input", () => this.scheduleTitle());
    this.title.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === "ArrowDown") {
        event.preventDefault();
        this.outline.focusFirst();
      }
    });
    this.actions = h("div", { class: "page-actions" });
    this.banner = h("div", { class: "page-banner" });
    this.outline = this.makeOutline(page);
    this.outlineSlot = h("div", { class: "outline-slot" }, this.outline.el);
    this.tags = h("div", { class: "page-tags" });
    clear(this.container).append(
      h("article", { class: "outline-page" },
        h("header", { class: "page-head" },
          h("h1", { class: "page-title-wrap" }, this.title),
          h("div", { class: "page-tools" }, this.saveState, this.actions)),
        this.banner,
        this.notices,
        this.tags,
        this.outlineSlot,
        h("p", { class: "outline-help muted" },
          "Enter: new bullet · Tab / Shift-Tab: indent / outdent · Alt-↑ / Alt-↓: move · ",
          "Alt-M: memory · Ctrl-.: fold · Esc: leave the text")),
    );
    this.drawState();
    this.outline.fitAll();
    // Files dropped on the page are uploaded to its knowledge base.
    this.removeDrop = installDropUpload(this.container, { kbId: this.page.kb_id });
    renderTagsPanel(this.tags, { kind: "page", id: page.id, kbId: page.kb_id })
      .catch((error) => toast(error.message, { error: true }));
  }

  makeOutline(page) {
    return new Outline({
      pageId: page.id,
      nodes: page.nodes,
      queue: this.queue,
      readOnly: Boolean(page.deleted_at),
      onTop: () => this.title.focus(),
    });
  }

  /** The header buttons and the banner that say whether the page is archived or deleted. */
  drawState() {
    const page = this.page;
    const button = (label, action, cls) =>
      h("button", { type: "button", class: cls, onclick: () => this.setState(action) }, label);
    const buttons = [];
    clear(this.banner);
    if (page.deleted_at) {
      buttons.push(button("Restore", "restore", "primary"));
      this.banner.append(h("p", { class: "notice notice-error" },
        `This page was deleted ${formatDate(page.deleted_at)}. It takes no edits until you restore it.`));
    } else if (page.archived_at) {
      buttons.push(button("Restore", "restore", "primary"), button("Delete", "delete"));
      this.banner.append(h("p", { class: "notice" },
        `This page was archived ${formatDate(page.archived_at)}: search, grep and read leave it out until you restore it.`));
    } else {
      buttons.push(button("Archive", "archive"), button("Delete", "delete"));
    }
    clear(this.actions).append(...buttons);
  }

  setState(action) {
    this.outline.flushAll();
    this.flushTitle();
    const path = `/api/pages/${this.page.id}`;
    this.queue.push({
      kind: action,
      refused: () => null,
      run: async (base) => {
        const out = action === "delete"
          ? await del(`${path}?base_version=${base}`)
          : await post(`${path}/${action}?base_version=${base}`);
        const hadFocus = this.actions.contains(document.activeElement);
        Object.assign(this.page, out);
        this.drawState();
        this.outline.setReadOnly(Boolean(out.deleted_at));
        this.title.readOnly = Boolean(out.deleted_at);
        if (hadFocus) this.actions.querySelector("button")?.focus();
        emit("pages-changed");
        toast({ archive: "Page archived.", delete: "Page deleted.", restore: "Page restored." }[action]);
        return out.version;
      },
    });
  }

  scheduleTitle() {
    if (this.titleTimer === null) this.queue.pendingText += 1;
    clearTimeout(this.titleTimer);
    this.titleTimer = setTimeout(() => this.flushTitle(), TYPING_PAUSE_MS);
    this.queue.report();
  }

  flushTitle() {
    if (this.titleTimer === null) return;
    clearTimeout(this.titleTimer);
    this.titleTimer = null;
    this.queue.pendingText -= 1;
    this.queue.push({
      kind: "title",
      refused: () => this.title.value,
      run: async (base) => {
        const out = await patch(`/api/pages/${this.page.id}`, { title: this.title.value, base_version: base });
        this.page.title = out.title;
        this.title.classList.remove("is-unsaved");
        this.title.title = "";
        document.title = `${out.title || "Untitled"} · Subspace`;
        emit("pages-changed");
        return out.version;
      },
    });
  }

  /** The server refused a write for good: say why, and mark the text that is not saved. */
  rejected(op, error) {
    toast(`Not saved: ${error.message}`, { error: true });
    const field = op.kind === "title" ? this.title : op.node?.input;
    if (["text", "create", "title"].includes(op.kind) && field) {
      (op.kind === "title" ? field : op.node.el).classList.add("is-unsaved");
      field.title = `Not saved: ${error.message}`;
    }
  }

  showState(state, message) {
    this.saveState.textContent = STATE_TEXT[state];
    this.saveState.dataset.state = state;
    this.saveState.title = message || "";
  }

  /** Another window changed the page: show what was refused, then the newer version. */
  async stale(refused) {
    const texts = [
      ...refused.map((op) => op.refused()),
      ...this.outline.unsavedTexts(),
      this.titleTimer !== null ? this.title.value : null,
    ];
    const kept = [...new Set(texts.filter((text) => text && text.trim()))];
    this.outline.dropTimers();
    this.outline.setReadOnly(true); // nothing typed while the newer version loads gets lost
    if (this.titleTimer !== null) {
      clearTimeout(this.titleTimer);
      this.titleTimer = null;
      this.queue.pendingText -= 1;
    }
    const notice = this.staleNotice(kept);
    this.notices.prepend(notice); // an earlier notice keeps its text until dismissed
    const hadFocus = this.container.contains(document.activeElement);
    this.title.readOnly = true;
    try {
      await this.reload();
    } catch (error) {
      notice.append(h("p", {}, `The newer version did not load (${error.message}). Reload the page.`));
    }
    if (hadFocus) notice.focus();
  }

  staleNotice(texts) {
    const notice = h("div", { class: "notice notice-error stale-notice", role: "alert", tabindex: "-1" },
      h("p", {}, STALE_MESSAGE));
    if (texts.length) {
      const refused = texts.join("\n");
      const copy = h("button", { type: "button", class: "copy-refused" }, "Copy");
      copy.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(refused);
          toast("Copied.");
        } catch {
          box.select();
          toast("Select the text and copy it with Ctrl-C.");
        }
      });
      const box = h("textarea", { class: "refused-text", readonly: true, rows: Math.min(texts.length, 6),
        "aria-label": "What you typed that was not saved" });
      box.value = refused;
      notice.append(h("p", {}, "What you typed that was not saved:"), box, copy);
    }
    notice.append(h("button", { type: "button", class: "link-button", onclick: () => notice.remove() }, "Dismiss"));
    return notice;
  }

  async reload() {
    const page = await get(`/api/pages/${this.page.id}`);
    this.page = page;
    this.queue.reset(page.version);
    this.outline = this.makeOutline(page);
    this.outlineSlot.replaceChildren(this.outline.el);
    this.title.value = page.title;
    this.title.readOnly = Boolean(page.deleted_at);
    this.drawState();
    this.outline.fitAll();
    emit("pages-changed");
  }

  revealHash() {
    const id = decodeURIComponent(window.location.hash.slice(1));
    return Boolean(id) && this.outline.reveal(id);
  }

  close() {
    this.closed = true;
    if (typeof this.removeDrop === "function") this.removeDrop();
    // Leaving the page: what was typed is saved now rather than dropped with the view.
    this.outline.flushAll();
    this.flushTitle();
    window.removeEventListener("hashchange", this.onHash);
    window.removeEventListener("resize", this.onResize);
    const queue = this.queue;
    const unload = this.onUnload;
    const release = () => (queue.idle ? window.removeEventListener("beforeunload", unload) : setTimeout(release, 500));
    release();
  }
}

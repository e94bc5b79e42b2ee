// A page as an outline: the title and bullets edited in place, saved as you type, with archive,
// delete and restore in the header. `#<nodeId>` opens the page at that bullet.

import { ask, cancelRun, endLine, followRun, liveRunOf, parseCommand, remember, stepLine } from "../answers.js";
import { get, patch, post, del } from "../api.js";
import { clear, formatDate, h, toast } from "../dom.js";
import { Outline, commandsIn } from "../outline.js";
import { SaveQueue } from "../savequeue.js";
import { emit, on, state } from "../state.js";
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
  state.kbId = page.kb_id; // the sidebar shows the page's own base
  const view = new PageView(container, page);
  view.draw();
  view.resumeRuns();
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
    this.onResize = () => {
      this.outline?.fitAll();
      this.fitTitle();
    };
    window.addEventListener("resize", this.onResize);
    this.runs = new Map(); // command bullet id → {runId, stop, line} of a run being followed
    this.ended = new Map(); // command bullet id → the status line of a run that ended here
    // The palette's Ask row files its question on the open page through this view.
    this.offAsk = on("ask", (detail) => {
      if (!detail.taken && !this.page.deleted_at && !this.queue.stopped) detail.taken = this.askOnPage(detail);
    });
  }

  draw() {
    const page = this.page;
    document.title = `${page.title || "Untitled"} · Subspace`;
    // A one-line text area, not an input: a long title wraps on a narrow screen instead of
    // being cut off. A pasted line break becomes a space; Enter goes to the first bullet.
    this.title = h("textarea", {
      class: "page-title",
      rows: 1,
      "aria-label": "Page title",
      placeholder: "Untitled",
      readonly: Boolean(page.deleted_at),
    });
    this.title.value = page.title;
    this.title.addEventListener("input", () => {
      if (/[\r\n]/.test(this.title.value)) this.title.value = this.title.value.replace(/[\r\n]+/g, " ");
      this.fitTitle();
      this.scheduleTitle();
    });
    this.title.addEventListener("keydown", (event) => {
      const atEnd = this.title.selectionStart === this.title.value.length;
      if (event.key === "Enter" || (event.key === "ArrowDown" && atEnd)) {
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
    this.fitTitle();
    this.keepTitleInBar();
    // Files dropped on the page are uploaded to its knowledge base.
    this.removeDrop = installDropUpload(this.container, { kbId: this.page.kb_id });
    renderTagsPanel(this.tags, { kind: "page", id: page.id, kbId: page.kb_id })
      .catch((error) => toast(error.message, { error: true }));
  }

  /**
   * While the title is scrolled out of view (an answer streaming in at the end of a long page,
   * on a phone), the top bar shows it in the brand's place; a tap there scrolls back to it.
   */
  keepTitleInBar() {
    const bar = document.getElementById("topbar-title");
    if (!bar || !("IntersectionObserver" in window)) return;
    const under = bar.parentElement.offsetHeight; // the sticky top bar covers this much
    bar.onclick = () => this.title.scrollIntoView({ block: "center" });
    this.titleWatch = new IntersectionObserver(([entry]) => {
      const box = entry.boundingClientRect;
      bar.textContent = this.title.value || "Untitled";
      bar.hidden = entry.isIntersecting || !(box.height > 0 && box.bottom <= under);
    }, { rootMargin: `-${under}px 0px 0px 0px` });
    this.titleWatch.observe(this.title);
  }

  /** The title's height follows its text: as many lines as it wraps to. */
  fitTitle() {
    this.title.style.height = "auto";
    this.title.style.height = `${this.title.scrollHeight}px`;
  }

  makeOutline(page) {
    return new Outline({
      pageId: page.id,
      nodes: page.nodes,
      queue: this.queue,
      readOnly: Boolean(page.deleted_at),
      onTop: () => this.title.focus(),
      onCommand: (node) => this.askUnder(node),
    });
  }

  // ---- answers --------------------------------------------------------------------------------

  /** Enter on "/rag <question>": once the bullet is saved, file a run under it and follow it. */
  askUnder(node) {
    const command = parseCommand(node.text);
    if (!command || node.asked || node.children.some((child) => child.props.run)) return;
    node.asked = true;
    this.showRun(node, { line: "Asking…" });
    this.queue.push({
      node,
      kind: "ask",
      refused: () => null,
      run: async () => {
        if (!node.id) return null;
        try {
          const run = await ask(command.question, command.strategy, { node_id: node.id });
          remember(run);
          this.follow(node, run.run_id);
        } catch (error) {
          node.asked = false;
          this.showRun(node, { line: `Not asked: ${error.message}`, error: true });
          return null;
        }
        // filing the run may have written to the page: carry on from its version
        return (await get(`/api/nodes/${node.id}`)).page_version;
      },
    });
  }

  /** The palette's Ask row on this page: the server files the bullet last, then it streams. */
  askOnPage({ question, strategy }) {
    return new Promise((resolve, reject) => {
      this.outline.flushAll();
      this.queue.push({
        kind: "ask",
        refused: () => null,
        run: async () => {
          let run;
          try {
            run = await ask(question, strategy, { page_id: this.page.id });
          } catch (error) {
            reject(error);
            return null;
          }
          remember(run);
          const command = await get(`/api/nodes/${run.node_id}`);
          const node = this.outline.byId.get(run.node_id)
            || this.outline.adopt(this.outline.root, { id: command.id, text: command.text, props: command.props }, null);
          this.follow(node, run.run_id);
          resolve(run);
          return command.page_version;
        },
      });
    });
  }

  /**
   * Streams the runs still going under this page's command bullets (the page was reopened).
   * Their bullets are found in the page's data: only a live run builds the rest of a big page.
   */
  async resumeRuns() {
    for (const data of commandsIn(this.page.nodes)) {
      if (this.runs.has(data.id)) continue;
      const run = await liveRunOf(data);
      if (this.closed) return;
      const node = run && !this.runs.has(data.id) && this.outline.byId.get(data.id);
      if (node) this.follow(node, run.id);
    }
  }

  /** The status line under a command bullet: what the run does now, and Cancel while it runs. */
  showRun(node, { line, error = false, runId = null }) {
    const text = h("span", { class: error ? "run-line run-error" : "run-line" }, line);
    text.setAttribute(error ? "role" : "aria-live", error ? "alert" : "polite");
    const parts = [text];
    if (runId) {
      const cancel = h("button", { type: "button", class: "run-cancel link-button" }, "Cancel");
      cancel.addEventListener("click", async () => {
        cancel.disabled = true;
        text.textContent = "Cancelling…";
        try {
          await cancelRun(runId);
        } catch (failure) {
          cancel.disabled = false;
          toast(failure.message, { error: true });
        }
      });
      parts.push(cancel);
    }
    node.runEl.replaceChildren(...parts);
    node.runEl.hidden = false;
    node.runEl.dataset.run = runId || "";
    return text;
  }

  follow(node, runId) {
    const key = node.id;
    this.runs.get(key)?.stop();
    this.showRun(node, { line: "Waiting for the answer…", runId });
    // the bullet's element is replaced when the page reloads: find its line each time
    const line = () => this.outline.byId.get(key)?.runEl.querySelector(".run-line") || { textContent: "" };
    const stop = followRun(runId, {
      onStep: (step) => {
        if (step.kind === "bullet") return;
        line().textContent = stepLine(step);
      },
      onBullet: (bullet) => {
        const target = this.outline.byId.get(key) || node;
        if (!bullet.id || this.outline.byId.has(bullet.id)) return;
        this.outline.addAnswer(target, { ...bullet, run: runId });
        this.queue.sync(async () => (await get(`/api/nodes/${bullet.id}`)).page_version);
      },
      onStatus: (status, error) => {
        if (error) this.showRun(this.outline.byId.get(key) || node, { line: error, error: true, runId });
        else if (status === "running" && line().textContent === "Waiting for the answer…") line().textContent = "Working…";
      },
      onDone: (run) => this.finish(key, run),
    });
    this.runs.set(key, { runId, stop });
  }

  /** A run ended: say how, and show the page as the server holds it once nothing is unsaved. */
  async finish(key, run) {
    this.runs.delete(key);
    const failed = run.status === "failed";
    const words = endLine(run);
    this.ended.set(key, { line: words, error: failed });
    const node = this.outline.byId.get(key);
    if (node) this.showRun(node, { line: words, error: failed });
    if (this.closed || !this.queue.idle || this.runs.size) return;
    const active = document.activeElement?.closest?.("li.bullet")?.bullet;
    const caret = active ? active.input.selectionStart : null;
    try {
      await this.reload();
    } catch {
      return; // the streamed bullets stay as they are
    }
    for (const [id, end] of this.ended) {
      const again = this.outline.byId.get(id);
      if (again) this.showRun(again, end);
    }
    const back = active?.id && this.outline.byId.get(active.id);
    if (back) this.outline.focus(back, caret);
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
    this.fitTitle();
    this.drawState();
    this.outline.fitAll();
    for (const [id, run] of this.runs) {
      const node = this.outline.byId.get(id);
      if (node) this.showRun(node, { line: "Working…", runId: run.runId });
    }
    emit("pages-changed");
  }

  revealHash() {
    const id = decodeURIComponent(window.location.hash.slice(1));
    return Boolean(id) && this.outline.reveal(id);
  }

  close() {
    this.closed = true;
    this.offAsk();
    this.titleWatch?.disconnect();
    const bar = document.getElementById("topbar-title");
    if (bar) bar.hidden = true;
    for (const run of this.runs.values()) run.stop();
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

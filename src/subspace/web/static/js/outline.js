// The outline editor: a page's bullets as a tree of plain-text fields, edited in place with the
// keyboard, each change queued as one kb-command (see savequeue.js).

import { citationLinks, parseCommand } from "./answers.js";
import { del, patch, post } from "./api.js";
import { append, clear, h, TOUCH } from "./dom.js";
import { hasMarkdown, renderMarkdown } from "./markdown.js";
import { navigate } from "./router.js";

const TYPING_PAUSE_MS = 400; // a text edit is saved once typing stops this long
const FLASH_MS = 2500; // how long a bullet opened by its link stays highlighted
// Where the browser grows a field to its text itself (CSS field-sizing), nothing is measured
// in script: measuring each field of a 10,000-bullet page forced a layout per field.
const SIZED_BY_CSS = globalThis.CSS?.supports?.("field-sizing", "content") ?? false;
// A big page is built a slice at a time: the first screen at once, then the rest between
// keystrokes, so a page of 10,000 bullets answers as soon as its top is drawn.
const FIRST_BULLETS = 200; // built before the page is shown: more than a screen holds
const SLICE_BULLETS = 500; // built per task after that
const TREE_KEYS = new Set(["Enter", "Tab", "Backspace", "ArrowUp", "ArrowDown"]);

let nextKey = 0;

/**
 * An editable outline for one page. `queue` is the page's SaveQueue; `pageId` names the page;
 * `readOnly` for a deleted page (it takes no edits until restored); `onCommand(node)` when
 * Enter files a bullet that starts with /rag, /rag-pageindex or /rag-direct and a question.
 */
export class Outline {
  constructor({ pageId, nodes, queue, readOnly = false, onTop = null, onCommand = null }) {
    this.pageId = pageId;
    this.onTop = onTop; // ↑ on the first bullet: back to the title
    this.onCommand = onCommand;
    this.queue = queue;
    this.readOnly = readOnly;
    this.root = { id: null, children: [], parent: null, isRoot: true };
    this.ids = new Map(); // id → bullet, of the bullets built so far (see byId)
    this.timers = new Map(); // node → pending text save
    this.collapsed = new Set(loadCollapsed(pageId));
    this.el = h("ul", { class: "outline", "aria-label": "Bullets" });
    this.root.childrenEl = this.el;
    // The bullets not built yet, each with its parent, in reading order from the end.
    this.unbuilt = [...nodes].reverse().map((data) => [this.root, data]);
    this.grow(FIRST_BULLETS);
    this.growLater();
    if (!this.root.children.length) this.insert(this.placeholder(), this.root, 0);
    this.el.addEventListener("keydown", (event) => this.onKeydown(event));
  }

  // ---- the model ------------------------------------------------------------------------

  /** Every bullet by id. Asking builds what is left of the page first: an id may be deep. */
  get byId() {
    this.complete();
    return this.ids;
  }

  /** Build up to `count` more bullets, in reading order. */
  grow(count) {
    for (let left = count; left > 0 && this.unbuilt.length; left -= 1) {
      const [parent, data] = this.unbuilt.pop();
      const node = this.makeNode(data);
      this.insert(node, parent, parent.children.length);
      for (const child of [...(data.children || [])].reverse()) this.unbuilt.push([node, child]);
    }
  }

  growLater() {
    if (!this.unbuilt.length) return;
    this.growTimer = setTimeout(() => {
      this.grow(SLICE_BULLETS);
      this.growLater();
    }, 0);
  }

  /** Build the rest of the page now: before anything that reads or changes its whole tree. */
  complete() {
    clearTimeout(this.growTimer);
    this.grow(Infinity);
  }

  adopt(parent, data, index) {
    const node = this.makeNode(data);
    this.insert(node, parent, index ?? parent.children.length);
    node.created = true;
    for (const child of data.children || []) this.adopt(node, child, null);
    return node;
  }

  placeholder() {
    // An empty page's first bullet: created on the server once it is typed into.
    const node = this.makeNode({ id: null, text: "", props: {} });
    node.created = false;
    return node;
  }

  makeNode(data) {
    const node = {
      key: `k${nextKey++}`,
      id: data.id,
      text: data.text,
      props: { ...(data.props || {}) },
      parent: null,
      children: [],
      created: Boolean(data.id),
      textQueued: false,
    };
    this.build(node);
    if (node.id) this.ids.set(node.id, node);
    return node;
  }

  build(node) {
    node.input = h("textarea", {
      class: "bullet-text",
      rows: 1,
      "aria-label": "Bullet",
      spellcheck: "true",
      readonly: this.readOnly,
    });
    node.input.value = node.text;
    node.input.addEventListener("input", () => this.onInput(node));
    // A bullet holding Markdown (a link, code, emphasis) reads rendered until it is edited:
    // its field stays in place, focusable, behind the rendered text, and shows on focus.
    node.view = h("div", { class: "bullet-view", hidden: true, onclick: (event) => {
      if (!event.target.closest("a")) node.input.focus();
    } });
    node.input.addEventListener("focus", () => this.showRendered(node, false));
    node.input.addEventListener("blur", () => this.showRendered(node, true));
    node.toggle = h("button", {
      type: "button",
      class: "bullet-toggle",
      onclick: () => this.setCollapsed(node, !this.isCollapsed(node)),
    });
    node.memory = h("button", {
      type: "button",
      class: "memory-toggle",
      title: "Mark as memory (Alt-M)",
      disabled: this.readOnly,
      onclick: () => this.toggleMemory(node),
    }, "memory");
    node.childrenEl = h("ul", { class: "outline-children" });
    // An answer's sources, from its props (never from its text, which stays plain text).
    const refs = Array.isArray(node.props.refs) ? node.props.refs : [];
    const citations = citationLinks(refs, { pageId: this.pageId, isLocal: (id) => this.ids.has(id) }, navigate);
    node.runEl = h("div", { class: "run-status", hidden: true });
    node.el = h("li", { class: Array.isArray(node.props.refs) ? "bullet is-answer" : "bullet" },
      h("div", { class: "bullet-row" }, node.toggle, h("span", { class: "bullet-dot", "aria-hidden": "true" }),
        node.input, node.view, citations, node.memory),
      node.runEl,
      node.childrenEl);
    node.el.bullet = node;
    this.paint(node);
    this.showRendered(node, true);
  }

  /**
   * Show the bullet's Markdown rendered (when it holds any and `rendered`), or its field. An
   * answer's text stays plain: a model's links are not offered as links to click.
   */
  showRendered(node, rendered) {
    const show = rendered && !Array.isArray(node.props.refs) && hasMarkdown(node.text) &&
      document.activeElement !== node.input;
    if (show) append(clear(node.view), renderMarkdown(node.text));
    node.view.hidden = !show;
    node.input.classList.toggle("is-behind", show);
    if (!show && !SIZED_BY_CSS) requestAnimationFrame(() => fit(node.input));
  }

  /** Bring a bullet's classes, ids and buttons in line with its state. */
  paint(node) {
    if (node.id) node.el.id = node.id;
    node.el.dataset.nodeId = node.id || "";
    const memory = node.props.memory === true;
    node.el.classList.toggle("is-memory", memory);
    node.memory.setAttribute("aria-pressed", String(memory));
    node.memory.setAttribute("aria-label", memory ? "Memory: on" : "Memory: off");
    const hasChildren = node.children.length > 0;
    const collapsed = hasChildren && this.isCollapsed(node);
    node.toggle.hidden = false;
    node.toggle.classList.toggle("is-empty", !hasChildren);
    node.toggle.tabIndex = hasChildren ? 0 : -1;
    node.toggle.setAttribute("aria-hidden", String(!hasChildren));
    node.toggle.setAttribute("aria-label", collapsed ? "Expand" : "Collapse");
    node.toggle.textContent = collapsed ? "▸" : "▾";
    if (hasChildren) node.toggle.setAttribute("aria-expanded", String(!collapsed));
    else node.toggle.removeAttribute("aria-expanded");
    const opening = node.childrenEl.hidden && !collapsed;
    node.childrenEl.hidden = collapsed;
    if (opening) this.fitAll(node.children); // fields hidden while folded had no height to fit
  }

  insert(node, parent, index) {
    node.parent = parent;
    parent.children.splice(index, 0, node);
    parent.childrenEl.insertBefore(node.el, parent.childrenEl.children[index] || null);
    if (!parent.isRoot) this.paint(parent);
    if (!SIZED_BY_CSS) requestAnimationFrame(() => fit(node.input));
  }

  detach(node) {
    const parent = node.parent;
    parent.children.splice(parent.children.indexOf(node), 1);
    node.el.remove();
    if (!parent.isRoot) this.paint(parent);
    return parent;
  }

  index(node) {
    return node.parent.children.indexOf(node);
  }

  /** The bullets shown, in reading order (children of collapsed bullets left out). */
  visible() {
    this.complete();
    const out = [];
    const walk = (list) => {
      for (const node of list) {
        out.push(node);
        if (!this.isCollapsed(node)) walk(node.children);
      }
    };
    walk(this.root.children);
    return out;
  }

  isCollapsed(node) {
    return Boolean(node.id) && this.collapsed.has(node.id) && node.children.length > 0;
  }

  setCollapsed(node, collapsed) {
    if (!node.id) return;
    if (collapsed) this.collapsed.add(node.id);
    else this.collapsed.delete(node.id);
    saveCollapsed(this.pageId, this.collapsed);
    const hidingFocus = collapsed && node.childrenEl.contains(document.activeElement);
    this.paint(node);
    if (hidingFocus) this.focus(node); // focus never stays on a hidden bullet
  }

  /** A deleted page takes no edits until it is restored. */
  setReadOnly(readOnly) {
    this.readOnly = readOnly;
    const walk = (list) => list.forEach((node) => {
      node.input.readOnly = readOnly;
      node.memory.disabled = readOnly;
      walk(node.children);
    });
    walk(this.root.children);
  }

  // ---- editing ------------------------------------------------------------------------------

  onInput(node) {
    node.text = node.input.value;
    fit(node.input);
    if (!node.created) {
      this.create(node);
      return;
    }
    this.scheduleText(node);
  }

  scheduleText(node) {
    clearTimeout(this.timers.get(node));
    if (!this.timers.has(node)) this.queue.pendingText += 1;
    this.timers.set(node, setTimeout(() => this.flushText(node), TYPING_PAUSE_MS));
    this.queue.report();
  }

  flushText(node) {
    if (!this.timers.has(node)) return;
    clearTimeout(this.timers.get(node));
    this.timers.delete(node);
    this.queue.pendingText -= 1;
    if (node.textQueued) {
      this.queue.report(); // the queued save sends the newest text when its turn comes
      return;
    }
    node.textQueued = true;
    this.queue.push({
      node,
      kind: "text",
      refused: () => node.text,
      run: async (base) => {
        node.textQueued = false;
        if (!node.id) return null;
        const out = await patch(`/api/nodes/${node.id}`, { text: node.text, base_version: base });
        node.el.classList.remove("is-unsaved");
        node.input.title = "";
        return out.page_version;
      },
    });
  }

  /** Queue every pending text save now, so a structural change comes after them. */
  flushAll() {
    for (const node of [...this.timers.keys()]) this.flushText(node);
  }

  /** Text typed but not saved yet (for the notice when the page changed elsewhere). */
  unsavedTexts() {
    return [...this.timers.keys()].map((node) => node.text);
  }

  dropTimers() {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.queue.pendingText -= this.timers.size;
    this.timers.clear();
  }

  create(node) {
    this.complete(); // a position counts the siblings after it too
    this.flushAll();
    node.created = true;
    const position = this.index(node);
    const parent = node.parent;
    this.queue.push({
      node,
      kind: "create",
      refused: () => node.text,
      run: async (base) => {
        const body = {
          page_id: this.pageId,
          text: node.text,
          parent_id: parent.id,
          position,
          base_version: base,
        };
        if (node.props.memory) body.props = { memory: true };
        const out = await post("/api/nodes", body);
        node.id = out.id;
        this.ids.set(node.id, node);
        node.el.classList.remove("is-unsaved");
        node.input.title = "";
        this.paint(node);
        // Typed while the bullet was being created: a text save carries it, the one queued
        // already or a new one. Never a second: it would land after what came next (an ask,
        // whose answers then make it stale).
        if (out.text !== node.text && !this.timers.has(node) && !node.textQueued) this.scheduleText(node);
        return out.page_version;
      },
    });
  }

  structural(node, kind, call) {
    this.complete();
    this.flushAll();
    if (!node.created) this.create(node);
    this.queue.push({
      node,
      kind,
      refused: () => null,
      run: async (base) => (node.id ? (await call(node.id, base)).page_version : null),
    });
  }

  splitAfter(node) {
    const start = node.input.selectionStart;
    const end = node.input.selectionEnd;
    const before = node.text.slice(0, start);
    const after = node.text.slice(end);
    if (after !== "" || start !== end) {
      node.text = node.input.value = before;
      fit(node.input);
      if (node.created) this.scheduleText(node);
    }
    if (!node.created) this.create(node);
    const fresh = this.makeNode({ id: null, text: after, props: {} });
    fresh.created = false;
    this.insert(fresh, node.parent, this.index(node) + 1);
    this.create(fresh);
    this.focus(fresh, 0);
  }

  indent(node) {
    const index = this.index(node);
    if (index === 0) return;
    const target = node.parent.children[index - 1];
    const caret = node.input.selectionStart;
    this.detach(node);
    if (this.isCollapsed(target)) this.setCollapsed(target, false);
    this.insert(node, target, target.children.length);
    this.paint(target);
    this.focus(node, caret);
    this.structural(node, "indent", (id, base) =>
      post(`/api/nodes/${id}/indent?base_version=${base}`));
  }

  outdent(node) {
    const parent = node.parent;
    if (parent.isRoot) return;
    const caret = node.input.selectionStart;
    this.detach(node);
    this.insert(node, parent.parent, this.index(parent) + 1);
    this.focus(node, caret);
    this.structural(node, "outdent", (id, base) =>
      post(`/api/nodes/${id}/outdent?base_version=${base}`));
  }

  moveBy(node, step) {
    const index = this.index(node);
    const target = index + step;
    if (target < 0 || target >= node.parent.children.length) return;
    const caret = node.input.selectionStart;
    const parent = this.detach(node);
    this.insert(node, parent, target);
    this.focus(node, caret);
    this.structural(node, "move", (id, base) =>
      post(`/api/nodes/${id}/move`, { parent_id: parent.id, position: target, base_version: base }));
  }

  remove(node) {
    const shown = this.visible();
    const at = shown.indexOf(node);
    const next = shown[at - 1] || shown[at + 1];
    if (!next) return; // the last bullet stays, to type into
    if (this.timers.has(node)) {
      clearTimeout(this.timers.get(node));
      this.timers.delete(node);
      this.queue.pendingText -= 1;
    }
    this.flushAll();
    this.detach(node);
    if (node.id) this.ids.delete(node.id);
    this.focus(next, shown[at - 1] ? next.text.length : 0);
    if (!node.created) return;
    this.queue.push({
      node,
      kind: "delete",
      refused: () => null,
      run: async (base) => (node.id ? (await del(`/api/nodes/${node.id}?base_version=${base}`)).page_version : null),
    });
  }

  toggleMemory(node) {
    if (this.readOnly) return;
    const on = node.props.memory !== true;
    if (on) node.props.memory = true;
    else delete node.props.memory;
    this.paint(node);
    if (!node.created) return; // created with its props
    this.structural(node, "memory", (id, base) =>
      patch(`/api/nodes/${id}`, { props: { memory: on ? true : null }, base_version: base }));
  }

  // ---- focus and keys -----------------------------------------------------------------------

  focus(node, caret = null) {
    node.input.focus({ preventScroll: false });
    const at = caret === null ? node.input.value.length : Math.min(caret, node.input.value.length);
    node.input.setSelectionRange(at, at);
  }

  focusFirst() {
    const first = this.root.children[0];
    if (first) this.focus(first, 0);
  }

  onKeydown(event) {
    const li = event.target.closest("li.bullet");
    if (!li || event.isComposing) return;
    const node = li.bullet;
    const onText = event.target === node.input;
    const key = event.key;
    if (key === "Escape" && onText) {
      // Tab indents inside the outline; Escape steps out to the bullet's buttons.
      event.preventDefault();
      node.memory.focus();
      return;
    }
    if (!onText) return;
    // A key that moves between bullets or changes the tree sees the whole page: what is not
    // built yet is built first (once; it takes a moment on a page of tens of thousands).
    if (TREE_KEYS.has(key) || event.altKey || event.ctrlKey || event.metaKey) this.complete();
    const ro = this.readOnly;
    if (event.altKey && (key === "ArrowUp" || key === "ArrowDown")) {
      event.preventDefault();
      if (!ro) this.moveBy(node, key === "ArrowUp" ? -1 : 1);
    } else if (event.altKey && event.code === "KeyM") {
      event.preventDefault();
      this.toggleMemory(node);
    } else if ((event.ctrlKey || event.metaKey) && key === ".") {
      event.preventDefault();
      if (node.children.length) this.setCollapsed(node, !this.isCollapsed(node));
    } else if (key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      if (ro) return;
      this.splitAfter(node);
      if (this.onCommand && parseCommand(node.text)) this.onCommand(node);
    } else if (key === "Tab" && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      if (ro) return;
      if (event.shiftKey) this.outdent(node);
      else this.indent(node);
    } else if (key === "Backspace" && node.text === "" && !node.children.length && !ro) {
      event.preventDefault();
      this.remove(node);
    } else if (key === "ArrowUp" && !event.shiftKey && !node.input.value.slice(0, node.input.selectionStart).includes("\n")) {
      const shown = this.visible();
      const prev = shown[shown.indexOf(node) - 1];
      if (prev || this.onTop) {
        event.preventDefault();
        if (prev) this.focus(prev, node.input.selectionStart);
        else this.onTop();
      }
    } else if (key === "ArrowDown" && !event.shiftKey && !node.input.value.slice(node.input.selectionEnd).includes("\n")) {
      const shown = this.visible();
      const next = shown[shown.indexOf(node) + 1];
      if (next) {
        event.preventDefault();
        this.focus(next, node.input.selectionStart);
      }
    }
  }

  /**
   * An answer bullet the server wrote under `parent` ({id, text, refs}), shown as the last child;
   * one already shown is left as it is. Returns the bullet.
   */
  addAnswer(parent, { id, text, refs, run }) {
    if (this.byId.has(id)) return this.byId.get(id);
    if (this.isCollapsed(parent)) this.setCollapsed(parent, false);
    const props = { refs: Array.isArray(refs) ? refs : [] };
    if (run) props.run = run;
    return this.adopt(parent, { id, text: String(text ?? ""), props }, null);
  }

  /** Scroll to the bullet `id`, open its ancestors and highlight it for a moment. */
  reveal(id) {
    const node = this.byId.get(id);
    if (!node) return false;
    for (let up = node.parent; up && !up.isRoot; up = up.parent) {
      if (this.isCollapsed(up)) this.setCollapsed(up, false);
    }
    node.el.scrollIntoView({ block: "center" });
    node.el.classList.remove("is-flashed");
    void node.el.offsetWidth; // restart the highlight when the same bullet is opened again
    node.el.classList.add("is-flashed");
    clearTimeout(node.flashTimer);
    node.flashTimer = setTimeout(() => node.el.classList.remove("is-flashed"), FLASH_MS);
    // On a touch screen a focused field opens the keyboard over what was just scrolled to.
    if (!TOUCH) this.focus(node);
    return true;
  }

  /** Fit every field under `list` to its text: all writes, then all reads, then all writes. */
  fitAll(list = this.root.children) {
    if (SIZED_BY_CSS) return;
    const all = [];
    const walk = (nodes) => nodes.forEach((n) => { all.push(n); walk(n.children); });
    walk(list);
    for (const node of all) node.input.style.height = "auto";
    const heights = all.map((node) => node.input.scrollHeight);
    all.forEach((node, i) => { node.input.style.height = heights[i] ? `${heights[i]}px` : ""; });
  }
}

/**
 * The bullets of a page's data (`nodes` as the API sends them) whose text is a /rag command,
 * in reading order. Read from the data, not the outline, whose big pages are built later.
 */
export function commandsIn(nodes) {
  const out = [];
  const walk = (list) => list.forEach((data) => {
    if (data.id && parseCommand(data.text)) out.push(data);
    walk(data.children || []);
  });
  walk(nodes);
  return out;
}

/** Grow a bullet's field to its text: bullets are read, not scrolled. */
function fit(input) {
  if (SIZED_BY_CSS) return;
  input.style.height = "auto";
  // a field inside a folded bullet has no layout: it keeps its one row until unfolded
  input.style.height = input.scrollHeight ? `${input.scrollHeight}px` : "";
}

function collapsedKey(pageId) {
  return `subspace.collapsed.${pageId}`;
}

function loadCollapsed(pageId) {
  try {
    const ids = JSON.parse(localStorage.getItem(collapsedKey(pageId)) || "[]");
    return Array.isArray(ids) ? ids.filter((id) => typeof id === "string") : [];
  } catch {
    return [];
  }
}

function saveCollapsed(pageId, ids) {
  if (ids.size) localStorage.setItem(collapsedKey(pageId), JSON.stringify([...ids]));
  else localStorage.removeItem(collapsedKey(pageId));
}

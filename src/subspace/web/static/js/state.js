// What the app remembers between views: the knowledge base in use, and a small event bus
// through which one part tells the others that something changed.
//
// The base in use is the address's `?kb=` when it names one (so a reload, a shared link and
// Back show the same base), else the one used last in this browser, else the default.

const KB_KEY = "subspace.kb";
const bus = new EventTarget();

export const state = {
  knowledgeBases: [],
  get kbId() {
    const known = (id) => this.knowledgeBases.find((kb) => kb.id === id);
    const chosen = known(kbInAddress()) || known(localStorage.getItem(KB_KEY));
    return (chosen || this.knowledgeBases.find((kb) => kb.is_default) || this.knowledgeBases[0] || {}).id;
  },
  /** Use base `id` from now on (a page of that base was opened, say) and tell the listeners. */
  set kbId(id) {
    const before = localStorage.getItem(KB_KEY);
    localStorage.setItem(KB_KEY, id);
    if (before !== id) emit("kb-changed", { id });
  },
};

export function kbInAddress() {
  return new URLSearchParams(window.location.search).get("kb");
}

/** After a navigation: make the base the address names the one in use. */
export function syncKbWithAddress() {
  const id = state.kbId;
  if (id) state.kbId = id;
}

/** Tell listeners that `name` happened ("pages-changed", "kb-changed", "files-changed" …). */
export function emit(name, detail = {}) {
  bus.dispatchEvent(new CustomEvent(name, { detail }));
}

export function on(name, listener) {
  const wrapped = (event) => listener(event.detail);
  bus.addEventListener(name, wrapped);
  return () => bus.removeEventListener(name, wrapped);
}

// A view's first load, after it has subscribed to what changes it: when the load fails, the
// subscriptions are undone (`stop`) before the error goes on. Returns `stop`.
export async function firstLoad(load, stop) {
  try {
    await load();
  } catch (error) {
    stop();
    throw error;
  }
  return stop;
}

// What the app remembers between views: the knowledge base in use, and a small event bus
// through which one part tells the others that something changed.

const KB_KEY = "subspace.kb";
const bus = new EventTarget();

export const state = {
  knowledgeBases: [],
  get kbId() {
    const saved = localStorage.getItem(KB_KEY);
    const known = this.knowledgeBases.find((kb) => kb.id === saved);
    return (known || this.knowledgeBases.find((kb) => kb.is_default) || this.knowledgeBases[0] || {}).id;
  },
  set kbId(id) {
    localStorage.setItem(KB_KEY, id);
    emit("kb-changed", { id });
  },
};

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

// Asking instead of searching: filing "/rag <question>" (or /rag-pageindex, /rag-direct) starts
// a run on the server; its progress and answer bullets arrive as server-sent events. Answers are
// text: their citations are links drawn here from the bullet's props.refs, never from its text.

import { get, post } from "./api.js";
import { h } from "./dom.js";

export const STRATEGIES = ["rag", "rag-pageindex", "rag-direct"];
const COMMAND = /^\/(rag-pageindex|rag-direct|rag)\s+(\S[\s\S]*)$/;
const LIVE = new Set(["queued", "running"]);

/** The strategy and question of a command bullet ("/rag-direct Who …?"), or null. */
export function parseCommand(text) {
  const match = COMMAND.exec(text.trim());
  return match ? { strategy: match[1], question: match[2].trim() } : null;
}

/** File a run: POST /api/ask. `where` is {node_id} or {page_id} (or nothing: a Questions page). */
export function ask(question, strategy, where = {}) {
  return post("/api/ask", { question, strategy, ...where });
}

// Runs this tab started, by the node they answer under, so the page opened next streams them
// even before the run has written anything that names it.
const started = new Map();

export function remember(run) {
  if (run && run.node_id && run.run_id) started.set(run.node_id, run.run_id);
}

/**
 * The run still going under the command bullet `node` ({id, props, children}), or null:
 * one this tab started, one named by the bullet's props.run, or one named by an answer under it.
 */
export async function liveRunOf(node) {
  const mine = started.get(node.id);
  if (mine) {
    // followed from its start whatever its state: its events replay the bullets not shown yet
    started.delete(node.id);
    return { id: mine };
  }
  const candidates = [node.props?.run,
    ...node.children.map((child) => child.props?.run)].filter((id) => typeof id === "string");
  for (const id of [...new Set(candidates)]) {
    try {
      const run = await get(`/api/runs/${id}`);
      if (LIVE.has(run.status)) return run;
    } catch {
      // a run that cannot be read any more has nothing left to stream
    }
  }
  return null;
}

// ---- citations ------------------------------------------------------------------------------

const nodePages = new Map(); // node id → Promise of its page id

function pageOfNode(id) {
  if (!nodePages.has(id)) {
    nodePages.set(id, get(`/api/nodes/${id}`).then((node) => node.page_id, () => null));
  }
  return nodePages.get(id);
}

/** Where a ref opens; a node's address needs its page, asked of the server once. */
export async function refUrl(ref, { pageId = null, isLocal = () => false } = {}) {
  const [kind, id, n] = ref.split(":");
  if (kind === "page") return `/p/${id}`;
  if (kind === "file") return `/files/${id}${n !== undefined ? `#c${n}` : ""}`;
  if (kind === "mail") return `/mail/${id}`;
  if (kind === "node" || kind === "mem") {
    const page = isLocal(id) ? pageId : await pageOfNode(id);
    return page ? `/p/${page}#${id}` : null;
  }
  return null;
}

const REF_LABELS = { node: "bullet", mem: "memory", page: "page", file: "file", mail: "mail" };

/**
 * Small links after an answer bullet's text, one per ref: [1] [2] … Each gets its address once
 * the page of a cited bullet is known; a click before that waits for it.
 */
export function citationLinks(refs, context, navigate) {
  const links = refs.filter((ref) => typeof ref === "string").map((ref, i) => {
    const kind = ref.split(":")[0];
    const link = h("a", {
      class: "citation", "data-link": true, "data-ref": ref,
      title: `Source ${i + 1}: ${REF_LABELS[kind] || kind} ${ref}`,
    }, `[${i + 1}]`);
    const url = refUrl(ref, context);
    url.then((href) => {
      if (href) link.setAttribute("href", href);
      else link.classList.add("citation-gone");
    });
    link.addEventListener("click", async (event) => {
      if (link.hasAttribute("href")) return; // the app's link handling follows it
      event.preventDefault();
      const href = await url;
      if (href) navigate(href);
    });
    return link;
  });
  return links.length ? h("span", { class: "citations", "aria-label": "Sources" }, ...links) : null;
}

// ---- a run's stream ------------------------------------------------------------------------

/**
 * Follow run `runId` over server-sent events. Callbacks: onStep(step), onBullet({id, text, refs}),
 * onStatus(status, error), onDone(run). Returns a function that stops following.
 */
export function followRun(runId, { onStep, onBullet, onStatus, onDone }) {
  const source = new EventSource(`/api/runs/${runId}/events`);
  let finished = false;
  const data = (event) => {
    try {
      return JSON.parse(event.data || "{}");
    } catch {
      return {};
    }
  };
  source.addEventListener("step", (event) => onStep(data(event)));
  source.addEventListener("bullet", (event) => onBullet(data(event)));
  source.addEventListener("status", (event) => {
    const body = data(event);
    onStatus(body.status, body.error || null);
  });
  source.addEventListener("done", async (event) => {
    finished = true;
    source.close();
    const body = data(event);
    let run = body;
    try {
      run = await get(`/api/runs/${runId}`); // the final status, found and error, as stored
    } catch {
      // the event's own fields will do
    }
    onDone(run);
  });
  source.addEventListener("error", async () => {
    if (finished || source.readyState !== EventSource.CLOSED) return; // the browser reconnects
    try {
      const run = await get(`/api/runs/${runId}`);
      if (!LIVE.has(run.status)) onDone(run);
      else onStatus("running", "The answer's stream was interrupted; reload the page to follow it again.");
    } catch (error) {
      onStatus("failed", error.message);
    }
  });
  return () => {
    finished = true;
    source.close();
  };
}

export function cancelRun(runId) {
  return post(`/api/runs/${runId}/cancel`);
}

/** What a step says in the status line: "kb.search: 5 hits". */
export function stepLine(step) {
  const summary = step.summary || step.kind || "";
  return String(summary);
}

/** The status line's words for a run that ended. */
export function endLine(run) {
  if (run.status === "cancelled") return "Cancelled. The bullets written before it stopped stay.";
  if (run.status === "failed") return `The answer failed: ${(run.error || "the run stopped").replace(/\.$/, "")}.`;
  if (run.found === false) return "Answered: nothing in this workspace answers it.";
  return "Answered.";
}

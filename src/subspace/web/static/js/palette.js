// The search palette (Ctrl-K / ⌘K, or the Search button): results as you type, typed rows grouped
// by page, filter chips, typo corrections, notices when a leg did not run, and the fusion explained.

import { ask, remember } from "./answers.js";
import { post } from "./api.js";
import { keepFocusIn } from "./dialog.js";
import { append, clear, h, highlighted, TOUCH } from "./dom.js";
import { navigate } from "./router.js";
import { emit, state } from "./state.js";

const DEBOUNCE_MS = 70; // below the gap between keystrokes of a fast typist, above a key repeat
const LIMIT = 20; // rows per search: more than fit on screen, few enough to hydrate quickly
// The server's declaration of the search options (search/options.py), in the page's shell.
const OPTIONS = JSON.parse(document.getElementById("search-options").textContent);
const EXPAND_LIMIT = OPTIONS.max_limit; // SUBSPACE_MAX_SEARCH_LIMIT: the rows fetched for "+N more"
const KINDS = OPTIONS.kinds;
const BADGES = { page: "Page", node: "Bullet", mem: "Memory", file: "File", mail: "Mail" };
const LEG_NAMES = { lexical: "Keyword", vector: "Meaning" };
// A chip typed into the query: `kind:file` or `kb:Research`, taken when a space follows it or
// when the typing pauses (kind:page may still become kind:pages, kb:Work kb:Workshop).
const CHIP = /(^|\s)(kind|kb):(\S+)(?=\s|$)/gi;

let palette = null; // the open palette, or null

/** Open the palette, or focus its input if it is open already. */
export function openPalette() {
  if (palette) {
    palette.input.focus();
    palette.input.select();
    return;
  }
  palette = build(document.activeElement);
  document.body.append(palette.root);
  palette.input.focus();
  drawChips();
  drawHint();
}

function build(returnFocus) {
  const input = h("input", {
    type: "text", id: "palette-input", class: "palette-input", role: "combobox",
    "aria-expanded": "false", "aria-controls": "palette-list", "aria-autocomplete": "list", "aria-haspopup": "listbox",
    "aria-label": "Search", placeholder: "Search pages, bullets, files and mail…",
    autocomplete: "off", spellcheck: "false",
  });
  const list = h("ul", { id: "palette-list", class: "palette-list", role: "listbox", "aria-label": "Results" });
  const chips = h("div", { class: "palette-chips", role: "group", "aria-label": "Filters" });
  const notices = h("div", { class: "palette-notices", "aria-live": "polite" });
  // A region that scrolls on its own, so it takes the focus: the keyboard can scroll it too.
  const explainPanel = h("div", { class: "palette-explain", id: "palette-explain", hidden: true,
    role: "region", "aria-label": "How the results were ranked", tabindex: "0" });
  const explainToggle = h("button", {
    type: "button", class: "chip palette-explain-toggle", "aria-pressed": "false",
    "aria-controls": "palette-explain", onclick: () => toggleExplain(),
  }, "Explain");
  // The explanation opens beside the list (below it on a narrow screen): the list stays usable.
  const dialog = h("div", { class: "palette", role: "dialog", "aria-modal": "true", "aria-label": "Search" },
    h("div", { class: "palette-head" }, input,
      // For a touch screen; the keyboard has Esc, and Tab goes from the input to the filters.
      h("button", { type: "button", class: "quiet palette-close", tabindex: "-1", onclick: () => close() }, "Close")),
    h("div", { class: "palette-filters" }, chips, explainToggle),
    notices, h("div", { class: "palette-body" }, list, explainPanel),
    h("p", { class: "palette-keys muted" }, "↑ ↓ to move · Enter to open · ⇧Enter to ask a question · Esc to close"));
  const root = h("div", { class: "palette-backdrop", onmousedown: (event) => {
    if (event.target === root) close();
  } }, dialog);
  // Clicks on rows and buttons keep the focus in the input, where the keyboard works.
  dialog.addEventListener("mousedown", (event) => {
    if (event.target !== input && event.target.closest("[role=option], button")) event.preventDefault();
  });
  // A button pressed from the keyboard is redrawn by what it does: the focus goes back to the input.
  dialog.addEventListener("click", (event) => {
    if (event.target.closest("button") && palette) palette.input.focus();
  });
  dialog.addEventListener("keydown", onKeydown);
  input.addEventListener("input", onInput);
  return {
    root, dialog, input, list, chips, notices, explainPanel, explainToggle, returnFocus,
    kinds: new Set(), kbs: new Set(), explain: false, typos: true, answersOnly: false,
    timer: null, controller: null, response: null, options: [], active: -1, query: "",
  };
}

function close() {
  if (!palette) return;
  const { root, returnFocus } = palette;
  clearTimeout(palette.timer);
  palette.controller?.abort();
  palette = null;
  root.remove();
  const back = returnFocus && returnFocus.isConnected && returnFocus !== document.body
    ? returnFocus : document.getElementById("view");
  back?.focus();
}

// -- typing -------------------------------------------------------------------------------------

function onInput() {
  palette.typos = true;
  takeChips(false);
  schedule();
}

/** Move `kind:x` and `kb:name` out of the query into chips; one at the end only if `atEnd`. */
function takeChips(atEnd) {
  const { input } = palette;
  let changed = /^\s/.test(input.value); // a space after a chip, or before any word, means nothing
  const text = input.value.replace(CHIP, (whole, space, key, value, offset) => {
    if (!atEnd && offset + whole.length === input.value.length) return whole;
    if (key.toLowerCase() === "kind") {
      const kind = kindNamed(value);
      if (!kind) return whole;
      palette.kinds.add(kind);
    } else {
      const kb = kbNamed(value);
      if (!kb) return whole;
      palette.kbs.add(kb.id);
    }
    changed = true;
    return space;
  });
  if (!changed) return;
  input.value = text.replace(/^\s+/, "");
  drawChips();
}

/** The knowledge base named `value`, ignoring case; undefined when there is none. */
function kbNamed(value) {
  const name = value.toLowerCase();
  return state.knowledgeBases.find((kb) => kb.name.toLowerCase() === name);
}

function kindNamed(value) {
  const name = value.toLowerCase();
  const kind = OPTIONS.aliases[name] || name;
  return KINDS.some(([k]) => k === kind) ? kind : null;
}

/** Abort the request in flight at once, and search after a short pause in the typing. */
function schedule() {
  clearTimeout(palette.timer);
  palette.controller?.abort();
  palette.controller = null;
  palette.timer = setTimeout(run, DEBOUNCE_MS);
}

async function run() {
  const p = palette;
  if (!p) return;
  takeChips(true);
  const query = p.input.value.trim();
  if (!query && !p.kinds.size && !p.kbs.size) {
    p.response = null;
    drawHint();
    return;
  }
  const controller = new AbortController();
  p.controller = controller;
  const body = {
    query, group_by_page: true, limit: LIMIT, explain: p.explain, typos: p.typos,
    kinds: p.kinds.size ? [...p.kinds] : null,
    knowledge_bases: p.kbs.size ? [...p.kbs] : null,
    answers: p.answersOnly ? "only" : "include",
  };
  try {
    const response = await post("/api/search", body, { signal: controller.signal });
    if (controller.signal.aborted || palette !== p) return;
    p.controller = null;
    p.response = response;
    p.query = query;
    drawResults(response, query);
  } catch (error) {
    if (error.name === "AbortError" || palette !== p) return;
    // The rows of the last good search stay; the message says what to change.
    drawNotices([h("p", { class: "notice notice-error", role: "alert" }, error.message)]);
  }
}

// -- drawing ------------------------------------------------------------------------------------

function drawChips() {
  const p = palette;
  const chip = (label, pressed, toggle) => h("button", {
    type: "button", class: "chip", "aria-pressed": String(pressed), onclick: () => {
      toggle();
      drawChips();
      schedule();
    },
  }, label);
  const kinds = KINDS.map(([kind, label]) => chip(label, p.kinds.has(kind), () => {
    if (!p.kinds.delete(kind)) p.kinds.add(kind);
  }));
  // Earlier answers rank below their sources; this chip lists them alone.
  kinds.push(chip("Answers", p.answersOnly, () => { p.answersOnly = !p.answersOnly; }));
  // Every base is offered once there are several; a base typed as kb:<name> shows as a chip in
  // any case, so the filter is visible and can be removed.
  const offered = state.knowledgeBases.filter((kb) => state.knowledgeBases.length > 1 || p.kbs.has(kb.id));
  const bases = offered.map((kb) => chip(kb.name, p.kbs.has(kb.id), () => {
    if (!p.kbs.delete(kb.id)) p.kbs.add(kb.id);
  }));
  clear(p.chips).append(...kinds, ...(bases.length ? [h("span", { class: "chip-gap" })] : []), ...bases);
}

function drawHint() {
  const p = palette;
  setOptions([]);
  clear(p.list).append(h("li", { class: "palette-empty muted", role: "presentation" },
    "Type to search. Filter with kind:file, kind:mail … or kb:<name>."));
  delete p.list.dataset.query;
  drawNotices([]);
  p.explainPanel.hidden = true;
  p.dialog.classList.remove("palette-explaining");
}

function drawNotices(items) {
  clear(palette.notices).append(...items);
}

function drawResults(response, query) {
  const p = palette;
  const notices = [];
  const corrected = correctedQuery(query, response.corrections || {});
  if (corrected) {
    notices.push(h("p", { class: "palette-correction" }, "Showing results for ",
      h("strong", {}, corrected), ". ",
      h("button", { type: "button", class: "link-button", onclick: () => {
        p.typos = false;
        schedule();
      } }, `Search for “${query}” instead`)));
  }
  for (const line of degradedNotices(response)) {
    notices.push(h("p", { class: "notice palette-degraded", role: "status" }, line));
  }
  if (response.pending_embeddings > 0) {
    const n = response.pending_embeddings;
    notices.push(h("p", { class: "palette-pending muted" },
      `${n.toLocaleString()} ${n === 1 ? "item waits" : "items wait"} for embeddings: search by meaning may miss ${n === 1 ? "it" : "them"} for now, search by words finds ${n === 1 ? "it" : "them"}.`));
  }
  for (const name of unknownBases(p.input.value)) {
    const names = state.knowledgeBases.map((kb) => kb.name).join(", ");
    notices.push(h("p", { class: "notice notice-error palette-unknown-kb", role: "status" },
      `No knowledge base named “${name}”. The bases are: ${names}.`));
  }
  drawNotices(notices);
  const items = [];
  const elements = [];
  response.rows.forEach((row) => {
    const option = rowOption(row, items.length);
    items.push({ el: option, open: () => openRow(row) });
    elements.push(option);
    if (row.more_on_page > 0) {
      const more = moreOption(row, items.length);
      items.push(more.item);
      elements.push(more.el);
    }
  });
  if (!elements.length) elements.push(noMatches(response, query, corrected));
  // A question gets an answer as well as hits: the Ask row, first, files "/rag <question>". The
  // highlight stays on the best hit, so Enter opens it and ⇧Enter asks.
  // On a touch screen, with no ⇧Enter to press, any query can be asked by tapping the row.
  p.askable = Boolean(query) && (TOUCH || response.is_question || query.endsWith("?"));
  if (p.askable) {
    const el = h("li", { role: "option", "aria-selected": "false", class: "palette-row palette-ask" },
      h("span", { class: "badge badge-ask" }, "Ask /rag"),
      h("span", { class: "row-body" }, h("span", { class: "row-title" }, query),
        h("span", { class: "row-crumb" }, "An answer from your sources, with citations")),
      h("kbd", {}, "⇧ Enter"));
    // what the input holds when it is picked: the row may be from a search of fewer words
    const item = { el, open: () => askQuestion(p.input.value.trim() || query) };
    el.addEventListener("click", () => item.open());
    items.unshift(item);
    elements.unshift(el);
  }
  clear(p.list).append(...elements);
  p.list.dataset.query = query;
  setOptions(items, p.askable && items.length > 1 ? 1 : 0);
  drawExplain();
}

/** The bases a typed kb:<name> names that do not exist. */
function unknownBases(text) {
  return [...text.matchAll(CHIP)]
    .filter(([, , key]) => key.toLowerCase() === "kb")
    .map(([, , , value]) => value)
    .filter((value) => !kbNamed(value));
}

/** The empty list: what found nothing, and what to try. */
function noMatches(response, query, corrected) {
  const tips = [];
  if (palette.kinds.size || palette.kbs.size || palette.answersOnly) tips.push("remove a filter");
  tips.push("try fewer or other words");
  if (query) tips.push(TOUCH ? "tap Ask to ask it as a question" : "ask it as a question with ⇧ Enter");
  return h("li", { class: "palette-empty palette-nomatch", role: "presentation" },
    h("span", { class: "nomatch-mark", "aria-hidden": "true" }, "∅"),
    h("span", {}, h("strong", {}, emptyLine(response, query, corrected)),
      h("span", { class: "muted" }, ` ${tips[0][0].toUpperCase()}${tips[0].slice(1)}${tips.slice(1).map((t) => `, or ${t}`).join("")}.`)));
}

/** What an empty list says: no matches for the query (as corrected), and under which filters. */
function emptyLine(response, query, corrected) {
  const p = palette;
  if (!query) return "Nothing matches these filters.";
  const filtered = p.kinds.size || p.kbs.size || p.answersOnly ? " with these filters" : "";
  const searched = corrected ? ` (searched as “${corrected}”)` : "";
  const floor = response.below_floor > 0 ? "; nothing close enough in meaning either" : "";
  return `No matches for “${query}”${searched}${filtered}${floor}.`;
}

function correctedQuery(query, corrections) {
  if (!Object.keys(corrections).length) return "";
  return query.split(/(\s+)/).map((word) => corrections[word] ?? word).join("");
}

/** What the user should know about a leg that did not run ("Keyword results only: …") or
 * ran without its index (every match is still found). */
function degradedNotices(response) {
  const lines = [];
  for (const entry of response.degraded || []) {
    const [leg, ...rest] = entry.split(": ");
    const reason = rest.join(": ");
    if (leg === "vector") {
      const why = reason === "no embedding provider" ? "no embedding provider is set up"
        : reason === "timeout" ? "the embedding provider did not answer in time"
        : reason.startsWith("failed") ? `the vector search failed ${reason.slice(7)}`.trim()
        : `the embedding provider did not answer (${reason})`;
      lines.push(`Keyword results only: ${why}.`);
    } else if (reason.startsWith("ranked in Postgres")) {
      lines.push("Keyword search is running without its index while the index is rebuilt: every match is found, more slowly.");
    } else if (reason.startsWith("the lexical index is")) {
      lines.push("The keyword index is catching up with recent writes: they are found all the same.");
    } else {
      lines.push(`Meaning-based results only: the keyword search ${reason}.`);
    }
  }
  return lines;
}

/** A row's title with the words that matched marked (a file's name, a mail's subject). */
function titleOf(row, fallback) {
  if (!row.title) return [fallback];
  return highlighted(row.title, row.title_highlights || []);
}

function rowOption(row, index, sub = false) {
  const type = row.type in BADGES ? row.type : "node";
  const parts = [row.answer
    ? h("span", { class: "badge badge-answer", title: "Written by an earlier answer: its sources rank above it" }, "Answer")
    : h("span", { class: `badge badge-${type}` }, BADGES[type])];
  const body = h("span", { class: "row-body" });
  if (type === "page") {
    body.append(h("span", { class: "row-title" }, ...highlighted(row.passage || row.title, row.highlights)));
  } else if (type === "node" || type === "mem") {
    const crumb = row.breadcrumb && row.breadcrumb.length ? row.breadcrumb : [row.title || "Untitled"];
    body.append(
      h("span", { class: "row-crumb" }, h("span", { class: "row-page" }, ...titleOf(row, crumb[0])),
        ...crumb.slice(1).flatMap((c) => [h("span", { class: "crumb-sep", "aria-hidden": "true" }, " › "), c])),
      h("span", { class: "row-passage" }, ...highlighted(row.passage, row.highlights)));
  } else if (type === "file") {
    body.append(h("span", { class: "row-title" }, ...titleOf(row, "Untitled file")),
      h("span", { class: "row-passage" }, ...highlighted(row.passage, row.highlights)));
  } else {
    body.append(h("span", { class: "row-title" }, ...titleOf(row, "(no subject)")),
      h("span", { class: "row-sender muted" }, row.sender || ""),
      h("span", { class: "row-passage" }, ...highlighted(row.passage, row.highlights)));
  }
  if (row.source) {
    // A line of its own: beside the passage it would squeeze it on a phone.
    body.append(h("span", { class: "row-source muted", title: `Kept in sync from the source “${row.source}”` }, `from ${row.source}`));
  }
  parts.push(body);
  if (state.knowledgeBases.length > 1 && row.knowledge_base) {
    parts.push(h("span", { class: "row-kb muted" }, row.knowledge_base));
  }
  return h("li", {
    id: `palette-opt-${index}`, role: "option", "aria-selected": "false",
    class: `palette-row row-${type}${sub ? " row-sub" : ""}`, dataset: { ref: row.ref },
    onclick: () => openRow(row),
  }, ...parts);
}

/** "+N more" under a page's best row; Enter or a click lists the others in place. */
function moreOption(row, index) {
  const n = row.more_on_page;
  const el = h("li", {
    id: `palette-opt-${index}`, role: "option", "aria-selected": "false", class: "palette-more",
    "aria-label": `${n} more on this page`,
  }, `+${n} more`);
  const item = { el, open: () => expand(row, item) };
  el.addEventListener("click", () => item.open());
  return { el, item };
}

async function expand(row, item) {
  const p = palette;
  item.el.textContent = "Loading…";
  const body = {
    query: p.query, group_by_page: false, limit: EXPAND_LIMIT, typos: p.typos,
    kinds: [...(p.kinds.size ? p.kinds : new Set(["page", "node", "memory"]))].filter((k) => k !== "file" && k !== "mail"),
    knowledge_bases: p.kbs.size ? [...p.kbs] : null,
    answers: p.answersOnly ? "only" : "include",
  };
  let response;
  try {
    response = await post("/api/search", body);
  } catch (error) {
    item.el.textContent = error.message;
    return;
  }
  if (palette !== p || !item.el.isConnected) return;
  const others = response.rows.filter((r) => r.page_id === row.page_id && r.ref !== row.ref);
  const index = p.options.indexOf(item);
  const added = others.map((r) => ({ row: r }));
  const beyond = row.more_on_page - others.length;
  const items = added.map(({ row: r }) => ({ el: rowOption(r, 0, true), open: () => openRow(r) }));
  if (beyond > 0) {
    const el = h("li", { role: "option", "aria-selected": "false", class: "palette-more" },
      `${beyond} more on this page: open it`);
    const open = () => openRow({ type: "page", page_id: row.page_id, id: row.page_id });
    el.addEventListener("click", open);
    items.push({ el, open });
  }
  item.el.replaceWith(...items.map((i) => i.el));
  const options = [...p.options.slice(0, index), ...items, ...p.options.slice(index + 1)];
  setOptions(options, index);
}

function setOptions(items, active = items.length ? 0 : -1) {
  const p = palette;
  p.options = items;
  items.forEach((item, i) => { item.el.id = `palette-opt-${i}`; });
  p.input.setAttribute("aria-expanded", String(items.length > 0));
  setActive(Math.min(active, items.length - 1));
}

function setActive(index) {
  const p = palette;
  p.options[p.active]?.el.setAttribute("aria-selected", "false");
  p.active = index;
  const item = p.options[index];
  if (!item) {
    p.input.removeAttribute("aria-activedescendant");
    return;
  }
  item.el.setAttribute("aria-selected", "true");
  p.input.setAttribute("aria-activedescendant", item.el.id);
  item.el.scrollIntoView({ block: "nearest" });
}

/** Where a row opens: a bullet on its page, a file at the matching passage, a mail. */
export function rowUrl(row) {
  if (row.type === "node" || row.type === "mem") return `/p/${row.page_id}#${row.id}`;
  if (row.type === "page") return `/p/${row.page_id || row.id}`;
  if (row.type === "file") {
    const chunk = /^file:[^:]+:(\d+)$/.exec(row.ref || "");
    return `/files/${row.file_id || row.id}${chunk ? `#c${chunk[1]}` : ""}`;
  }
  return `/mail/${row.mail_id || row.id}`;
}

/**
 * File "/rag <question>" on the open page (its view takes it, so the bullet streams in place), or
 * without a page (the server files it on a "Questions" page), then open it at the bullet.
 */
async function askQuestion(question) {
  const p = palette;
  if (!p || p.asking) return;
  p.asking = true;
  drawNotices([h("p", { class: "palette-pending muted", role: "status" }, "Asking…")]);
  const detail = { question, strategy: "rag", taken: null };
  emit("ask", detail);
  let run;
  try {
    run = await (detail.taken || ask(question, "rag"));
  } catch (error) {
    p.asking = false;
    if (palette === p) drawNotices([h("p", { class: "notice notice-error", role: "alert" }, error.message)]);
    return;
  }
  remember(run);
  emit("pages-changed"); // the question may have made a Questions page
  if (palette === p) close();
  navigate(`/p/${run.page_id}#${run.node_id}`);
}

function openRow(row) {
  const url = rowUrl(row);
  close();
  navigate(url);
}

// -- keys ---------------------------------------------------------------------------------------

function onKeydown(event) {
  const p = palette;
  if (!p) return;
  if (event.key === "Escape") {
    event.preventDefault();
    event.stopPropagation();
    close();
  } else if ((event.key === "ArrowDown" || event.key === "ArrowUp") && event.target === p.input) {
    event.preventDefault();
    const n = p.options.length;
    if (!n) return;
    const step = event.key === "ArrowDown" ? 1 : -1;
    setActive(p.active < 0 ? (step > 0 ? 0 : n - 1) : (p.active + step + n) % n);
  } else if (event.key === "Enter" && event.shiftKey && event.target === p.input) {
    event.preventDefault();
    const query = p.input.value.trim();
    // a question: the search said so, or it ends with "?" (asked before the search came back)
    if ((p.askable && query === p.query) || query.endsWith("?")) askQuestion(query);
  } else if (event.key === "Enter" && event.target === p.input) {
    event.preventDefault();
    p.options[p.active]?.open();
  } else if (event.key === "Backspace" && event.target === p.input && !p.input.value
      && p.input.selectionStart === 0) {
    removeLastChip();
  } else if (event.key === "Tab") {
    keepFocusIn(palette.dialog, event);
  }
}

function removeLastChip() {
  const p = palette;
  const last = [...p.kbs].pop();
  if (last) p.kbs.delete(last);
  else if (p.kinds.size) p.kinds.delete([...p.kinds].pop());
  else return;
  drawChips();
  schedule();
}

// -- explain ------------------------------------------------------------------------------------

function toggleExplain() {
  const p = palette;
  p.explain = !p.explain;
  p.explainToggle.setAttribute("aria-pressed", String(p.explain));
  schedule();
}

function label(row) {
  return row.type === "node" || row.type === "mem" ? row.passage : row.title || row.passage;
}

/**
 * Why each row is shown, one sentence each ("Found by its words: 1st, for “crate”; by meaning:
 * 12th; its title holds these words."), then behind a button the numbers: the keyword list, the
 * meaning list and the fused list side by side, with ranks and terms.
 */
function drawExplain() {
  const p = palette;
  const response = p.response;
  p.explainPanel.hidden = !p.explain || !response;
  p.dialog.classList.toggle("palette-explaining", !p.explainPanel.hidden);
  if (p.explainPanel.hidden) return;
  const why = h("ol", { class: "explain-why" }, ...response.rows.map((r) => h("li", {},
    h("span", { class: "explain-label" }, label(r)), h("span", { class: "explain-reason" }, reason(r)))));
  const numbers = h("div", { class: "explain-numbers", id: "explain-numbers", hidden: !p.explainNumbers });
  const toggle = h("button", {
    type: "button", class: "quiet explain-numbers-toggle", "aria-expanded": String(Boolean(p.explainNumbers)),
    "aria-controls": "explain-numbers",
    onclick: () => {
      p.explainNumbers = !p.explainNumbers;
      numbers.hidden = !p.explainNumbers;
      toggle.setAttribute("aria-expanded", String(p.explainNumbers));
    },
  }, "The numbers behind it");
  // A weight is shown only where it changes something: beside another leg, and not 1.
  const legs = ["lexical", "vector"].filter((leg) => response.legs[leg] && !response.legs[leg].error);
  const columns = ["lexical", "vector"].map((leg) => {
    const report = response.legs[leg];
    const ranked = response.leg_rows?.[leg] || [];
    const status = !report ? "did not run in this mode"
      : report.error ? `did not run: ${report.error}`
      : `${report.candidates} candidates, ${report.ms} ms${legs.length > 1 && report.weight !== 1 ? `, weight ${report.weight}` : ""}${report.ranker ? `, ${report.ranker}` : ""}`;
    return h("section", { class: `explain-col explain-${leg}` },
      h("h3", {}, `${LEG_NAMES[leg]} (${leg})`), h("p", { class: "muted" }, status),
      h("ol", {}, ...ranked.map((r) => h("li", {},
        h("span", { class: "rank" }, `#${r.legs[leg].rank}`), " ", label(r),
        h("span", { class: "muted" }, ` ${r.legs[leg].score.toPrecision(3)}`,
          ...Object.entries(r.legs).filter(([other]) => other !== leg)
            .map(([other, s]) => ` · ${LEG_NAMES[other] || other} #${s.rank}`),
          ` · fused ${r.score.toFixed(4)}`)))));
  });
  const fused = h("section", { class: "explain-col explain-fused" },
    h("h3", {}, "Fused"),
    h("p", { class: "muted" }, response.rows[0]?.explain?.formula || "weight / (60 + rank), summed over the legs"),
    h("ol", {}, ...response.rows.map((r) => h("li", {},
      label(r), " ", h("span", { class: "muted" }, r.score.toFixed(4)),
      h("ul", { class: "terms" }, ...(r.explain?.terms || []).map((t) => h("li", {},
        `${LEG_NAMES[t.leg] || t.leg} #${t.rank}: ${t.weight} / (60 + ${t.rank}) = ${t.value.toFixed(4)}`))),
      r.explain?.tie ? h("p", { class: "muted" }, `Tied with ${r.explain.tie.group_size - 1} other(s); decided by ${r.explain.tie.decided_by}.`) : null))));
  // Each step of the search, timed (search/steps.py), in the order it ran.
  const steps = Object.entries(response.steps || {})
    .map(([step, ms]) => `${step} ${ms.toFixed(1)}`).join(" · ");
  append(numbers, [
    h("p", { class: "muted" }, "Each leg's own first rows, and the fused list the palette shows."),
    steps ? h("p", { class: "muted explain-steps" }, `Steps (ms): ${steps}.`) : null,
    h("div", { class: "explain-grid" }, ...columns, fused)]);
  clear(p.explainPanel).append(h("h3", { class: "explain-head" }, "Why these results"), why, toggle, numbers);
}

/** One row's reason to be here, in words. */
function reason(row) {
  const parts = [];
  const words = matchedWords(row.passage, row.highlights);
  const inTitle = matchedWords(row.title, row.title_highlights);
  const lexical = row.legs?.lexical;
  const vector = row.legs?.vector;
  if (lexical) {
    const all = [...new Set([...inTitle, ...words])];
    parts.push(`found by its words: ${ordinal(lexical.rank)}${all.length ? `, for ${all.map((w) => `“${w}”`).join(", ")}` : ""}`);
  }
  if (vector) parts.push(`${lexical ? "by meaning" : "found by meaning alone"}: ${ordinal(vector.rank)}`);
  if (lexical && inTitle.length && words.every((w) => inTitle.includes(w))) {
    parts.push(`its ${row.type === "mail" ? "subject" : "title"} holds ${inTitle.length > 1 ? "these words" : "the word"}`);
  }
  if (row.more_on_page) parts.push(`${row.more_on_page} more on the page`);
  if (row.explain?.tie) parts.push(`tied with ${row.explain.tie.group_size - 1} other${row.explain.tie.group_size > 2 ? "s" : ""}`);
  const text = parts.join("; ") || "listed by the filters alone";
  return `${text[0].toUpperCase()}${text.slice(1)}.`;
}

/** The distinct words a text's highlights mark, lower-cased. */
function matchedWords(text, highlights) {
  const words = (highlights || []).map(([start, end]) => (text || "").slice(start, end).toLowerCase());
  return [...new Set(words.filter(Boolean))];
}

function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th";
  return `${n}${suffix}`;
}

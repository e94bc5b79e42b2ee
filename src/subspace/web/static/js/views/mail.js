// The Mail view: the selected knowledge base's messages, newest first, and importing .eml
// messages or .mbox mailboxes by a button or a drop, with a report of each import.

import { get, query } from "../api.js";
import { clear, formatDate, h } from "../dom.js";
import { firstLoad, on, state } from "../state.js";
import { installDropUpload, uploadButton } from "../upload.js";

const IMPORT = "/api/mail/import";

// How each import outcome is said in the one-line summary.
const OUTCOMES = { added: "imported", unchanged: "already stored", skipped: "skipped", failed: "failed" };

const NOUNS = { mail: ["message", "messages"], file: ["attachment", "attachments"] };

/**
 * One line for an import's answer, messages and attachments counted apart:
 * "1 message imported, 1 attachment imported; 1 message already stored".
 */
export function describeImport(data) {
  const counts = new Map(); // "added" → Map(kind → n), in the order they come
  for (const row of data?.rows || []) {
    const kind = row.kind in NOUNS ? row.kind : "mail";
    if (!counts.has(row.outcome)) counts.set(row.outcome, new Map());
    const byKind = counts.get(row.outcome);
    byKind.set(kind, (byKind.get(kind) || 0) + 1);
  }
  const parts = [...counts].map(([outcome, byKind]) => [...byKind]
    .map(([kind, n]) => `${n} ${NOUNS[kind][n === 1 ? 0 : 1]} ${OUTCOMES[outcome] || outcome}`).join(", "));
  return parts.length ? parts.join("; ") : "Nothing imported.";
}

function importReport(results) {
  const rows = results.flatMap((result) => (result.data?.rows || []).filter((r) => r.outcome !== "added"));
  if (!rows.length) return null;
  return h("details", { class: "import-report", open: true },
    h("summary", {}, "Skipped or failed"),
    h("ul", {}, rows.map((r) => h("li", {}, h("span", { class: `outcome outcome-${r.outcome}` }, OUTCOMES[r.outcome] || r.outcome), " ",
      r.source, r.detail ? ` — ${r.detail}` : ""))));
}

export async function render(container, _params, { signal }) {
  document.title = "Mail · Subspace";
  const uploads = h("ul", { class: "upload-list", "aria-live": "polite", "aria-label": "Imports" });
  const report = h("div", { class: "import-reports" });
  const list = h("div", { class: "mail-list-wrap" });

  let loads = 0;

  async function load() {
    const mine = ++loads;
    const mail = await get(`/api/mail${query({ kb_id: state.kbId })}`, { signal });
    // A load started later (an import finished meanwhile) draws the newer list.
    if (signal.aborted || mine !== loads) return;
    if (!mail.length) {
      clear(list).append(h("div", { class: "empty-state" }, h("strong", {}, "No mail yet"),
        h("p", {}, "Import .eml messages or .mbox mailboxes, or drop them anywhere on this view.")));
      return;
    }
    clear(list).append(h("table", { class: "mail-table" },
      h("thead", {}, h("tr", {}, ["From", "Subject", "Date"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, mail.map((m) => h("tr", { dataset: { mailId: m.id } },
        h("td", { class: "mail-from name-cell", title: m.sender }, m.sender),
        h("td", { class: "name-cell" }, h("a", { href: `/mail/${m.id}`, "data-link": true, class: "mail-subject", title: m.subject || "" }, m.subject || "(no subject)"),
          // On a phone the sender's column gives way to this line.
          h("div", { class: "muted mail-facts" }, m.sender)),
        h("td", { class: "muted" }, formatDate(m.sent_at)))))));
  }
  const reload = () => load().catch(() => {});
  const imported = (results) => {
    const el = importReport(results);
    report.replaceChildren(...(el ? [el] : []));
  };
  const options = { list: uploads, endpoint: IMPORT, describe: describeImport, onDone: imported };

  clear(container).append(
    h("div", { class: "view-head" }, h("h1", {}, "Mail"),
      uploadButton("Import mail", { ...options, accept: ".eml,.mbox,message/rfc822,application/mbox" })),
    h("p", { class: "muted drop-hint" }, "Drop .eml or .mbox files anywhere on this view to import them."),
    uploads, report, list);
  // Ready for drops as soon as the view shows, before its list has loaded; an import that
  // finishes before then loads the list again.
  const undrop = installDropUpload(container, options);
  const offKb = on("kb-changed", () => { uploads.replaceChildren(); report.replaceChildren(); reload(); });
  const offMail = on("mail-changed", reload);
  const stop = () => {
    undrop();
    offKb();
    offMail();
  };
  return firstLoad(load, stop);
}

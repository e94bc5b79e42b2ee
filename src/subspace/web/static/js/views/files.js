// The Files view: the selected knowledge base's files with their status kept live, and
// uploads by a button or by dropping files anywhere on the view.

import { get, query } from "../api.js";
import { clear, formatDate, h } from "../dom.js";
import { firstLoad, on, state } from "../state.js";
import { formatSize, installDropUpload, typeName, uploadButton } from "../upload.js";

const POLL_MS = 1000; // how often statuses are read again while a file is still processing

export function statusCell(file) {
  const label = file.status === "failed" ? "failed" : file.status;
  return h("span", { class: `file-status status-${file.status}` }, label,
    file.status === "failed" && file.status_reason ? h("span", { class: "status-reason" }, `: ${file.status_reason}`) : null);
}

function fileRow(file) {
  return h("tr", { dataset: { fileId: file.id } },
    // A document's own title names it when it has one; its file name stays beneath.
    h("td", { class: "name-cell" }, h("a", { href: `/files/${file.id}`, "data-link": true, class: "file-name", title: file.title ? `${file.title} (${file.name})` : file.name }, file.title || file.name),
      file.title ? h("div", { class: "muted file-source" }, file.source_path || file.name) : null,
      // On a phone the size and date columns give way to this line.
      h("div", { class: "muted file-facts" }, `${formatSize(file.size)} · ${formatDate(file.created_at)}`)),
    h("td", { class: "muted type-cell", title: file.content_type || "" }, typeName(file.content_type)),
    h("td", { class: "num" }, formatSize(file.size)),
    h("td", {}, statusCell(file), file.enabled ? null : h("span", { class: "pill" }, "disabled"),
      file.archived_at ? h("span", { class: "pill" }, "archived") : null),
    h("td", { class: "muted" }, formatDate(file.created_at)));
}

export async function render(container, _params, { signal }) {
  document.title = "Files · Subspace";
  const uploads = h("ul", { class: "upload-list", "aria-live": "polite", "aria-label": "Uploads" });
  const table = h("div", { class: "file-table-wrap" });
  let timer = null;
  let loads = 0;

  async function load() {
    clearTimeout(timer);
    const mine = ++loads;
    const files = await get(`/api/files${query({ kb_id: state.kbId })}`, { signal });
    // A load started later (an upload finished meanwhile) draws the newer list.
    if (signal.aborted || mine !== loads) return;
    if (!files.length) {
      clear(table).append(h("div", { class: "empty-state" }, h("strong", {}, "No files yet"),
        h("p", {}, "Upload PDF, Word, HTML, Markdown or text files, or drop them anywhere on this view.")));
    } else {
      clear(table).append(h("table", { class: "file-table" },
        h("thead", {}, h("tr", {}, ["Name", "Type", "Size", "Status", "Added"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, files.map(fileRow))));
    }
    clearTimeout(timer);
    if (files.some((f) => f.status === "processing")) timer = setTimeout(reload, POLL_MS);
  }
  const reload = () => load().catch(() => {});

  clear(container).append(
    h("div", { class: "view-head" }, h("h1", {}, "Files"),
      uploadButton("Upload files", { list: uploads })),
    h("p", { class: "muted drop-hint" }, "Drop files anywhere on this view to upload them."),
    uploads,
    table,
  );
  // Ready for drops as soon as the view shows, before its list has loaded; an upload that
  // finishes before then loads the list again.
  const undrop = installDropUpload(container, { list: uploads });
  const offKb = on("kb-changed", () => { uploads.replaceChildren(); reload(); });
  const offFiles = on("files-changed", reload);
  const stop = () => {
    clearTimeout(timer);
    undrop();
    offKb();
    offFiles();
  };
  return firstLoad(load, stop);
}

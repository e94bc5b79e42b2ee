// One file: its state, tags and actions, and its extracted text in the indexer's chunks
// (ids c0, c1, …) so a search result's `/files/<id>#c<n>` lands on its passage.

import { get, patch, post, del } from "../api.js";
import { append, clear, formatDate, h, toast } from "../dom.js";
import { renderTagsPanel } from "../tags.js";
import { formatSize } from "../upload.js";
import { statusCell } from "./files.js";

const POLL_MS = 1000; // how often the status is read again while the text is being extracted
const OPPOSITE = { Disable: "Enable", Enable: "Disable", Archive: "Restore", Delete: "Restore", Restore: "Archive" };

/** Scroll to the chunk the address names (#c<n>) and highlight it; false when there is none. */
function showTarget(container) {
  for (const el of container.querySelectorAll(".chunk-target")) el.classList.remove("chunk-target");
  const match = /^#c(\d+)$/.exec(window.location.hash);
  if (!match) return false;
  const chunk = container.querySelector(`#c${match[1]}`);
  if (!chunk) return false;
  chunk.classList.add("chunk-target");
  chunk.scrollIntoView({ block: "center" });
  chunk.focus({ preventScroll: true });
  return true;
}

function stateLine(file) {
  const parts = [];
  if (file.deleted_at) parts.push(`deleted ${formatDate(file.deleted_at)}`);
  else if (file.archived_at) parts.push(`archived ${formatDate(file.archived_at)}`);
  if (!file.enabled) parts.push("disabled: hidden from search");
  return parts.length ? h("p", { class: "notice file-state", role: "status" }, `This file is ${parts.join(", ")}.`) : null;
}

export async function render(container, { fileId }, { signal }) {
  let timer = null;
  const onHash = () => showTarget(container);

  async function load(focusAction) {
    clearTimeout(timer);
    const [file, chunks] = await Promise.all([
      get(`/api/files/${fileId}`, { signal }),
      get(`/api/files/${fileId}/chunks`, { signal }),
    ]);
    if (signal.aborted) return;
    document.title = `${file.title || file.name} · Subspace`;
    const act = (label, run) => h("button", { type: "button", dataset: { action: label },
      onclick: async () => {
        try {
          await run();
          await load(label);
        } catch (error) {
          toast(error.message, { error: true });
        }
      } }, label);
    const hidden = file.deleted_at || file.archived_at;
    const actions = h("div", { class: "file-actions", role: "group", "aria-label": "File actions" },
      h("a", { class: "button", href: `/api/files/${file.id}/content`, download: file.name }, "Download"),
      file.enabled
        ? act("Disable", () => patch(`/api/files/${file.id}`, { enabled: false }))
        : act("Enable", () => patch(`/api/files/${file.id}`, { enabled: true })),
      hidden ? act("Restore", () => post(`/api/files/${file.id}/restore`)) : null,
      !hidden ? act("Archive", () => post(`/api/files/${file.id}/archive`)) : null,
      !file.deleted_at ? act("Delete", () => del(`/api/files/${file.id}`)) : null);
    const meta = h("dl", { class: "file-meta" },
      h("dt", {}, "Status"), h("dd", {}, statusCell(file)),
      h("dt", {}, "Size"), h("dd", {}, formatSize(file.size)),
      h("dt", {}, "Type"), h("dd", {}, file.content_type || "unknown"),
      h("dt", {}, "Added"), h("dd", {}, formatDate(file.created_at)),
      file.mail_id ? [h("dt", {}, "From mail"), h("dd", {}, h("a", { href: `/mail/${file.mail_id}`, "data-link": true }, "the message"))] : null);
    const tags = h("div", { class: "file-tags" });
    let text;
    if (chunks.length) {
      text = h("div", { class: "chunks" }, chunks.map((chunk) =>
        h("section", { id: `c${chunk.n}`, class: chunk.enabled ? "chunk" : "chunk chunk-disabled", tabindex: "-1",
          "aria-label": `Passage ${chunk.n + 1}` }, chunk.text)));
      if (file.text_truncated) text.append(h("p", { class: "muted" }, "The text was cut at the extraction limit."));
    } else if (file.status === "processing") {
      text = h("p", { class: "muted" }, "Extracting the text…");
    } else {
      text = h("p", { class: "muted" }, file.status === "failed" ? "No text: the extraction failed." : "This file holds no text.");
    }
    // append() from dom.js, not Element.append: it leaves out the parts that are null.
    append(clear(container), [
      h("p", {}, h("a", { href: "/files", "data-link": true }, "← Files")),
      h("h1", { class: "file-title" }, file.title || file.name),
      file.title ? h("p", { class: "muted file-source" }, file.source_path || file.name) : null,
      stateLine(file), actions, meta, tags,
      h("h2", {}, "Text"), text]);
    await renderTagsPanel(tags, { kind: "file", id: file.id, kbId: file.kb_id });
    if (focusAction) {
      // The button pressed may have turned into its opposite (Disable → Enable): focus that.
      const next = container.querySelector(`.file-actions [data-action="${focusAction}"]`) ||
        container.querySelector(`.file-actions [data-action="${OPPOSITE[focusAction]}"]`);
      (next ||
        container.querySelector(".file-actions button") || container).focus();
    } else {
      showTarget(container);
    }
    if (file.status === "processing") timer = setTimeout(() => load().catch(() => {}), POLL_MS);
  }

  await load();
  window.addEventListener("hashchange", onHash);
  return () => {
    clearTimeout(timer);
    window.removeEventListener("hashchange", onHash);
  };
}

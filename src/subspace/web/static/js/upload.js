// Uploading files: one progress bar per file (XMLHttpRequest reports upload progress, fetch
// does not), from a button or from files dropped on an element.

import { get } from "./api.js";
import { h } from "./dom.js";
import { emit, state } from "./state.js";

const FOLLOW_MS = 1000; // how often an uploaded file's status is read until its text is extracted
const FOLLOW_FOR_MS = 10 * 60 * 1000; // after this the row says where to look instead

// Content types as a person reads them; an unknown type shows its subtype ("x-foo").
const TYPE_NAMES = {
  "application/pdf": "PDF",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "Word",
  "application/msword": "Word",
  "text/html": "HTML",
  "application/xhtml+xml": "HTML",
  "text/markdown": "Markdown",
  "text/x-markdown": "Markdown",
  "text/plain": "Text",
  "text/csv": "CSV",
  "application/json": "JSON",
  "message/rfc822": "Mail",
  "application/mbox": "Mailbox",
};

// What a type is in words when it has no name above, by its major type.
const MAJOR_NAMES = { text: "Text", image: "Image", audio: "Audio", video: "Video", message: "Mail" };

/** "application/pdf" → "PDF", "text/rfc822-headers" → "Text"; the full type stays in the
 * element's title. */
export function typeName(contentType) {
  const bare = (contentType || "").split(";")[0].trim().toLowerCase();
  if (!bare || bare === "application/octet-stream") return "File";
  const [major, minor = ""] = bare.split("/");
  return TYPE_NAMES[bare] || MAJOR_NAMES[major] || minor.replace(/^x-/, "").toUpperCase() || "File";
}

/** Human-readable size: 1536 → "1.5 KB". */
export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

// The list the progress rows go into when the caller gives none (a drop on a page, say).
function tray() {
  let list = document.querySelector("#upload-tray .upload-list");
  if (!list) {
    list = h("ul", { class: "upload-list", "aria-live": "polite", "aria-label": "Uploads" });
    const close = h("button", { type: "button", class: "link-button", onclick: () => panel.remove() }, "Close");
    const panel = h("section", { id: "upload-tray", class: "upload-tray", "aria-label": "Uploads" },
      h("div", { class: "upload-tray-head" }, h("strong", {}, "Uploads"), close), list);
    document.body.append(panel);
  }
  return list;
}

/**
 * POST one file as multipart to `endpoint` with a progress row in `list`; resolves with
 * {ok, status, data, message} and never rejects (the row shows what happened).
 */
export function uploadOne(file, { kbId, list, endpoint = "/api/files", describe } = {}) {
  const bar = h("progress", { max: 100, value: 0, "aria-label": `Upload of ${file.name}` });
  const status = h("span", { class: "upload-status" }, "Uploading…");
  const name = h("span", { class: "upload-name", title: file.name }, file.name);
  const row = h("li", { class: "upload-row" }, name, bar, status);
  (list || tray()).append(row);
  const form = new FormData();
  form.append("file", file, file.name);
  if (kbId) form.append("kb_id", kbId);
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", endpoint);
    xhr.withCredentials = true;
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) bar.value = Math.round((event.loaded / event.total) * 100);
    });
    const finish = (ok, message, data = null) => {
      bar.value = 100;
      status.textContent = message;
      row.classList.add(ok ? "upload-done" : "upload-failed");
      resolve({ ok, status: xhr.status, data, message });
    };
    xhr.addEventListener("load", () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status === 401) {
        window.location.assign("/signin");
        return finish(false, "Signed out. Open a sign-in link again.");
      }
      if (xhr.status >= 400) {
        const message = data && data.error ? data.error.message : `The server answered ${xhr.status}.`;
        return finish(false, message, data);
      }
      if (endpoint === "/api/files" && data && data.id) {
        // The stored file (or the one already holding these bytes) opens from its row.
        name.replaceChildren(h("a", { href: `/files/${data.id}`, "data-link": true, title: data.name }, data.name));
        if (!data.already_stored && data.status === "processing") followStatus(data.id, status, row);
      }
      finish(true, describe ? describe(data) : uploadedText(data), data);
    });
    xhr.addEventListener("error", () => finish(false, "The upload did not reach the server. Try again."));
    xhr.send(form);
  });
}

function uploadedText(data) {
  if (data && data.already_stored) return "Already stored: this knowledge base holds the same file.";
  return data && data.status !== "processing" ? finalText(data) : "Uploaded; extracting its text…";
}

function finalText(file) {
  if (file.status === "failed") return `Failed: ${file.status_reason || "its text could not be extracted."}`;
  return "Ready: searchable.";
}

/** Read the file's status until extraction ends, and say how it ended in the row. */
async function followStatus(fileId, status, row) {
  const until = Date.now() + FOLLOW_FOR_MS;
  while (row.isConnected && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
    let file;
    try {
      file = await get(`/api/files/${fileId}`);
    } catch {
      continue; // a dropped connection: try again on the next tick
    }
    if (file.status === "processing") continue;
    status.textContent = finalText(file);
    row.classList.toggle("upload-failed", file.status === "failed");
    row.classList.toggle("upload-done", file.status !== "failed");
    emit("files-changed");
    return;
  }
  if (row.isConnected) status.textContent = "Still extracting: its status shows on Files.";
}

/** Upload several files at once; resolves with every result once all are done. */
export async function uploadAll(files, options = {}) {
  const results = await Promise.all([...files].map((file) => uploadOne(file, options)));
  emit(options.endpoint === "/api/mail/import" ? "mail-changed" : "files-changed");
  return results;
}

function hasFiles(event) {
  return [...(event.dataTransfer?.types || [])].includes("Files");
}

/**
 * Files dropped on `element` are uploaded to the knowledge base `kbId` (a value or a
 * function returning one; the selected base by default). Returns a function that removes
 * the handlers. Options: `list` for the progress rows, `endpoint`, `onDone(results)`.
 */
export function installDropUpload(element, { kbId, list, endpoint, describe, onDone } = {}) {
  let depth = 0;
  const over = (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  };
  const enter = (event) => {
    if (!hasFiles(event)) return;
    depth += 1;
    element.classList.add("drop-active");
  };
  const leave = () => {
    depth = Math.max(0, depth - 1);
    if (!depth) element.classList.remove("drop-active");
  };
  const drop = async (event) => {
    if (!event.dataTransfer?.files?.length) return;
    event.preventDefault();
    depth = 0;
    element.classList.remove("drop-active");
    const kb = typeof kbId === "function" ? kbId() : kbId || state.kbId;
    const results = await uploadAll(event.dataTransfer.files, { kbId: kb, list, endpoint, describe });
    if (onDone) onDone(results);
  };
  element.addEventListener("dragover", over);
  element.addEventListener("dragenter", enter);
  element.addEventListener("dragleave", leave);
  element.addEventListener("drop", drop);
  return () => {
    element.removeEventListener("dragover", over);
    element.removeEventListener("dragenter", enter);
    element.removeEventListener("dragleave", leave);
    element.removeEventListener("drop", drop);
    element.classList.remove("drop-active");
  };
}

/** A button that opens the file picker (several files) and uploads what is chosen. */
export function uploadButton(label, { accept, kbId, list, endpoint, describe, onDone } = {}) {
  const input = h("input", { type: "file", multiple: true, accept, class: "visually-hidden",
    tabindex: "-1", "aria-hidden": "true" });
  const button = h("button", { type: "button", class: "primary", onclick: () => input.click() }, label);
  input.addEventListener("change", async () => {
    const files = [...input.files];
    input.value = "";
    if (!files.length) return;
    const kb = typeof kbId === "function" ? kbId() : kbId || state.kbId;
    const results = await uploadAll(files, { kbId: kb, list, endpoint, describe });
    button.focus();
    if (onDone) onDone(results);
  });
  return h("span", { class: "upload-button" }, button, input);
}

// The Sources view: the folders and mailboxes kept in sync, what each did last and why an
// item failed; adding one, syncing it now, giving a mailbox's password again, removing one.

import { del, get, post, put } from "../api.js";
import { clear, formatDate, h, toast } from "../dom.js";
import { confirmDialog } from "../dialog.js";
import { firstLoad, state } from "../state.js";

const POLL_MS = 2000; // while a source waits for its first round, or was asked to sync
const COUNTS = ["added", "updated", "moved", "listed", "restored", "archived", "unlisted", "failed", "not read"];
const STATUS = { waiting: "waiting for its first sync", ok: "in sync", failed: "failed, retrying", paused: "paused" };

/** "12 added, 1 updated · 340 files in all" for a round's counts. */
export function describeCounts(counts) {
  const parts = COUNTS.filter((k) => counts?.[k]).map((k) => `${counts[k]} ${k}`);
  const total = counts?.files ?? counts?.messages;
  const noun = counts?.files !== undefined ? "file" : "message";
  const all = total === undefined ? "" : `${total} ${noun}${total === 1 ? "" : "s"} in all`;
  return [parts.join(", ") || "nothing new", all].filter(Boolean).join(" · ");
}

function where(source) {
  const c = source.config;
  return source.kind === "folder" ? c.path : `${c.user} at ${c.host}: ${c.folders.join(", ")}`;
}

const list = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

let fields = 0;

/** A labelled control, its hint read out with it. */
function field(label, input, hint) {
  input.id = `source-field-${++fields}`;
  const hintEl = hint ? h("span", { class: "muted field-hint", id: `${input.id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { class: "field-label", for: input.id }, label), input, hintEl);
}

function addForm(onAdded) {
  const error = h("p", { class: "notice notice-error", role: "alert", hidden: true });
  const kind = h("select", { name: "kind" },
    h("option", { value: "folder" }, "A folder on the server"), h("option", { value: "imap" }, "An IMAP mailbox"));
  const inputs = {
    name: h("input", { type: "text", name: "name", required: true, maxlength: 100, autocomplete: "off" }),
    path: h("input", { type: "text", name: "path", placeholder: "/srv/notes", autocomplete: "off" }),
    exclude: h("input", { type: "text", name: "exclude", placeholder: "drafts/*, *.bak" }),
    host: h("input", { type: "text", name: "host", placeholder: "imap.example.org", autocomplete: "off" }),
    user: h("input", { type: "text", name: "user", autocomplete: "username" }),
    password: h("input", { type: "password", name: "password", autocomplete: "current-password" }),
    folders: h("input", { type: "text", name: "folders", value: "INBOX" }),
    tls: h("select", { name: "tls" }, h("option", { value: "tls" }, "TLS (port 993)"),
      h("option", { value: "starttls" }, "STARTTLS (port 143)"), h("option", { value: "none" }, "None (this machine only)")),
  };
  const folderFields = h("div", { class: "field-group" },
    field("Folder", inputs.path, "Its absolute path on the server, under a folder the operator allows (SUBSPACE_FOLDER_ROOTS)."),
    field("Leave out", inputs.exclude, "Patterns, separated by commas."));
  const mailFields = h("div", { class: "field-group", hidden: true },
    field("Server", inputs.host), field("Security", inputs.tls), field("User", inputs.user),
    field("Password or app token", inputs.password, "Kept encrypted on the server."),
    field("Folders to follow", inputs.folders, "Separated by commas."));
  kind.addEventListener("change", () => {
    folderFields.hidden = kind.value !== "folder";
    mailFields.hidden = kind.value !== "imap";
  });
  const submit = h("button", { type: "submit", class: "primary" }, "Add source");
  const form = h("form", { class: "source-form", "aria-label": "Add a source" },
    field("Kind", kind), field("Name", inputs.name), folderFields, mailFields, error, h("div", {}, submit));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = kind.value === "folder"
      ? { kind: "folder", name: inputs.name.value, path: inputs.path.value, exclude: list(inputs.exclude.value) }
      : { kind: "imap", name: inputs.name.value, host: inputs.host.value, tls: inputs.tls.value,
          user: inputs.user.value, password: inputs.password.value, folders: list(inputs.folders.value) };
    if (state.kbId) body.kb_id = state.kbId;
    submit.disabled = true;
    try {
      await post("/api/sources", body);
      form.reset();
      kind.dispatchEvent(new Event("change"));
      error.hidden = true;
      onAdded();
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
    } finally {
      submit.disabled = false;
    }
  });
  return h("details", { class: "source-add" }, h("summary", {}, "Add a source"), form);
}

function passwordForm(source, onDone) {
  const input = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const form = h("form", { class: "source-password" }, field("Password or app token", input),
    h("button", { type: "submit" }, "Keep and sync"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await put(`/api/sources/${source.id}/password`, { password: input.value });
      onDone();
    } catch (e) {
      toast(e.message, { error: true });
    }
  });
  return form;
}

function failures(source) {
  const box = h("details", { class: "source-errors" }, h("summary", {}, `Items that failed (${source.failed_items})`));
  box.addEventListener("toggle", async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = "1";
    const detail = await get(`/api/sources/${source.id}`);
    box.append(h("ul", {}, detail.errors.map((e) => h("li", {}, h("strong", {}, e.item), ` — ${e.error}`))));
  }, { once: false });
  return box;
}

function lastRound(source) {
  if (!source.last_sync_at) return "Not synced yet";
  const when = formatDate(source.last_sync_at);
  return source.status === "ok" ? `Last sync ${when}: ${describeCounts(source.last_counts)}` : `Last attempt ${when}`;
}

function sourceCard(source, reload) {
  const actions = h("div", { class: "source-actions" },
    h("button", { type: "button", onclick: async () => {
      await post(`/api/sources/${source.id}/sync`);
      toast(`Syncing ${source.name}`);
      reload(true);
    } }, "Sync now"),
    h("button", { type: "button", class: "danger", onclick: async () => {
      const ok = await confirmDialog({ title: `Remove ${source.name}?`, danger: true, okLabel: "Remove",
        message: "Subspace stops following it. What it brought in stays; archive it to hide it." });
      if (!ok) return;
      await del(`/api/sources/${source.id}`);
      reload();
    } }, "Remove"));
  return h("li", { class: "card source-card", dataset: { sourceId: source.id } },
    h("div", { class: "source-head" }, h("strong", { class: "source-name" }, source.name),
      h("span", { class: `pill status-${source.status}` }, STATUS[source.status] || source.status)),
    h("div", { class: "muted source-where" }, where(source)),
    source.status_reason ? h("p", { class: "notice notice-error source-reason" }, source.status_reason) : null,
    h("div", { class: "source-last" }, lastRound(source)),
    source.failed_items ? failures(source) : null,
    source.kind === "imap" && source.status === "paused" ? passwordForm(source, () => reload(true)) : null,
    actions);
}

export async function render(container, _params, { signal }) {
  document.title = "Sources · Subspace";
  const cards = h("ul", { class: "source-list", "aria-label": "Sources" });
  let timer = null;
  let watchUntil = 0;

  async function load(watch = false) {
    clearTimeout(timer);
    if (watch) watchUntil = Date.now() + 15000;
    const sources = await get("/api/sources", { signal });
    if (signal.aborted) return;
    if (!sources.length) {
      clear(cards).append(h("li", { class: "empty-state" }, h("strong", {}, "No sources yet"),
        h("p", {}, "Add a folder of notes or an IMAP mailbox: what changes there arrives here by itself.")));
    } else {
      clear(cards).append(...sources.map((s) => sourceCard(s, reload)));
    }
    if (sources.some((s) => s.status === "waiting") || Date.now() < watchUntil) timer = setTimeout(() => reload(), POLL_MS);
  }
  const reload = (watch = false) => load(watch).catch(() => {});

  clear(container).append(
    h("div", { class: "view-head" }, h("h1", {}, "Sources")),
    h("p", { class: "muted" }, "Folders and mailboxes Subspace keeps in sync: new, changed, moved and removed items follow by themselves."),
    addForm(() => reload(true)),
    cards);
  return firstLoad(load, () => clearTimeout(timer));
}

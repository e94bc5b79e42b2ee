// One mail message: its headers, its plain body (an HTML body arrives already turned into
// text, and is shown as text), and links to its attachments' file views.

import { get } from "../api.js";
import { append, clear, formatDate, h, toast } from "../dom.js";
import { renderTagsPanel } from "../tags.js";
import { formatSize } from "../upload.js";

export async function render(container, { mailId }, { signal }) {
  const [mail, attachments] = await Promise.all([
    get(`/api/mail/${mailId}`, { signal }),
    get(`/api/mail/${mailId}/attachments`, { signal }),
  ]);
  document.title = `${mail.subject || "(no subject)"} · Subspace`;
  const headers = h("dl", { class: "mail-headers" },
    h("dt", {}, "From"), h("dd", {}, mail.sender),
    h("dt", {}, "To"), h("dd", {}, mail.recipients),
    h("dt", {}, "Date"), h("dd", {}, formatDate(mail.sent_at) || "unknown"));
  const files = attachments.length
    ? h("section", { class: "attachments", "aria-label": "Attachments" }, h("h2", {}, "Attachments"),
      h("ul", {}, attachments.map((f) => h("li", {},
        h("a", { href: `/files/${f.id}`, "data-link": true }, f.name),
        h("span", { class: "muted" }, ` · ${formatSize(f.size)} · ${f.status}`)))))
    : null;
  const tags = h("div", { class: "mail-tags" });
  // append() from dom.js, not Element.append: it leaves out the parts that are null.
  append(clear(container), [
    h("p", {}, h("a", { href: "/mail", "data-link": true }, "← Mail")),
    h("h1", { class: "mail-title" }, mail.subject || "(no subject)"),
    mail.archived_at || mail.deleted_at ? h("p", { class: "notice" }, `This message is ${mail.deleted_at ? "deleted" : "archived"}.`) : null,
    headers,
    tags,
    h("div", { class: "mail-body" }, mail.body_text),
    // What it quotes and its signature: kept with the message, folded, and not searched.
    mail.quoted_text ? h("details", { class: "mail-quoted" },
      h("summary", {}, "Quoted text and signature"),
      h("div", { class: "mail-body" }, mail.quoted_text)) : null,
    files]);
  renderTagsPanel(tags, { kind: "mail", id: mail.id, kbId: mail.kb_id })
    .catch((error) => toast(error.message, { error: true }));
}

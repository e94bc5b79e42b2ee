// A bullet's Markdown shown as it reads: links clickable, code and emphasis styled, a fenced
// block as code. Built from elements and text nodes only (dom.js's h), never from HTML, so a
// bullet's text can hold no markup that runs: a tag in it is shown as the text it is, and only
// http, https and mailto links are links (anything else stays text).

import { h } from "./dom.js";

const SCHEMES = ["http:", "https:", "mailto:"];
const PAGE_LINK = /^\/p\/[0-9a-f-]{36}$/; // an imported [[wikilink]] to another page
// What makes a bullet worth showing rendered: a link, code, emphasis, or a fenced block.
const MARKUP = /\[[^\]]*\]\([^)]*\)|<(?:https?:|mailto:)[^>\s]+>|`[^`]+`|\*\*?\S|_\S[^_]*_|^(?:```|~~~)/;
const FENCE = /^(`{3,}|~{3,})[^\n]*\n([\s\S]*?)\n\1\s*$/;
// An inline token: a code span, a link, an autolink, strong, or emphasis (in that order of
// precedence, as CommonMark reads them in practice).
const INLINE =
  /(`+)([\s\S]*?[^`])\1(?!`)|!?\[([^\]]*)\]\(\s*([^)\s]*)(?:\s+"[^"]*")?\s*\)|<((?:https?:|mailto:)[^>\s]+)>|\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__|\*(?=\S)([^*]*?\S)\*|\b_(?=\S)([^_]*?\S)_\b/g;

/** Whether `text` holds Markdown that renders differently from the text itself. */
export function hasMarkdown(text) {
  return MARKUP.test(text || "");
}

/** A safe link target: http(s) and mailto, or a page of this app (a linked [[page]]). */
export function isSafeLink(href) {
  if (PAGE_LINK.test(href)) return true;
  try {
    return SCHEMES.includes(new URL(href).protocol);
  } catch {
    return false;
  }
}

/** The elements and text nodes that show `text` (one bullet's Markdown). */
export function renderMarkdown(text) {
  const fenced = FENCE.exec(text);
  if (fenced) return [h("pre", { class: "md-code" }, h("code", {}, fenced[2]))];
  if (text.includes("\n") && /^\s*\|/.test(text)) return [h("pre", { class: "md-table" }, text)];
  return inline(text, 0);
}

function inline(text, depth) {
  const out = [];
  let at = 0;
  INLINE.lastIndex = 0;
  const matches = [...text.matchAll(INLINE)];
  for (const m of matches) {
    if (m.index > at) out.push(text.slice(at, m.index));
    at = m.index + m[0].length;
    const [whole, , code, label, href, auto, strong1, strong2, em1, em2] = m;
    if (code !== undefined) {
      out.push(h("code", {}, code.replace(/^ (.*) $/s, "$1")));
    } else if (href !== undefined || label !== undefined) {
      const image = whole.startsWith("!");
      const shown = label || (image ? "" : href);
      if (!image && isSafeLink(href)) {
        const shownNodes = depth < 4 ? inline(shown, depth + 1) : [shown];
        out.push(PAGE_LINK.test(href)
          ? h("a", { href, "data-link": true, class: "md-link md-page-link" }, ...shownNodes)
          : h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow", class: "md-link" }, ...shownNodes));
      } else {
        out.push(shown); // an image is its alt text; an unsafe link is its text
      }
    } else if (auto !== undefined) {
      out.push(isSafeLink(auto) ? h("a", { href: auto, target: "_blank", rel: "noopener noreferrer nofollow", class: "md-link" }, auto) : whole);
    } else {
      const strong = strong1 ?? strong2;
      const inner = strong ?? em1 ?? em2;
      const children = depth < 4 ? inline(inner, depth + 1) : [inner];
      out.push(h(strong !== undefined ? "strong" : "em", {}, ...children));
    }
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

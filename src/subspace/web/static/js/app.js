// Boots the app inside the shell: sidebar, navigation, the search palette's shortcut, and the
// list of keys behind `?`.

import { openModal } from "./dialog.js";
import { h, MOD, toast } from "./dom.js";
import { early, installLinkHandling, render } from "./router.js";
import { installSidebar } from "./sidebar.js";

// What the `?` dialog lists: [keys, what they do], by where they work.
const KEYS = [
  ["Anywhere", [[`${MOD} K`, "Search"], ["?", "This list of keys"], ["Esc", "Close a dialog or the search"]]],
  ["Search", [["↑ ↓", "Move between results"], ["Enter", "Open the result"], ["⇧ Enter", "Ask the question (/rag)"],
    ["Backspace", "Remove the last filter chip"], ["kind:file  kb:Name", "Filter by kind or knowledge base"]]],
  ["Pages", [["Enter", "New bullet"], ["Tab  ⇧ Tab", "Indent, outdent"], ["Alt ↑  Alt ↓", "Move the bullet"],
    ["Alt M", "Mark as memory"], [`${MOD} .`, "Fold"], ["Esc", "Leave the text"]]],
];

async function openPalette() {
  const { openPalette: open } = await import("./palette.js");
  open();
}

function showKeys() {
  if (document.querySelector("dialog.modal")) return;
  openModal({
    title: "Keyboard shortcuts",
    // One table, a group per place, so that the keys and what they do line up throughout.
    body: [h("table", { class: "keys-table" }, KEYS.map(([where, keys]) => h("tbody", {},
      h("tr", {}, h("th", { scope: "colgroup", colspan: "2", class: "keys-where" }, where)),
      keys.map(([key, what]) => h("tr", {},
        h("th", { scope: "row" }, ...key.split("  ").flatMap((k, i) => [i ? " " : null, h("kbd", {}, k)])),
        h("td", {}, what))))))],
    actions: (close) => [h("button", { type: "button", class: "primary", onclick: () => close(null) }, "Close")],
  });
}

/** True while the user types into a field, where `?` is a character. */
function typing(target) {
  return target.closest("input, textarea, select, [contenteditable='true']") !== null;
}

function installShortcuts() {
  document.querySelector("#open-palette .shortcut").textContent = MOD === "⌘" ? "⌘K" : "Ctrl K";
  document.getElementById("open-palette").addEventListener("click", openPalette);
  document.getElementById("open-palette-top").addEventListener("click", openPalette);
  document.getElementById("show-keys").addEventListener("click", showKeys);
  document.addEventListener("keydown", (event) => {
    if ((event.metaKey || event.ctrlKey) && !event.altKey && event.key.toLowerCase() === "k") {
      event.preventDefault();
      openPalette();
    } else if (event.key === "?" && !event.metaKey && !event.ctrlKey && !typing(event.target)) {
      event.preventDefault();
      showKeys();
    }
  });
}

async function boot() {
  const ownData = early();
  installLinkHandling();
  installShortcuts();
  const sidebar = installSidebar().catch((error) => toast(error.message, { error: true }));
  // A page reads only its own data, so it is drawn beside the sidebar; the views of a base's
  // content wait for the list of bases, which tells which base is in use.
  if (!ownData) await sidebar;
  await render();
}

boot();

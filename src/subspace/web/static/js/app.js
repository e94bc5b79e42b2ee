// Boots the app inside the shell: sidebar, navigation, and the search palette's shortcut.

import { toast } from "./dom.js";
import { installLinkHandling, render } from "./router.js";
import { installSidebar } from "./sidebar.js";

const isMac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

async function openPalette() {
  const { openPalette: open } = await import("./palette.js");
  open();
}

function installShortcut() {
  document.querySelector("#open-palette .shortcut").textContent = isMac ? "⌘K" : "Ctrl K";
  document.getElementById("open-palette").addEventListener("click", openPalette);
  document.addEventListener("keydown", (event) => {
    if ((event.metaKey || event.ctrlKey) && !event.altKey && event.key.toLowerCase() === "k") {
      event.preventDefault();
      openPalette();
    }
  });
}

async function boot() {
  installLinkHandling();
  installShortcut();
  try {
    await installSidebar();
  } catch (error) {
    toast(error.message, { error: true });
  }
  await render();
}

boot();

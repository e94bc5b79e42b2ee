// Client-side navigation: every view has a URL the server answers with the shell, so reload,
// back/forward and shared links land on the same view.

import { forgetPrefetched, prefetch } from "./api.js";
import { clear, h } from "./dom.js";
import { state, syncKbWithAddress } from "./state.js";

// Each view module exports render(container, params, {signal}); it may return a cleanup function.
// A route's `data` names what its view reads first, fetched from the app's start (see early).
const ROUTES = [
  { pattern: /^\/$/, load: () => import("./views/home.js") },
  { pattern: /^\/p\/(?<pageId>[0-9a-f-]{36})$/, load: () => import("./views/page.js"),
    data: ({ pageId }) => `/api/pages/${pageId}` },
  { pattern: /^\/files$/, load: () => import("./views/files.js") },
  { pattern: /^\/files\/(?<fileId>[0-9a-f-]{36})$/, load: () => import("./views/file.js") },
  { pattern: /^\/mail$/, load: () => import("./views/mail.js") },
  { pattern: /^\/mail\/(?<mailId>[0-9a-f-]{36})$/, load: () => import("./views/message.js") },
  { pattern: /^\/sources$/, load: () => import("./views/sources.js") },
];

// The views that list a knowledge base's content: their address carries the base (`?kb=`).
export const BASE_VIEWS = new Set(["/", "/files", "/mail"]);

const view = () => document.getElementById("view");
let current = { cleanup: null, controller: null };

/** `url` with `?kb=` of the base in use when it is a view of a base's content and has none. */
export function withKb(url, kbId = state.kbId) {
  const target = new URL(url, window.location.origin);
  if (BASE_VIEWS.has(target.pathname) && !target.searchParams.has("kb") && kbId) {
    target.searchParams.set("kb", kbId);
  }
  return target;
}

export function navigate(url, { replace = false } = {}) {
  const target = withKb(url);
  if (target.origin !== window.location.origin) {
    window.location.assign(target.href);
    return;
  }
  const same = target.pathname === window.location.pathname;
  history[replace ? "replaceState" : "pushState"]({}, "", target.pathname + target.search + target.hash);
  if (same && target.hash) {
    window.dispatchEvent(new HashChangeEvent("hashchange"));
    return;
  }
  render();
}

export async function render() {
  current.controller?.abort();
  if (typeof current.cleanup === "function") current.cleanup();
  const controller = new AbortController();
  current = { cleanup: null, controller };
  const here = withKb(window.location.href);
  if (here.href !== window.location.href) history.replaceState({}, "", here.pathname + here.search + here.hash);
  syncKbWithAddress();
  const path = window.location.pathname;
  const route = ROUTES.find((r) => r.pattern.test(path));
  const container = view();
  if (!route) {
    clear(container).append(h("h1", {}, "Not found"), h("p", {}, "Nothing lives at this address. "),
      h("a", { href: "/", "data-link": true }, "Go to the start page"));
    return;
  }
  const params = path.match(route.pattern).groups || {};
  try {
    const module = await route.load();
    if (controller.signal.aborted) return;
    current.cleanup = await module.render(container, params, { signal: controller.signal });
  } catch (error) {
    if (error.name === "AbortError") return;
    clear(container).append(h("h1", {}, "Something went wrong"), h("p", { class: "notice notice-error" }, error.message));
  } finally {
    forgetPrefetched();
  }
  document.dispatchEvent(new CustomEvent("view-rendered", { detail: { path } }));
}

/**
 * Start loading the view the app opens on, and what it reads first, while the sidebar loads:
 * a big page's JSON is on its way before the view would have asked for it. True when the view
 * reads only that (it need not wait for the sidebar's list of bases).
 */
export function early() {
  const path = window.location.pathname;
  const route = ROUTES.find((r) => r.pattern.test(path));
  if (!route) return false;
  route.load().catch(() => {}); // render() loads it again and reports a failure
  if (!route.data) return false;
  prefetch(route.data(path.match(route.pattern).groups));
  return true;
}

/** Follow same-origin links marked data-link without reloading the page. */
export function installLinkHandling() {
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-link]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(link.getAttribute("href"));
  });
  window.addEventListener("popstate", () => render());
}

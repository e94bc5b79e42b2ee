// In-app dialogs in place of the browser's prompt() and confirm(): a modal <dialog> keeps the
// focus inside it (the page behind is inert), Esc closes it, and the focus returns where it was.

import { h } from "./dom.js";

/**
 * A modal built from `body` (elements) and `actions` (buttons); resolves with what `close(value)`
 * was given, or null when it was dismissed (Esc, Cancel).
 */
export function openModal({ title, body = [], actions = () => [], label = title }) {
  const returnFocus = document.activeElement;
  return new Promise((resolve) => {
    let result = null;
    const close = (value) => {
      result = value;
      dialog.close();
    };
    const dialog = h("dialog", { class: "modal", "aria-label": label },
      h("h2", {}, title), ...body, h("div", { class: "dialog-actions" }, ...actions(close)));
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "Tab") keepFocusIn(dialog, event);
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (returnFocus && returnFocus.isConnected) returnFocus.focus();
      resolve(result);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * Keep Tab inside `container` (a dialog, the palette): Tab from the last control goes to the
 * first, Shift-Tab from the first to the last.
 */
export function keepFocusIn(container, event) {
  const focusable = [...container.querySelectorAll(
    "input, select, textarea, button:not([disabled]), a[href], [tabindex='0']")]
    .filter((el) => el.offsetParent !== null);
  if (!focusable.length) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (event.shiftKey && document.activeElement === first) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first.focus();
  }
}

/**
 * Ask for one line of text; `submit(text)` runs on OK and may throw, and its message shows in
 * the dialog, which stays open. Resolves with what `submit` returned, or null when dismissed.
 */
export function promptDialog({ title, label, placeholder = "", okLabel = "Create", submit, maxlength = 200 }) {
  const input = h("input", { type: "text", name: "value", placeholder, required: true, maxlength, autocomplete: "off" });
  const error = h("p", { class: "dialog-error", role: "alert" });
  const form = h("form", { method: "dialog", id: `dialog-form-${Date.now()}` },
    h("label", {}, label, input), error);
  return openModal({
    title,
    body: [form],
    actions: (close) => {
      // The actions sit outside the form: the OK button submits it by its id.
      const ok = h("button", { type: "submit", class: "primary", form: form.id }, okLabel);
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const text = input.value.trim();
        if (!text) {
          error.textContent = `${label} cannot be empty.`;
          input.focus();
          return;
        }
        ok.disabled = true;
        try {
          close(await submit(text));
        } catch (failure) {
          error.textContent = failure.message;
          ok.disabled = false;
          input.focus();
        }
      });
      return [h("button", { type: "button", onclick: () => close(null) }, "Cancel"), ok];
    },
  });
}

/** Ask before doing something that cannot be undone at once; resolves true or false. */
export async function confirmDialog({ title, message, okLabel = "OK", danger = false }) {
  const answer = await openModal({
    title,
    body: [h("p", {}, message)],
    actions: (close) => [
      h("button", { type: "button", onclick: () => close(false) }, "Cancel"),
      h("button", { type: "button", class: danger ? "primary danger" : "primary", onclick: () => close(true) }, okLabel),
    ],
  });
  return answer === true;
}

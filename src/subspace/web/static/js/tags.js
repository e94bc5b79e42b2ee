// Tags on a page, file or mail: a compact row of chips (each with a button that clears it) and an
// "Add tag" control that opens a form to set a tag and one to define a new tag on the base.

import { del, get, post, put, query } from "./api.js";
import { clear, h, toast } from "./dom.js";

const TYPES = ["text", "number", "date", "boolean"];
// The items whose tag forms the user opened: a view that draws its panel again keeps them open.
const opened = new Set();

function shown(value, type) {
  if (type === "boolean") return value ? "yes" : "no";
  return String(value);
}

function valueInput(type) {
  if (type === "boolean") {
    return h("select", { class: "tag-value", "aria-label": "Value" },
      h("option", { value: "true" }, "yes"), h("option", { value: "false" }, "no"));
  }
  const inputType = type === "number" ? "number" : type === "date" ? "date" : "text";
  return h("input", { type: inputType, class: "tag-value", "aria-label": "Value", step: type === "number" ? "any" : null,
    required: true });
}

function readValue(input, type) {
  const raw = input.value.trim();
  if (type === "boolean") return raw === "true";
  if (type === "number") return Number(raw);
  return raw;
}

/**
 * Draw the tags panel of item `id` of `kind` ("page", "file", "mail") in `container`,
 * with the tags defined on knowledge base `kbId`. Returns a function that redraws it.
 */
export async function renderTagsPanel(container, { kind, id, kbId }) {
  const panel = h("section", { class: "tags-panel", "aria-label": "Tags" });
  clear(container).append(panel);
  const key = `${kind}:${id}`;

  async function draw(focusSelector) {
    const [definitions, values] = await Promise.all([
      get(`/api/tags${query({ kb_id: kbId })}`),
      get(`/api/tags/values/${kind}/${id}`),
    ]);
    const set = h("ul", { class: "tag-values" }, values.map((value) =>
      h("li", { class: "tag-chip", dataset: { tagId: value.tag_id } },
        h("span", { class: "tag-name" }, value.name), " ",
        h("span", { class: "tag-value-shown" }, shown(value.value, value.type)), " ",
        h("button", { type: "button", class: "link-button tag-clear", "aria-label": `Clear tag ${value.name}`,
          onclick: () => clearTag(value) }, "×"))));
    if (!values.length) set.append(h("li", { class: "muted tag-none" }, "No tags."));
    const editorId = `tag-editor-${kind}-${id}`;
    const open = opened.has(key);
    const toggle = h("button", { type: "button", class: "quiet tag-add", "aria-expanded": String(open),
      "aria-controls": editorId, onclick: () => {
        if (!opened.delete(key)) opened.add(key);
        draw(opened.has(key) ? ".tag-set select, .tag-define input" : ".tag-add");
      } }, open ? "Done" : "+ Add tag");

    const setForm = setTagForm(definitions);
    const defineForm = h("form", { class: "tag-form tag-define", onsubmit: defineTag },
      h("input", { type: "text", name: "name", placeholder: "New tag name", "aria-label": "New tag name",
        required: true, maxlength: 100 }),
      h("select", { name: "type", "aria-label": "Type of the new tag" },
        TYPES.map((type) => h("option", { value: type }, type))),
      h("button", { type: "submit" }, "Define tag"));
    const editor = h("div", { class: "tag-editor", id: editorId, hidden: !open }, setForm,
      h("p", { class: "tag-define-head muted" }, "Or define a new tag on this knowledge base:"), defineForm);
    clear(panel).append(h("div", { class: "tags-row" }, h("h2", { class: "visually-hidden" }, "Tags"), set, toggle), editor);
    if (focusSelector) panel.querySelector(focusSelector)?.focus();
  }

  function setTagForm(definitions) {
    if (!definitions.length) {
      return h("p", { class: "muted" }, "This knowledge base has no tags yet: define one.");
    }
    const select = h("select", { name: "tag", "aria-label": "Tag" },
      definitions.map((d) => h("option", { value: d.id, dataset: { type: d.type } }, `${d.name} (${d.type})`)));
    let input = valueInput(definitions[0].type);
    const slot = h("span", { class: "tag-value-slot" }, input);
    select.addEventListener("change", () => {
      const type = select.selectedOptions[0].dataset.type;
      input = valueInput(type);
      slot.replaceChildren(input);
    });
    const submit = async (event) => {
      event.preventDefault();
      const type = select.selectedOptions[0].dataset.type;
      try {
        await put(`/api/tags/${select.value}/values/${kind}/${id}`, { value: readValue(input, type) });
        await draw(".tag-set select");
      } catch (error) {
        toast(error.message, { error: true });
      }
    };
    return h("form", { class: "tag-form tag-set", onsubmit: submit }, select, slot,
      h("button", { type: "submit" }, "Set tag"));
  }

  async function clearTag(value) {
    try {
      await del(`/api/tags/${value.tag_id}/values/${kind}/${id}`);
      await draw(".tag-set select");
    } catch (error) {
      toast(error.message, { error: true });
    }
  }

  async function defineTag(event) {
    event.preventDefault();
    const form = event.target;
    try {
      const field = (name) => form.elements.namedItem(name).value;
      await post("/api/tags", { name: field("name").trim(), type: field("type"), kb_id: kbId });
      await draw(".tag-define input");
    } catch (error) {
      toast(error.message, { error: true });
    }
  }

  await draw();
  return () => draw();
}

// The tags panel: the typed tags set on a page, file or mail, a form to set one, a button to
// clear each, and a small form to define a new tag on the knowledge base.

import { del, get, post, put, query } from "./api.js";
import { clear, h, toast } from "./dom.js";

const TYPES = ["text", "number", "date", "boolean"];

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
    if (!values.length) set.append(h("li", { class: "muted" }, "No tags."));

    const setForm = setTagForm(definitions);
    const defineForm = h("form", { class: "tag-form tag-define", onsubmit: defineTag },
      h("input", { type: "text", name: "name", placeholder: "New tag name", "aria-label": "New tag name",
        required: true, maxlength: 100 }),
      h("select", { name: "type", "aria-label": "Type of the new tag" },
        TYPES.map((type) => h("option", { value: type }, type))),
      h("button", { type: "submit" }, "Define tag"));
    clear(panel).append(h("h2", {}, "Tags"), set, setForm, defineForm);
    if (focusSelector) panel.querySelector(focusSelector)?.focus();
  }

  function setTagForm(definitions) {
    if (!definitions.length) {
      return h("p", { class: "muted" }, "This knowledge base has no tags yet: define one below.");
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

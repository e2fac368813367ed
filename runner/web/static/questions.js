// The questions a turn pauses on, answered in the page: an approval (approve, deny with a reason,
// edit the arguments), a server's form (built from its JSON Schema, each value checked as the
// runner checks it; the server checks again), a URL to visit, a sampling request to allow.
import { el, externalLink, renderValue } from "./dom.js";

const FORMAT_WORDS = {
  email: "an email address", uri: "a full URL (such as https://example.com)",
  date: "a date as YYYY-MM-DD", "date-time": "a date and time as YYYY-MM-DDTHH:MM:SSZ",
};
const LIMITS = [
  ["minimum", (v, x) => v < x, "must be at least {}"], ["maximum", (v, x) => v > x, "must be at most {}"],
  ["exclusiveMinimum", (v, x) => v <= x, "must be more than {}"], ["exclusiveMaximum", (v, x) => v >= x, "must be less than {}"],
];
let formNumber = 0;

// (value, label) of a field's choices: oneOf/anyOf const+title, enum (+ enumNames), array items.
export function choiceLabels(field) {
  let source = field;
  if (field.type === "array" && field.items && typeof field.items === "object") source = field.items;
  const options = source.oneOf || source.anyOf;
  if (Array.isArray(options)) {
    return options.filter((o) => o && typeof o === "object" && "const" in o).map((o) => [o.const, String(o.title ?? o.const)]);
  }
  const names = source.enumNames || [];
  return (source.enum || []).map((value, index) => [value, String(index < names.length ? names[index] : value)]);
}

// Why `value` does not fit `field`, in the runner's words (runner.tools.form_answers); null if it fits.
export function fieldProblem(field, value) {
  const kind = field.type || "string";
  const choices = choiceLabels(field);
  if (choices.length && kind !== "array" && !choices.some(([v]) => v === value)) return `choose one of ${choices.map(([, l]) => l).join(", ")}`;
  if (kind === "integer" && !Number.isInteger(value)) return "expected a whole number";
  if (kind === "number" && (typeof value !== "number" || Number.isNaN(value))) return "expected a number";
  if (kind === "boolean" && typeof value !== "boolean") return "expected yes or no";
  if (kind === "integer" || kind === "number") {
    for (const [key, fails, words] of LIMITS) if (key in field && fails(value, field[key])) return words.replace("{}", field[key]);
  }
  if (kind === "string") {
    if ("minLength" in field && [...value].length < field.minLength) return `must be at least ${field.minLength} characters long`;
    if ("maxLength" in field && [...value].length > field.maxLength) return `must be at most ${field.maxLength} characters long`;
    if (field.pattern && !new RegExp(field.pattern, "u").test(value)) return "does not have the expected form";
    const format = field.format;
    if (format === "email" && !/^[^@\s]+@[^@\s]+$/.test(value)) return `expected ${FORMAT_WORDS.email}`;
    if (format === "uri" && (!/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/.test(value))) return `expected ${FORMAT_WORDS.uri}`;
    if (format === "date" && !/^\d{4}-\d{2}-\d{2}$/.test(value)) return `expected ${FORMAT_WORDS.date}`;
    if (format === "date-time" && (!/[Tt]/.test(value) || Number.isNaN(Date.parse(value)))) return `expected ${FORMAT_WORDS["date-time"]}`;
  }
  if (kind === "array") {
    if ("minItems" in field && value.length < field.minItems) return `choose at least ${field.minItems}`;
    if ("maxItems" in field && value.length > field.maxItems) return `choose at most ${field.maxItems}`;
  }
  return null;
}

function fieldTitle(name, field) {
  return field.title && field.title !== name ? `${field.title} (${name})` : name;
}

function buttons(...specs) {
  return el("div", { className: "buttons" }, ...specs.map(([label, onclick, extra]) => el("button", { type: "button", onclick, ...extra, text: label })));
}

// The question's panel; `answer(value)` resumes the turn and rejects with the server's reason.
export function questionPanel(question, answer) {
  const error = el("p", { className: "error", role: "alert" });
  const send = async (value) => {
    error.textContent = "";
    try {
      await answer(value);
    } catch (exc) {
      error.textContent = exc.message;
    }
  };
  let panel;
  if (question.type === "approval") panel = approvalPanel(question, send);
  else if (question.type === "sampling") panel = samplingPanel(question, send);
  else if (question.mode === "url") panel = visitPanel(question, send);
  else panel = formPanel(question, send);
  panel.append(error);
  return panel;
}

function approvalPanel(question, send) {
  const n = ++formNumber;
  const heading = el("h3", { id: `question-heading-${n}`, text: `${question.tool} wants to run` });
  const policy = question.policy ? el("p", { text: `asked by ${question.policy.source}${question.policy.reason ? ": " + question.policy.reason : ""}` }) : null;
  const reason = el("textarea", { id: `deny-reason-${n}`, rows: 2 });
  const args = el("textarea", { id: `edit-args-${n}`, rows: 4 });
  args.value = JSON.stringify(question.args, null, 2);
  const argsError = el("p", { className: "error", role: "alert" });
  const editing = el("div", { className: "edit", hidden: true },
    el("label", { for: `edit-args-${n}`, text: "Arguments (JSON)" }), args, argsError,
    buttons(["Run with these arguments", () => {
      let parsed;
      try {
        parsed = JSON.parse(args.value);
      } catch (exc) {
        argsError.textContent = `the arguments must be JSON: ${exc.message}`;
        return;
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
        argsError.textContent = "the arguments must be a JSON object";
        return;
      }
      argsError.textContent = "";
      send({ action: "edit", args: parsed });
    }]));
  return el("section", { className: "card question", "aria-labelledby": `question-heading-${n}` },
    heading, policy, el("h4", { text: "Arguments" }), renderValue(question.args),
    buttons(["Approve", () => send({ action: "approve" })],
      ["Edit arguments", () => { editing.hidden = false; args.focus(); }]),
    el("label", { for: `deny-reason-${n}`, text: "Reason to deny (optional)" }), reason,
    buttons(["Deny", () => send({ action: "deny", reason: reason.value.trim() || "denied by the user" })]),
    editing);
}

function samplingPanel(question, send) {
  const n = ++formNumber;
  const messages = el("ol", { className: "sampled" }, ...question.messages.map((m) => el("li", {}, el("strong", { text: `${m.role}: ` }), el("span", { text: m.text }))));
  return el("section", { className: "card question", "aria-labelledby": `question-heading-${n}` },
    el("h3", { id: `question-heading-${n}`, text: `${question.server} asks the model for a completion (at most ${question.max_tokens} tokens)` }),
    question.system_prompt ? el("p", {}, el("strong", { text: "system: " }), el("span", { text: question.system_prompt })) : null,
    messages,
    question.tools && question.tools.length ? el("p", { text: `tools offered: ${question.tools.join(", ")}` }) : null,
    buttons(["Send it to the model", () => send({ action: "approve" })], ["Deny", () => send({ action: "deny" })]));
}

function visitPanel(question, send) {
  const n = ++formNumber;
  const waiting = el("p", { className: "waiting", role: "status" });
  const link = externalLink(question.url);
  link.addEventListener("click", () => { waiting.textContent = "Waiting for you to finish at the link; then say so below."; });
  return el("section", { className: "card question", "aria-labelledby": `question-heading-${n}` },
    el("h3", { id: `question-heading-${n}`, text: `${question.server} asks you to visit a page` }),
    el("p", { text: question.message }), el("p", {}, link), waiting,
    buttons(["I have done it", () => send({ action: "accept" })], ["Decline", () => send({ action: "decline" })],
      ["Cancel", () => send({ action: "cancel" })]));
}

function formPanel(question, send) {
  const n = ++formNumber;
  const form = schemaForm(question.schema || {}, "Submit", (content) => send({ action: "accept", content }));
  return el("section", { className: "card question", "aria-labelledby": `question-heading-${n}` },
    el("h3", { id: `question-heading-${n}`, text: `${question.server} asks` }), el("p", { text: question.message }), form,
    buttons(["Decline", () => send({ action: "decline" })], ["Cancel", () => send({ action: "cancel" })]));
}

const SIMPLE_TYPES = new Set(["string", "integer", "number", "boolean"]);

// Whether every field of an object schema can be a form field (else it is edited as JSON).
export function formable(schema) {
  return Object.values(schema.properties || {}).every((field) => field && typeof field === "object"
    && (SIMPLE_TYPES.has(field.type || "string") || (field.type === "array" && choiceLabels(field).length > 0)));
}

// A form of an object schema's fields, each checked as the runner checks it; `onValid(content)`
// gets the values given (a field left empty is left out).
export function schemaForm(schema, submitLabel, onValid) {
  const properties = schema.properties || {};
  const required = new Set(schema.required || []);
  const prefix = `form${++formNumber}`;
  const fields = [];
  const form = el("form", { className: "server-form", novalidate: true });
  for (const [name, field] of Object.entries(properties)) {
    if (!field || typeof field !== "object") continue;
    const id = `${prefix}-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    const problem = el("p", { className: "error field-error", id: `${id}-problem`, role: "alert" });
    const label = el("label", { for: id, text: (field.title || name) + (required.has(name) ? " (required)" : "") });
    const input = fieldInput(id, field);
    input.setAttribute("aria-describedby", `${id}-problem`);
    const help = field.description ? el("p", { className: "muted", text: field.description }) : null;
    form.append(el("div", { className: "field" }, label, input, help, problem));
    fields.push({ name, field, input, problem });
  }
  const submit = () => {
    const content = {};
    let ok = true;
    for (const { name, field, input, problem } of fields) {
      problem.textContent = "";
      const value = inputValue(field, input);
      if (value === undefined) {
        if (required.has(name) && !("default" in field)) {
          problem.textContent = `${fieldTitle(name, field)}: a value is required`;
          ok = false;
        }
        continue;
      }
      const why = value === null ? fieldProblem(field, NaN) : fieldProblem(field, value);
      if (why) {
        problem.textContent = `${fieldTitle(name, field)}: ${why}`;
        ok = false;
        continue;
      }
      content[name] = value;
    }
    if (ok) onValid(content);
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  form.append(el("button", { type: "submit", text: submitLabel }));
  return form;
}

function fieldInput(id, field) {
  const kind = field.type || "string";
  const choices = choiceLabels(field);
  if (kind === "array" && choices.length) {
    const group = el("fieldset", { id, className: "choices" });
    choices.forEach(([value, label], index) => {
      const box = el("input", { type: "checkbox", id: `${id}-${index}`, "data-index": index });
      if (Array.isArray(field.default) && field.default.includes(value)) box.checked = true;
      group.append(el("label", { for: `${id}-${index}` }, box, ` ${label}`));
    });
    return group;
  }
  if (choices.length) {
    const select = el("select", { id }, el("option", { value: "", text: "(choose)" }),
      ...choices.map(([value, label], index) => el("option", { value: String(index), text: label })));
    const chosen = choices.findIndex(([value]) => value === field.default);
    if (chosen >= 0) select.value = String(chosen);
    return select;
  }
  if (kind === "boolean") {
    const box = el("input", { id, type: "checkbox" });
    box.checked = field.default === true;
    return box;
  }
  const type = kind === "integer" || kind === "number" ? "number" : { email: "email", uri: "url", date: "date" }[field.format] || "text";
  const input = el("input", { id, type, step: kind === "integer" ? "1" : kind === "number" ? "any" : null });
  if (field.default !== undefined) input.value = String(field.default);
  return input;
}

// The value of a field's input: undefined when left empty, null when it cannot be read as its type.
function inputValue(field, input) {
  const kind = field.type || "string";
  const choices = choiceLabels(field);
  if (kind === "array" && choices.length) {
    return [...input.querySelectorAll("input")].filter((box) => box.checked).map((box) => choices[Number(box.dataset.index)][0]);
  }
  if (choices.length) return input.value === "" ? undefined : choices[Number(input.value)][0];
  if (kind === "boolean") return input.checked;
  const raw = input.value.trim();
  if (raw === "") return input.validity && input.validity.badInput ? null : undefined;
  if (kind === "integer" || kind === "number") {
    const number = Number(raw);
    return Number.isNaN(number) ? null : number;
  }
  return input.value;
}

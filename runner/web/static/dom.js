// Building the page's DOM safely: every text from a server, a tool or the model goes in with
// textContent (never as HTML), and a link is made only for an http(s) address.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// The address if it is an absolute http or https URL, else null: javascript:, data: and the
// like never become links.
export function safeUrl(text) {
  try {
    const url = new URL(String(text));
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

// A link that opens in a new tab, telling the other site nothing of this page.
export function externalLink(text, label) {
  const href = safeUrl(text);
  if (href === null) return el("span", { className: "unsafe-link", text: label ?? String(text) });
  return el("a", { href, target: "_blank", rel: "noopener noreferrer", text: label ?? href });
}

// Control characters (an ESC of a terminal colour, a bidi override) made visible, as \x1b or \u202e:
// never passed on invisibly. Tabs and new lines stay as they are.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/;
const URL_OR_CONTROL = new RegExp(`https?://[^\\s<>"'\`\\u0000-\\u001f\\u007f-\\u009f]+|${CONTROL.source}`, "g");

function visibleControl(char) {
  const code = char.codePointAt(0);
  const shown = code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  return el("span", { className: "control", title: "a control character", text: shown });
}

// Text from a tool or the model as nodes: http(s) addresses as links (externalLink), control
// characters shown (visibleControl), the rest as text.
export function richText(text) {
  const nodes = [];
  let at = 0;
  for (const found of String(text).matchAll(URL_OR_CONTROL)) {
    let piece = found[0];
    if (CONTROL.test(piece)) {
      nodes.push(String(text).slice(at, found.index), visibleControl(piece));
      at = found.index + piece.length;
      continue;
    }
    piece = piece.replace(/[.,;:!?)\]}]+$/, "");  // the sentence's punctuation, not the address's
    nodes.push(String(text).slice(at, found.index), safeUrl(piece) ? externalLink(piece, piece) : piece);
    at = found.index + piece.length;
  }
  nodes.push(String(text).slice(at));
  return nodes.filter((node) => node !== "");
}

// An element holding richText(text).
export function textWithLinks(tag, attrs, text) {
  return el(tag, attrs, ...richText(text));
}

// A JSON-ready value rendered as a person reads it: objects as labelled rows, lists as lists,
// lists of like objects as a table.
export function renderValue(value) {
  if (value === null || value === undefined) return el("span", { className: "muted", text: "null" });
  if (Array.isArray(value) && !value.length) return el("span", { className: "muted", text: "empty" });
  if (Array.isArray(value)) {
    if (value.length && value.every((item) => item && typeof item === "object" && !Array.isArray(item))) {
      const columns = [...new Set(value.flatMap((item) => Object.keys(item)))];
      const head = el("tr", {}, ...columns.map((name) => el("th", { scope: "col", text: name })));
      const rows = value.map((item) => el("tr", {}, ...columns.map((name) => el("td", {}, renderValue(item[name])))));
      return el("table", { className: "structured" }, el("thead", {}, head), el("tbody", {}, ...rows));
    }
    return el("ul", { className: "structured" }, ...value.map((item) => el("li", {}, renderValue(item))));
  }
  if (typeof value === "object") {
    const list = el("dl", { className: "structured" });
    for (const [key, item] of Object.entries(value)) list.append(el("dt", { text: key }), el("dd", {}, renderValue(item)));
    return list;
  }
  return textWithLinks("span", {}, String(value));
}

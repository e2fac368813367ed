// The servers panel: each server's state, restarts, protocol era, transport and last stderr
// lines, refreshed while the page is open; its tools (searchable) and prompts; and "try it": a
// tool called from a form made from its schema, outside the conversation, through the same
// checks, policy and approvals as the chat's /call.
import { getJson, postJson } from "./api.js";
import { ToolCard } from "./cards.js";
import { el } from "./dom.js";
import { formable, questionPanel, schemaForm } from "./questions.js";

const REFRESH_MS = 2000;
const opened = new Set();  // the servers whose details are open, kept across refreshes
let shown = "";

const $ = (id) => document.getElementById(id);

export function startServersPanel() {
  $("tool-search").addEventListener("input", filterTools);
  refresh();
}

async function refresh() {
  try {
    const { servers, warnings } = await getJson("/api/servers");
    const text = JSON.stringify([servers, warnings]);
    if (text !== shown) {  // redrawn only when something changed: focus and scroll stay put
      shown = text;
      // what is wrong with a tool's MCP App metadata (the tool is shown without its app)
      $("server-warnings").replaceChildren(...warnings.map((warning) => el("li", { className: "error", text: warning })));
      $("server-list").replaceChildren(...servers.map(serverCard));
      filterTools();
    }
  } catch {
    // the page server is stopping: the next refresh tells
  }
  setTimeout(refresh, REFRESH_MS);
}

function serverCard(server) {
  const summary = el("summary", {}, el("span", { className: "server-key", text: server.key }), " ",
    el("span", { className: `server-status ${server.status}`, text: server.status }));
  const facts = el("dl", { className: "structured" },
    el("dt", { text: "transport" }), el("dd", { text: server.transport }),
    el("dt", { text: "protocol" }), el("dd", { text: server.era || "not connected" }),
    el("dt", { text: "restarts" }), el("dd", { className: "server-restarts", text: String(server.restarts) }));
  if (server.error) facts.append(el("dt", { text: "failed" }), el("dd", { className: "error server-error", text: server.error }));
  if (server.last_incident) facts.append(el("dt", { text: "last incident" }), el("dd", { text: server.last_incident }));
  const stderr = server.stderr.length
    ? el("details", { className: "stderr" }, el("summary", { text: "stderr" }), el("pre", { text: server.stderr.join("\n") }))
    : null;
  const tools = el("ul", { className: "tool-list", "aria-label": `tools of ${server.key}` }, ...server.tools.map(toolItem));
  const prompts = server.prompts.length
    ? el("ul", { className: "prompt-list", "aria-label": `prompts of ${server.key}` },
      ...server.prompts.map((prompt) => el("li", {}, el("code", { text: prompt.name }), ` ${prompt.description}`)))
    : null;
  const details = el("details", { className: "server-card", "data-server": server.key, open: opened.has(server.key) },
    summary, facts, stderr, el("h4", { text: "Tools" }), tools, prompts ? el("h4", { text: "Prompts" }) : null, prompts);
  details.addEventListener("toggle", () => (details.open ? opened.add(server.key) : opened.delete(server.key)));
  return el("li", {}, details);
}

function toolItem(tool) {
  return el("li", { className: "tool-item", "data-search": `${tool.name} ${tool.description}`.toLowerCase() },
    el("code", { text: tool.name }),
    el("button", { type: "button", className: "small", "aria-label": `Try ${tool.name}`, text: "Try it", onclick: () => tryTool(tool) }),
    el("p", { className: "muted", text: tool.description }));
}

function filterTools() {
  const wanted = $("tool-search").value.trim().toLowerCase();
  for (const item of document.querySelectorAll("#server-list .tool-item")) {
    item.hidden = wanted !== "" && !item.dataset.search.includes(wanted);
  }
  if (wanted) {  // the servers with a match are opened to show it
    for (const card of document.querySelectorAll("#server-list .server-card")) {
      if (card.querySelector(".tool-item:not([hidden])")) card.open = true;
    }
  }
}

function tryTool(tool) {
  const area = $("try-area");
  const error = el("p", { className: "error", role: "alert" });
  const outcome = el("div", {});
  const call = async (args, answer) => {
    error.textContent = "";
    try {
      const reply = await postJson("/api/call", { tool: tool.name, args, answer });
      if (reply.approval) {
        outcome.replaceChildren(questionPanel(reply.approval, (decision) => call(args, decision)));
        outcome.querySelector("button")?.focus();
        return;
      }
      const card = new ToolCard({ type: "tool_call", name: tool.name, args: answer?.args ?? args, id: "try" });
      card.setResult(reply.result);
      if (reply.detail) card.setDetail(reply.detail);
      outcome.replaceChildren(el("ol", { className: "log" }, card.node));
    } catch (exc) {
      error.textContent = exc.message;
      if (answer) throw exc;  // an approval panel shows the reason too
    }
  };
  const schema = tool.input_schema || { type: "object", properties: {} };
  let form;
  if (formable(schema)) {
    form = schemaForm(schema, "Call", (args) => call(args));
  } else {
    const id = `try-args-${tool.name}`;
    const args = el("textarea", { id, rows: 4 });
    args.value = "{}";
    form = el("form", {}, el("label", { for: id, text: "Arguments (JSON)" }), args, el("button", { type: "submit", text: "Call" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      try {
        call(JSON.parse(args.value));
      } catch (exc) {
        error.textContent = `the arguments must be JSON: ${exc.message}`;
      }
    });
  }
  const heading = el("h3", { id: "try-heading", text: `Try ${tool.name}` });
  area.replaceChildren(el("section", { className: "card try", "aria-labelledby": "try-heading" },
    heading, el("p", { className: "muted", text: "Called outside the conversation: the model does not see it." }),
    form, error, outcome));
  area.querySelector("input, select, textarea, button")?.focus();
}

// The page: the agent's threads, the conversation with streamed answers, tool calls as cards,
// the questions a turn pauses on, and the notices of reloads.
import { ApiError, getJson, getStream, postJson, postStream } from "./api.js";
import { closeApps, closeAppsIn } from "./app-frames.js";
import { ToolCard } from "./cards.js";
import { Conversation } from "./conversation.js";
import { el } from "./dom.js";
import { questionPanel } from "./questions.js";
import { startServersPanel } from "./servers.js";
import { TurnTimeline } from "./timeline.js";

const state = { agent: "main", thread: null, busy: false, cards: new Map(), answer: null };
const $ = (id) => document.getElementById(id);

function newThreadId() {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 12);
}

function showError(message) {
  $("composer-error").textContent = message;
}

// ---------------------------------------------------------------- the conversation

// A turn's items (its message, the events it streamed or its history holds, "failed" notes and
// its timelines) rendered into a fresh node; conversation.js decides which turns are in the page.
function renderTurn(turn) {
  const list = el("ol", { className: "turn-items" });
  let bubble = null;
  for (const item of turn.items) bubble = showItem(list, item, bubble);
  return el("li", { className: "turn" }, list);
}

// A turn's node leaving the page: its apps are closed, its cards forgotten (rendered again, it makes new ones).
function releaseTurn(node) {
  closeAppsIn(node, "scrolled out of view");
  for (const shown of node.querySelectorAll(".tool-card")) {
    const id = shown.dataset.callId;
    if (state.cards.get(id)?.node === shown) state.cards.delete(id);
  }
}

const conversation = new Conversation($("log"), renderTurn, releaseTurn);

function showItem(target, item, bubble) {
  switch (item.type) {
    case "user":
      target.append(el("li", { className: "message user" }, el("span", { className: "who", text: "you" }), el("div", { className: "text", text: item.text })));
      return null;
    case "failed":
      target.append(el("li", { className: "message failed", role: "alert", text: item.message }));
      return bubble;
    case "timeline": {
      const shown = item.timeline.render();
      if (shown) target.append(shown);
      return bubble;
    }
    default:
      bubble = showEvent(target, item, bubble);
      if (item.type === "tool_result" && item.detail) state.cards.get(item.id)?.setDetail(item.detail);
      return bubble;
  }
}

function assistantBubble(target) {
  const text = el("div", { className: "text" });
  const node = el("li", { className: "message assistant" }, el("span", { className: "who", text: "agent" }), text);
  target.append(node);
  return { node, text, streamed: false };
}

// Shows the events of one stream of `turn` as they come (recording them in its items, so the turn
// can be rendered again once scrolled away and back); returns the handler of the stream.
function turnView(turn) {
  let bubble = null;
  const timeline = new TurnTimeline();
  const results = new Map();
  return ({ kind, data }) => {
    const following = conversation.atEnd();
    const target = turn.node.firstChild;
    if (kind === "end") {
      turn.live = false;
      const item = { type: "timeline", timeline };
      turn.items.push(item);
      showItem(target, item, bubble);
    } else if (kind === "step") {
      timeline.request(data);
    } else if (kind === "detail") {
      const result = results.get(data.id);
      if (result) result.detail = data;
      state.cards.get(data.id)?.setDetail(data);
    } else if (kind === "failed") {
      const item = { type: "failed", message: data.message };
      turn.items.push(item);
      showItem(target, item, bubble);
    } else if (kind === "event") {
      timeline.observe(data);
      const item = { ...data };
      if (item.type === "tool_result") results.set(item.id, item);
      turn.items.push(item);
      bubble = showEvent(target, item, bubble);
    }
    if (following) conversation.toEnd();
  };
}

function showEvent(target, event, bubble) {
  switch (event.type) {
    case "token":
      if (event.agent) return bubble;  // an agent of agents: works; its answer comes as a tool result
      if (!bubble) bubble = assistantBubble(target);
      bubble.text.textContent += event.text;
      bubble.streamed = true;
      return bubble;
    case "tool_call": {
      const card = new ToolCard(event);
      state.cards.set(event.id, card);
      target.append(card.node);
      return null;
    }
    case "tool_retry":
      state.cards.get(event.id)?.addRetry(event);
      return bubble;
    case "tool_result":
      state.cards.get(event.id)?.setResult(event);
      return null;
    case "final":
      if (!bubble) bubble = assistantBubble(target);
      if (!bubble.streamed || event.output) bubble.text.textContent = event.output ? JSON.stringify(event.output, null, 2) : event.text;
      bubble.node.classList.add("final");
      return null;
    case "approval": case "elicitation": case "sampling":
      state.answer = event;
      return bubble;
    case "model_retry":
    case "model_fallback":
      target.append(el("li", { className: "message notice", text: event.type === "model_retry" ? event.message : `${event.model} failed (${event.reason}): using ${event.fallback}` }));
      return bubble;
    case "error":
      target.append(el("li", { className: "message failed", role: "alert", text: event.message }));
      return bubble;
    default:
      return bubble;
  }
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("log").setAttribute("aria-busy", busy ? "true" : "false");
}

async function runTurn(body, turn) {
  setBusy(true);
  try {
    // A refused answer leaves its question in place, with the reason.
    await postStream("/api/turn", { agent: state.agent, thread: state.thread, ...body }, turnView(turn), () => {
      state.answer = null;
      $("question").replaceChildren();
    });
  } finally {
    turn.live = false;  // ended, or never started (the request was refused)
    setBusy(false);
  }
  showQuestion(state.answer);
  loadThreads();
}

function showQuestion(question) {
  const area = $("question");
  area.replaceChildren();
  if (!question) return;
  const panel = questionPanel(question, async (answer) => {
    await runTurn({ answer }, conversation.resume());
  });
  area.append(panel);
  panel.querySelector("button, input, select, textarea")?.focus();
}

async function send() {
  const box = $("message");
  const text = box.value;
  if (!text.trim() || state.busy) return;
  showError("");
  if (!state.thread) state.thread = newThreadId();
  box.value = "";
  const turn = conversation.begin([{ type: "user", text }]);
  try {
    await runTurn({ text }, turn);
  } catch (exc) {
    showError(exc instanceof ApiError ? exc.message : String(exc));
  }
}

// ---------------------------------------------------------------- threads

async function loadThreads() {
  const { threads } = await getJson(`/api/threads?agent=${encodeURIComponent(state.agent)}`);
  const list = $("thread-list");
  const renaming = list.querySelector("li.renaming");  // kept as it is: a name is being typed in it
  const typing = renaming?.contains(document.activeElement) ? document.activeElement : null;
  list.replaceChildren(...threads.map((thread) => (renaming?.dataset.thread === thread.id ? renaming : threadItem(thread))));
  typing?.focus();  // moved with its item: the focus stays in it
  list.dataset.agent = state.agent;  // whose threads these are
}

function threadItem(thread) {
  const open = el("button", { type: "button", className: "thread-open", "aria-current": thread.id === state.thread ? "true" : null, text: thread.title, onclick: () => openThread(thread.id) });
  const rename = el("button", { type: "button", className: "small", "aria-label": `Rename ${thread.title}`, text: "Rename", onclick: () => startRename(item, thread) });
  const remove = el("button", { type: "button", className: "small", "aria-label": `Delete ${thread.title}`, text: "Delete", onclick: () => deleteThread(thread.id) });
  const item = el("li", { "data-thread": thread.id }, open, rename, remove);
  return item;
}

function startRename(item, thread) {
  const input = el("input", { type: "text", "aria-label": "New name", value: thread.title });
  const save = async () => {
    await postJson("/api/rename", { agent: state.agent, thread: thread.id, title: input.value });
    item.classList.remove("renaming");
    await loadThreads();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); save().catch((exc) => showError(exc.message)); }
    if (event.key === "Escape") { item.classList.remove("renaming"); loadThreads(); }
  });
  item.classList.add("renaming");
  item.replaceChildren(input, el("button", { type: "button", className: "small", text: "Save", onclick: () => save().catch((exc) => showError(exc.message)) }));
  input.focus();
  input.select();
}

async function deleteThread(id) {
  await postJson("/api/delete", { agent: state.agent, thread: id });
  if (id === state.thread) newThread();
  await loadThreads();
}

function newThread() {
  state.thread = null;
  closeApps("the thread was closed");
  state.cards.clear();
  conversation.clear();
  $("question").replaceChildren();
  $("message").focus();
}

async function openThread(id) {
  state.thread = id;
  state.cards.clear();
  const { items, question } = await getJson(`/api/history?agent=${encodeURIComponent(state.agent)}&thread=${encodeURIComponent(id)}`);
  closeApps("the thread was closed");
  const turns = [];
  for (const item of items) {
    if (item.type === "user" || !turns.length) turns.push([]);
    turns[turns.length - 1].push(item);
  }
  conversation.load(turns);
  showQuestion(question);
  loadThreads();
}

// ---------------------------------------------------------------- notices (watch mode)

function showNotice(event) {
  let text;
  if (event.type === "reload") text = `Reloaded: ${event.summary}`;
  else if (event.type === "reload_error") text = `The edit was not loaded (the last good manifest keeps running): ${event.problems.join("; ")}`;
  else if (event.type === "change") text = `${event.server}: ${event.kind} changed` + (event.added.length ? `; added ${event.added.join(", ")}` : "") + (event.removed.length ? `; removed ${event.removed.join(", ")}` : "");
  else return;
  const notice = el("p", { className: `notice ${event.type === "reload_error" ? "error" : ""}`, text });
  $("notices").replaceChildren(notice);
  if (event.type === "reload") loadAgent();
}

async function followNotices() {
  for (;;) {
    try {
      await getStream("/api/notices", ({ data }) => showNotice(data));
    } catch {
      // the server stopped or the connection broke: try again shortly
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

// ---------------------------------------------------------------- start

async function loadAgent() {
  const agent = await getJson("/api/agent");
  $("agent-name").textContent = agent.name;
  $("agent-model").textContent = `model ${agent.model}`;
  document.title = `${agent.name} — mcp-run`;
  const select = $("agent-select");
  select.replaceChildren(...agent.agents.map((a) => el("option", { value: a.name, text: a.description ? `${a.name} — ${a.description}` : a.name })));
  select.value = state.agent;
  select.closest("label").hidden = agent.agents.length < 2;
}

function start() {
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $("new-thread").addEventListener("click", newThread);
  $("agent-select").addEventListener("change", (event) => {
    state.agent = event.target.value;
    newThread();
    loadThreads();
  });
  loadAgent().then(loadThreads).catch((exc) => showError(exc.message));
  followNotices();
  startServersPanel();
  document.body.dataset.ready = "true";
  $("message").focus();
}

start();

// The page: the agent's threads, the conversation with streamed answers, tool calls as cards,
// the questions a turn pauses on, and the notices of reloads.
import { ApiError, getJson, getStream, postJson, postStream } from "./api.js";
import { closeApps } from "./app-frames.js";
import { ToolCard } from "./cards.js";
import { el, richText } from "./dom.js";
import { questionPanel } from "./questions.js";
import { startServersPanel } from "./servers.js";
import { keptTimeline, TurnTimeline } from "./timeline.js";

const state = { agent: "main", thread: null, busy: false, cards: new Map(), answer: null, timeline: null, answering: "main" };
const $ = (id) => document.getElementById(id);

function newThreadId() {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 12);
}

function showError(message) {
  $("composer-error").textContent = message;
}

function scrollDown() {
  const log = $("log");
  log.scrollTop = log.scrollHeight;
}

// ---------------------------------------------------------------- the conversation

function addUser(text) {
  const node = el("li", { className: "message user" }, el("span", { className: "who", text: "you" }), el("div", { className: "text", text }));
  $("log").append(node);
  return node;
}

// A message the server did not take: marked, with the reason, so it is not read as sent.
function markNotSent(node, reason) {
  node.classList.add("not-sent");
  node.querySelector(".who").textContent = "you (not sent)";
  node.append(el("p", { className: "error not-sent-reason", role: "alert", text: `Not sent: ${reason}` }));
}

// What a failed request says: the server's reason, or that the server cannot be reached.
function failure(exc) {
  if (exc instanceof ApiError) return exc.message;
  if (exc instanceof TypeError) return "the agent is not reachable: is mcp-run web still running? (start it again, then reload the page)";
  return String(exc);
}

// The agent answering the thread, when a handoff made it another than the one chosen in the menu.
function showAnswering(answering, from) {
  state.answering = answering;
  const shown = $("answering");
  shown.textContent = answering === state.agent ? "" : `${answering} answers in this thread${from ? ` (handed over by ${from})` : ""}`;
  shown.hidden = answering === state.agent;
}

function assistantBubble() {
  const text = el("div", { className: "text" });
  const who = state.answering === state.agent ? "agent" : state.answering;
  const node = el("li", { className: "message assistant" }, el("span", { className: "who", text: who }), text);
  $("log").append(node);
  return { node, text, streamed: false };
}

// Shows the events of one turn as they come; returns the handler of its stream. A turn that
// pauses on a question keeps its timeline (state.timeline) for the stream that resumes it: one per turn.
function turnView(timeline) {
  let bubble = null;
  return ({ kind, data }) => {
    if (kind === "end") {
      state.timeline = state.answer ? timeline : null;
      const shown = state.answer ? null : timeline.render();
      if (shown) $("log").append(shown);
    } else if (kind === "step") {
      timeline.request(data);
    } else if (kind === "detail") {
      state.cards.get(data.id)?.setDetail(data);
    } else if (kind === "failed") {
      $("log").append(el("li", { className: "message failed", role: "alert", text: data.message }));
    } else if (kind === "event") {
      timeline.observe(data);
      bubble = showEvent(data, bubble);
    }
    scrollDown();
  };
}

function showEvent(event, bubble) {
  switch (event.type) {
    case "token":
      if (event.agent && event.agent !== state.answering) return bubble;  // an agent of agents: works; its answer comes as a tool result
      if (!bubble) bubble = assistantBubble();
      bubble.text.textContent += event.text;
      bubble.streamed = true;
      return bubble;
    case "tool_call": {
      const card = new ToolCard(event);
      state.cards.set(event.id, card);
      $("log").append(card.node);
      return null;
    }
    case "tool_result":
      state.cards.get(event.id)?.setResult(event);
      return null;
    case "final":
      if (!bubble) bubble = assistantBubble();
      if (!bubble.streamed || event.output) bubble.text.textContent = event.output ? JSON.stringify(event.output, null, 2) : event.text;
      bubble.text.replaceChildren(...richText(bubble.text.textContent));  // its addresses as links
      bubble.node.classList.add("final");
      return null;
    case "approval": case "elicitation": case "sampling":
      state.answer = event;
      return bubble;
    case "handoff":
      showAnswering(event.to, event.from);
      $("log").append(el("li", { className: "message notice handoff", text: `${event.from} handed the conversation to ${event.to}${event.reason ? `: ${event.reason}` : ""}` }));
      return null;
    case "model_retry":
    case "model_fallback":
      $("log").append(el("li", { className: "message notice", text: event.type === "model_retry" ? event.message : `${event.model} failed (${event.reason}): using ${event.fallback}` }));
      return bubble;
    case "error":
      $("log").append(el("li", { className: "message failed", role: "alert", text: event.message }));
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

async function runTurn(body) {
  setBusy(true);
  const asked = state.answer;
  const timeline = body.answer !== undefined && state.timeline ? state.timeline : new TurnTimeline();
  try {
    // A refused answer leaves its question in place, with the reason.
    await postStream("/api/turn", { agent: state.agent, thread: state.thread, ...body }, turnView(timeline), () => {
      state.answer = null;
      $("question").replaceChildren();
      if (asked?.type === "approval" && body.answer?.action === "edit") state.cards.get(asked.id)?.setEditedArgs(body.answer.args);
    });
  } finally {
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
    await runTurn({ answer }).catch((exc) => { throw new Error(failure(exc)); });
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
  const sent = addUser(text);
  try {
    await runTurn({ text });
  } catch (exc) {
    if (!sent.isConnected) return;  // its thread was left meanwhile
    if (sent.nextElementSibling) {
      showError(failure(exc));
    } else {  // refused before its turn started: not part of the conversation
      markNotSent(sent, failure(exc));
      if (!box.value) box.value = text;
    }
  }
}

// ---------------------------------------------------------------- threads

async function loadThreads() {
  const { threads } = await getJson(`/api/threads?agent=${encodeURIComponent(state.agent)}`);
  const list = $("thread-list");
  list.replaceChildren(...threads.map(threadItem));
  list.dataset.agent = state.agent;  // whose threads these are
}

function threadItem(thread) {
  const open = el("button", { type: "button", className: "thread-open", title: thread.title, "aria-current": thread.id === state.thread ? "true" : null, text: thread.title, onclick: () => openThread(thread.id) });
  const rename = el("button", { type: "button", className: "small", "aria-label": `Rename ${thread.title}`, text: "Rename", onclick: () => startRename(item, thread) });
  const remove = el("button", { type: "button", className: "small", "aria-label": `Delete ${thread.title}`, text: "Delete", onclick: () => deleteThread(thread) });
  const item = el("li", { "data-thread": thread.id }, open, rename, remove);
  return item;
}

function startRename(item, thread) {
  const input = el("input", { type: "text", "aria-label": "New name", value: thread.title });
  const save = async () => {
    await postJson("/api/rename", { agent: state.agent, thread: thread.id, title: input.value });
    await loadThreads();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); save().catch((exc) => showError(exc.message)); }
    if (event.key === "Escape") loadThreads();
  });
  item.replaceChildren(input, el("button", { type: "button", className: "small", text: "Save", onclick: () => save().catch((exc) => showError(exc.message)) }));
  input.focus();
  input.select();
}

async function deleteThread(thread) {
  if (!window.confirm(`Delete the thread “${thread.title}”? Its conversation cannot be brought back.`)) return;
  const id = thread.id;
  await postJson("/api/delete", { agent: state.agent, thread: id });
  if (id === state.thread) newThread();
  await loadThreads();
}

function newThread() {
  state.thread = null;
  state.timeline = null;
  showAnswering(state.agent);
  closeApps("the thread was closed");
  state.cards.clear();
  $("log").replaceChildren();
  $("question").replaceChildren();
  $("message").focus();
}

async function openThread(id) {
  state.thread = id;
  state.cards.clear();
  const { items, question, timelines, answering } = await getJson(`/api/history?agent=${encodeURIComponent(state.agent)}&thread=${encodeURIComponent(id)}`);
  closeApps("the thread was closed");
  $("log").replaceChildren();
  state.timeline = null;
  showAnswering(state.agent);  // the thread's answers before a handoff; the agent answering now, after
  let bubble = null;
  let turn = -1;  // the position of the turn's message from the user: its kept timeline's key
  const endTurn = (last) => {
    const entries = timelines?.[String(turn)];
    if (!entries) return;
    const timeline = keptTimeline(entries);
    let shown;
    if (last && question) state.timeline = timeline;  // the answer's stream goes on with it
    else if ((shown = timeline.render())) $("log").append(shown);
  };
  for (const item of items) {
    if (item.type === "user") {
      endTurn(false);
      turn += 1;
      addUser(item.text);
      bubble = null;
    } else {
      bubble = showEvent(item, bubble);
      if (item.type === "tool_result" && item.detail) state.cards.get(item.id)?.setDetail(item.detail);
    }
  }
  endTurn(true);
  showAnswering(answering ?? state.agent);
  state.answer = question;
  showQuestion(question);
  loadThreads();
  scrollDown();
}

// ---------------------------------------------------------------- notices (watch mode)

function showNotice(event) {
  let text;
  if (event.type === "reload") text = event.summary.replace(/^reloaded\b/i, "Reloaded");
  else if (event.type === "reload_error") text = `The edit was not loaded (the last good manifest keeps running): ${event.problems.join("; ")}`;
  else if (event.type === "change") text = `${event.server}: ${event.kind} changed` + (event.added.length ? `; added ${event.added.join(", ")}` : "") + (event.removed.length ? `; removed ${event.removed.join(", ")}` : "");
  else return;
  const notice = el("p", { className: `notice ${event.type === "reload_error" ? "error" : ""}`, text });
  $("notices").replaceChildren(notice);
  if (event.type === "reload") loadAgent();
}

function showConnection(connected) {
  const shown = $("connection");
  shown.textContent = connected ? "connected" : "not connected: the agent is not reachable (retrying)";
  shown.className = connected ? "connection ok" : "connection lost";
}

async function followNotices() {
  for (;;) {
    try {
      await getStream("/api/notices", ({ data }) => showNotice(data), undefined, () => showConnection(true));
    } catch {
      // the server stopped or the connection broke: try again shortly
    }
    showConnection(false);
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

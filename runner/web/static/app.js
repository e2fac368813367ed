// The page: the agent's threads, the conversation with streamed answers, tool calls as cards,
// the questions a turn pauses on, and the notices of reloads.
import { ApiError, getJson, getStream, postJson, postStream } from "./api.js";
import { closeApps, closeAppsIn } from "./app-frames.js";
import { ToolCard } from "./cards.js";
import { Conversation } from "./conversation.js";
import { el, richText } from "./dom.js";
import { questionPanel } from "./questions.js";
import { startServersPanel } from "./servers.js";
import { keptTimeline, TurnTimeline } from "./timeline.js";

// `timeline` and `asking`: the timeline and the turn of a stream paused on a question (state.answer),
// which the stream answering it goes on with: one timeline per turn. `stopping`: what aborts the
// running turn's request (Stop); `stopped`: a Stop may have left a question unanswered, which the
// next message then stops on the server; `resumable`: the turn a Stop cut off, which Resume continues.
const state = { agent: "main", thread: null, busy: false, cards: new Map(), answer: null, timeline: null, asking: null, answering: "main", stopping: null, stopped: false, resumable: null };
const $ = (id) => document.getElementById(id);

function newThreadId() {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 12);
}

function showError(message) {
  $("composer-error").textContent = message;
}

// ---------------------------------------------------------------- the conversation

// A turn's items (its message, the events it streamed or its history holds, "failed" notes,
// arguments edited in an approval, and its timeline) rendered into a fresh node; conversation.js
// decides which turns are in the page. What an item shows depends on the item alone (not on the
// page's state), so a turn rendered again once scrolled back looks as it did.
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

// `item` added to `turn`'s items, and shown in its node if it has one.
function record(turn, item, bubble = null) {
  turn.items.push(item);
  return turn.node ? showItem(turn.node.firstChild, item, bubble) : bubble;
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

function showItem(target, item, bubble) {
  switch (item.type) {
    case "user": {
      const node = el("li", { className: "message user" }, el("span", { className: "who", text: "you" }), el("div", { className: "text", text: item.text }));
      if (item.notSent) markNotSent(node, item.notSent);
      target.append(node);
      return null;
    }
    case "failed":
      target.append(el("li", { className: "message failed", role: "alert", text: item.message }));
      return bubble;
    case "stopped":
    case "resumed":
      target.append(el("li", { className: `message ${item.type}`, role: "status", text: item.message }));
      return null;
    case "edited":  // the arguments an approval's answer edited: the call ran with them
      state.cards.get(item.id)?.setEditedArgs(item.args);
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

// An answer's bubble, named by the agent answering (`answering`, recorded with its events) when a
// handoff made it another than the one chosen in the menu.
function assistantBubble(target, answering) {
  const text = el("div", { className: "text" });
  const who = !answering || answering === state.agent ? "agent" : answering;
  const node = el("li", { className: "message assistant" }, el("span", { className: "who", text: who }), text);
  target.append(node);
  return { node, text, streamed: false };
}

// Shows the events of one stream of `turn` as they come (recording them in its items, so the turn
// can be rendered again once scrolled away and back); returns the handler of the stream. A stream
// that pauses on a question keeps its timeline (state.timeline) and turn (state.asking) for the
// stream that answers it: one timeline per turn, shown when the turn ends.
function turnView(turn, timeline) {
  let bubble = null;
  const results = new Map();
  return ({ kind, data }) => {
    const following = conversation.atEnd();
    if (kind === "end") {
      turn.live = false;
      state.timeline = state.answer ? timeline : null;
      state.asking = state.answer ? turn : null;
      if (!state.answer) record(turn, { type: "timeline", timeline }, bubble);
    } else if (kind === "step") {
      timeline.request(data);
    } else if (kind === "detail") {
      const result = results.get(data.id);
      if (result) result.detail = data;
      state.cards.get(data.id)?.setDetail(data);
    } else if (kind === "failed") {
      record(turn, { type: "failed", message: data.message }, bubble);
    } else if (kind === "event") {
      timeline.observe(data);
      const item = { ...data };
      if (item.type === "tool_result") results.set(item.id, item);
      if (item.type === "approval" || item.type === "elicitation" || item.type === "sampling") state.answer = item;
      if (item.type === "handoff") showAnswering(item.to, item.from);
      if (item.type === "token" || item.type === "final") item.answering = state.answering;  // who says it
      bubble = record(turn, item, bubble);
    }
    if (following) conversation.toEnd();
  };
}

// `event` shown in `target`; what it shows depends on the event alone (a turn rendered again
// shows the same), the page's state is changed by turnView as events arrive.
function showEvent(target, event, bubble) {
  switch (event.type) {
    case "token":
      if (event.agent && event.agent !== event.answering) return bubble;  // an agent of agents: works; its answer comes as a tool result
      if (!bubble) bubble = assistantBubble(target, event.answering);
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
    case "progress": {  // on the card of the latest call of its tool still running (or made again by Resume)
      const running = [...state.cards.values()].reverse().find((shown) => shown.call.name === event.tool && (!shown.result || shown.result.stopped));
      running?.setProgress(event);
      return bubble;
    }
    case "tool_result":
      state.cards.get(event.id)?.setResult(event);
      return null;
    case "final":
      if (!bubble) bubble = assistantBubble(target, event.answering);
      if (!bubble.streamed || event.output) bubble.text.textContent = event.output ? JSON.stringify(event.output, null, 2) : event.text;
      bubble.text.replaceChildren(...richText(bubble.text.textContent));  // its addresses as links
      bubble.node.classList.add("final");
      return null;
    case "handoff":
      target.append(el("li", { className: "message notice handoff", text: `${event.from} handed the conversation to ${event.to}${event.reason ? `: ${event.reason}` : ""}` }));
      return null;
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
  showControls();
  $("log").setAttribute("aria-busy", busy ? "true" : "false");
}

// Stop while a turn runs or a question waits; Resume once a Stop cut a turn off.
function showControls() {
  $("stop").hidden = !state.busy && !state.answer;
  $("resume").hidden = state.busy || Boolean(state.answer) || !state.resumable;
}

const STOPPED_RUNNING = "Stopped while it was running: it may or may not have taken effect.";

// `turn` stopped (Stop, Escape): marked stopped, not failed; its calls left without a result
// marked stopped (a call a stopped approval asked about did not run), its timeline shown.
function markStopped(turn, timeline, question) {
  // A call stopped before and made again by Resume is stopped again.
  const answered = new Set(turn.items.filter((item) => item.type === "tool_result" && !item.stopped).map((item) => item.id));
  for (const call of turn.items.filter((item) => item.type === "tool_call" && !answered.has(item.id))) {
    const notRun = question?.type === "approval" && question.id === call.id;
    const result = { type: "tool_result", id: call.id, name: call.name, status: "error", stopped: true, text: notRun ? "Not run: the turn was stopped at its approval." : STOPPED_RUNNING };
    timeline?.observe({ ...result, status: "stopped" });
    record(turn, result);
  }
  record(turn, { type: "stopped", message: question ? `Stopped at its question (${question.type}).` : "Stopped: the turn was stopped, its running tool calls cancelled." });
  if (timeline) record(turn, { type: "timeline", timeline });
}

async function runTurn(body, turn) {
  setBusy(true);
  const asked = state.answer;
  const timeline = body.answer !== undefined && state.timeline ? state.timeline : new TurnTimeline();
  const stopping = new AbortController();
  state.stopping = stopping;
  const view = turnView(turn, timeline);
  let ended = false;
  let opened = false;
  const onEvent = (event) => { ended = ended || event.kind === "end"; view(event); };
  try {
    // A refused answer leaves its question in place, with the reason.
    await postStream("/api/turn", { agent: state.agent, thread: state.thread, ...body }, onEvent, () => {
      opened = true;
      state.answer = null;
      if (body.stop_question) state.stopped = false;
      $("question").replaceChildren();
      if (asked?.type === "approval" && body.answer?.action === "edit") record(turn, { type: "edited", id: asked.id, args: body.answer.args });
    }, stopping.signal);
  } catch (exc) {
    if (!stopping.signal.aborted) throw exc;
    if (!ended) {  // Stop: the closed request stopped the turn on the server
      const question = state.answer ?? (opened ? null : asked);  // one it asked, or whose answer may not have reached it
      state.answer = null;
      state.timeline = null;
      state.asking = null;
      state.stopped = true;
      state.resumable = question ? null : turn;
      markStopped(turn, timeline, question);
      $("message").focus();
    }
  } finally {
    if (state.stopping === stopping) state.stopping = null;
    turn.live = false;  // ended, or never started (the request was refused)
    setBusy(false);
  }
  showQuestion(state.answer);
  loadThreads();
}

// Stop (its button, Escape): the running turn's request is closed, which stops the turn on the
// server as Ctrl-C stops the chat's; a question a turn waits on is dismissed, as Ctrl-C at the
// chat's question does (the next message starts a new turn; the call asked about does not run).
function stop() {
  if (state.stopping) {
    state.stopping.abort();
    return;
  }
  const question = state.answer;
  if (!question) return;
  state.answer = null;
  state.stopped = true;
  if (state.asking) markStopped(state.asking, state.timeline, question);
  state.asking = null;
  state.timeline = null;
  showQuestion(null);
  $("message").focus();
}

// Resume: the turn a Stop cut off goes on from the step it had reached (the chat's /resume); a
// call it stopped runs again.
async function resume() {
  const stopped = state.resumable;
  if (!stopped || state.busy) return;
  state.resumable = null;
  state.stopped = false;  // the stopped turn had no question
  showError("");
  const turn = conversation.resume(stopped);
  record(turn, { type: "resumed", message: "Resumed from the step it had reached." });
  try {
    await runTurn({ resume: true }, turn);
  } catch (exc) {
    showError(failure(exc));
  }
}

function showQuestion(question) {
  const area = $("question");
  area.replaceChildren();
  showControls();
  if (!question) return;
  const panel = questionPanel(question, async (answer) => {
    // The answer's stream goes on in the turn that asked (a message refused meanwhile may follow it).
    await runTurn({ answer }, conversation.resume(state.asking)).catch((exc) => { throw new Error(failure(exc)); });
  });
  area.append(panel);
  panel.querySelector("button, input, select, textarea")?.focus();
}

async function send() {
  const box = $("message");
  const text = box.value;
  if (!text.trim() || state.busy) return;
  showError("");
  state.resumable = null;  // a new message closes the stopped turn (its calls answered as stopped)
  if (!state.thread) state.thread = newThreadId();
  box.value = "";
  const sent = { type: "user", text };
  const turn = conversation.begin([sent]);
  try {
    await runTurn(state.stopped ? { text, stop_question: true } : { text }, turn);
  } catch (exc) {
    if (!conversation.turns.includes(turn)) return;  // its thread was left meanwhile
    if (turn.items.length > 1) {
      showError(failure(exc));
    } else {  // refused before its turn started: not part of the conversation
      sent.notSent = failure(exc);  // in its item: rendered again, it is marked again
      const shown = turn.node?.querySelector(".message.user");
      if (shown) markNotSent(shown, sent.notSent);
      if (!box.value) box.value = text;
    }
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
    item.classList.remove("renaming");
    await loadThreads();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); save().catch((exc) => showError(exc.message)); }
    if (event.key === "Escape") { event.preventDefault(); item.classList.remove("renaming"); loadThreads(); }
  });
  item.classList.add("renaming");
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
  state.stopped = false;
  state.resumable = null;
  state.timeline = null;
  state.asking = null;
  showAnswering(state.agent);
  closeApps("the thread was closed");
  state.cards.clear();
  conversation.clear();
  state.answer = null;
  $("question").replaceChildren();
  showControls();
  $("message").focus();
}

async function openThread(id) {
  state.thread = id;
  state.stopped = false;
  state.resumable = null;
  state.cards.clear();
  const { items, question, timelines, answering } = await getJson(`/api/history?agent=${encodeURIComponent(state.agent)}&thread=${encodeURIComponent(id)}`);
  closeApps("the thread was closed");
  // The turns, each from a message from the user (its position among them: its kept timeline's key).
  const turns = [];
  const positions = [];
  let position = -1;
  for (const item of items) {
    if (item.type === "user") position += 1;
    if (item.type === "user" || !turns.length) {
      turns.push([]);
      positions.push(position);
    }
    turns[turns.length - 1].push(item);
  }
  state.timeline = null;
  state.asking = null;
  turns.forEach((turnItems, index) => {
    const entries = timelines?.[String(positions[index])];
    if (!entries) return;
    const timeline = keptTimeline(entries);
    if (index === turns.length - 1 && question) state.timeline = timeline;  // the answer's stream goes on with it
    else turnItems.push({ type: "timeline", timeline });
  });
  conversation.load(turns);
  if (question) state.asking = conversation.turns[conversation.turns.length - 1] ?? null;
  showAnswering(answering ?? state.agent);  // the agent answering now (the history's answers all say "agent")
  state.answer = question;
  showQuestion(question);
  loadThreads();
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
  $("stop").addEventListener("click", stop);
  $("resume").addEventListener("click", resume);
  document.addEventListener("keydown", (event) => {  // Escape stops, unless something of the page took it
    if (event.key === "Escape" && !event.defaultPrevented && (state.stopping || state.answer)) {
      event.preventDefault();
      stop();
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

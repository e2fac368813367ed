// A turn's timeline: its model steps (from the usage events: duration, tokens, cost, model) and
// its tool calls (duration, status) on the turn's time axis, as the page saw them arrive, with
// the turn's totals.
import { el } from "./dom.js";

function counted(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function tokens(totals) {
  return `${totals.total_tokens} tokens (${totals.input_tokens} in, ${totals.output_tokens} out)`;
}

function cost(totals) {
  return totals.cost === null ? "cost unknown" : `$${totals.cost.toFixed(6)}`;
}

// What a model step was given: its system prompt, the tools offered, how many messages.
function given(request) {
  return el("details", {}, el("summary", { text: `what this step was given: ${request.tools.length} tools, ${request.messages} messages` }),
    el("h4", { text: "System prompt" }), el("pre", { className: "given-prompt", text: request.system_prompt || "(none)" }),
    el("h4", { text: "Tools offered" }),
    el("ul", { className: "given-tools" }, ...request.tools.map((name) => el("li", {}, el("code", { text: name })))));
}

export class TurnTimeline {
  constructor() {
    this.started = performance.now();
    this.rows = [];  // {kind, label, facts, start, end} in milliseconds since the turn started
    this.calls = new Map();
    this.totals = null;
    this.requests = [];  // what each model step was given, in order (its usage event follows)
  }

  request(given) {
    this.requests.push(given);
  }

  // `now`: when it arrived, in milliseconds since the turn started (default: now).
  observe(event, now = performance.now() - this.started) {
    if (event.type === "usage") {
      const step = event.step;
      const steps = this.rows.filter((row) => row.kind === "model").length + 1;
      this.rows.push({ kind: "model", given: this.requests.shift(), label: `model step ${steps}${event.agent !== "main" ? ` (${event.agent})` : ""}`,
        facts: `${Math.round(step.seconds * 1000)} ms · ${tokens(step)} · ${cost(step)}${event.model ? ` · ${event.model}` : ""}`,
        start: Math.max(0, now - step.seconds * 1000), end: now });
      this.totals = event.turn;
    } else if (event.type === "tool_call") {
      this.calls.set(event.id, now);
    } else if (event.type === "tool_result") {
      const ms = typeof event.ms === "number" ? event.ms : now - (this.calls.get(event.id) ?? now);
      this.rows.push({ kind: "tool", label: event.name, facts: `${Math.round(ms)} ms · ${event.status}`,
        start: Math.max(0, now - ms), end: now });
    }
  }

  // The timeline as a collapsed section, or null when the turn had no step to show.
  render() {
    if (!this.rows.length) return null;
    const span = Math.max(1, ...this.rows.map((row) => row.end));
    const list = el("ol", { className: "timeline-rows" });
    for (const row of this.rows) {
      const bar = el("span", { className: `bar ${row.kind}` });
      // CSSOM, not a style attribute: the page's Content-Security-Policy allows no inline styles.
      bar.style.marginLeft = `${(100 * row.start / span).toFixed(2)}%`;
      bar.style.width = `${Math.max(0.5, 100 * (row.end - row.start) / span).toFixed(2)}%`;
      list.append(el("li", { className: `timeline-row ${row.kind}` },
        el("span", { className: "timeline-label", text: row.label }), el("span", { className: "timeline-axis" }, bar),
        el("span", { className: "timeline-facts muted", text: row.facts })));
      if (row.given) list.append(el("li", { className: "timeline-given" }, given(row.given)));
    }
    const total = this.totals
      ? el("p", { className: "timeline-total", text: `turn: ${tokens(this.totals)} · ${cost(this.totals)} · ${counted(this.totals.model_steps, "model step")}, ${counted(this.totals.tool_calls, "tool call")}` })
      : null;
    return el("li", { className: "timeline" }, el("details", {}, el("summary", { text: "Timeline of this turn" }), list, total));
  }
}

// The timeline of a turn kept by the server (runner.web.timelines): its entries replayed at the
// times they arrived; a turn resumed later goes on from them.
export function keptTimeline(entries) {
  const timeline = new TurnTimeline();
  const first = entries.length ? entries[0].at : Date.now();
  timeline.started = performance.now() - (Date.now() - first);
  for (const { at, event } of entries) {
    if (event.type === "model_request") timeline.request(event);
    else timeline.observe(event, at - first);
  }
  return timeline;
}

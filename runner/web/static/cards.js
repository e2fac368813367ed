// A tool call as a card: the tool and its server, the arguments, the result rendered (text,
// images, audio, files, structured content), status and duration, the times it was made again
// (on a fallback server, or after a URL visit) and the fallback that answered, the arguments it
// ran with when edited in its approval, and the raw JSON on request.
import { el, renderValue, richText, textWithLinks } from "./dom.js";

const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const AUDIO_TYPES = /^audio\/(wav|wave|x-wav|mpeg|mp3|ogg|webm|flac|aac|mp4)$/;

// Functions called with (slot, call, result, detail) once a card's result has its detail: where
// what a tool's result brings beyond content (an MCP App's frame) is mounted in the card.
export const resultMounts = [];

export class ToolCard {
  constructor(call) {
    this.call = call;
    this.result = null;
    this.detail = null;
    this.retries = [];
    this.mounted = false;
    this.status = el("span", { className: "status running", text: "running" });
    this.duration = el("span", { className: "duration muted" });
    this.progress = el("span", { className: "progress muted", hidden: true });
    this.retryCount = el("span", { className: "retry-count", hidden: true });
    this.fallback = el("span", { className: "fallback-used", hidden: true });
    this.retryList = el("ul", { className: "retries", "aria-label": "Made again", hidden: true });
    this.server = el("span", { className: "server muted" });
    this.body = el("div", { className: "result" });
    this.extra = el("div", { className: "result-extra" });
    this.raw = el("pre", { className: "raw" });
    this.args = el("div", { className: "args" }, el("h4", { text: "Arguments" }), renderValue(call.args));
    const title = el("span", { className: "tool-name", text: call.name });
    const agent = call.agent ? el("span", { className: "muted", text: ` (agent ${call.agent})` }) : null;
    this.node = el("li", { className: "card tool-card", "data-call-id": call.id, "aria-label": `tool call ${call.name}` },
      el("div", { className: "card-head" }, title, agent, this.server, this.status, this.progress, this.duration, this.retryCount, this.fallback),
      this.args,
      this.retryList,
      this.body,
      this.extra,
      el("details", {}, el("summary", { text: "Raw JSON" }), this.raw));
    this.updateRaw();
  }

  // The arguments the call ran with, edited in its approval: shown, and said to be edited.
  setEditedArgs(args) {
    this.call = { ...this.call, args, asked_args: this.call.args, edited: true };
    this.args.replaceChildren(el("h4", { text: "Arguments (edited before it ran)" }), renderValue(args));
    this.updateRaw();
  }

  // What the running call's server last said of its progress (a slow call: what it is at).
  setProgress(progress) {
    if (this.result && !this.result.stopped) return;
    if (this.result) {  // stopped, and made again (Resume): running again
      this.status.textContent = "running";
      this.status.className = "status running";
    }
    const done = progress.total ? `${progress.progress}/${progress.total}` : "";
    this.progress.replaceChildren(...richText([progress.message, done].filter(Boolean).join(" ")));
    this.progress.hidden = !this.progress.textContent;
  }

  setResult(result) {
    this.result = result;
    this.progress.hidden = true;
    // A call its turn's Stop cut off: the model is told it may have acted (an error to the model).
    this.status.textContent = result.stopped ? "stopped" : result.status;
    this.status.className = `status ${result.stopped ? "stopped" : result.status === "error" ? "error" : "success"}`;
    if (typeof result.ms === "number") this.duration.textContent = `${Math.round(result.ms)} ms`;
    this.body.replaceChildren(el("h4", { text: result.stopped ? "Stopped" : result.status === "error" ? "Error" : "Result" }),
      textWithLinks("pre", { className: "result-text" }, result.text));
    this.updateRaw();
  }

  // The call was made again (a `tool_retry` event): counted, the fallback named, the reason listed.
  addRetry(retry) {
    this.retries.push(retry);
    const count = this.retries.length;
    this.retryCount.textContent = `${count} ${count === 1 ? "retry" : "retries"}`;
    this.retryCount.hidden = false;
    if (retry.fallback) {
      this.fallback.textContent = `fallback used: ${retry.fallback}`;
      this.fallback.hidden = false;
    }
    const where = retry.fallback ? `on ${retry.fallback} (the fallback of ${retry.server})` : `on ${retry.server}`;
    this.retryList.append(el("li", { text: `made again ${where}: ${retry.reason}` }));
    this.retryList.hidden = false;
    this.updateRaw();
  }

  setDetail(detail) {
    this.detail = detail;
    if (detail.server) this.server.textContent = ` on ${detail.server}` + (detail.original && detail.original !== this.call.name ? ` (${detail.original})` : "");
    const parts = [];
    for (const block of detail.blocks || []) parts.push(renderBlock(block));
    if (detail.structured !== null && detail.structured !== undefined) {
      parts.push(el("h4", { text: "Structured content" }), renderValue(detail.structured));
    }
    if (parts.length) {
      this.body.replaceChildren(el("h4", { text: this.result && this.result.status === "error" ? "Error" : "Result" }), ...parts);
    }
    if (!this.mounted) {  // once: what is mounted (an app's frame) must not move or reload
      this.mounted = true;
      for (const mount of resultMounts) mount(this.extra, this.call, this.result, detail);
    }
    this.updateRaw();
  }

  updateRaw() {
    const shown = { call: this.call, result: this.result, detail: this.detail };
    if (this.retries.length) shown.retries = this.retries;
    this.raw.textContent = JSON.stringify(shown, null, 2);
  }
}

function renderBlock(block) {
  if (block.type === "text") return textWithLinks("pre", { className: "result-text" }, block.text);
  const mime = String(block.mime_type || "").toLowerCase();
  if (block.type === "image" && IMAGE_TYPES.has(mime) && block.base64) {
    return el("img", { className: "result-image", src: `data:${mime};base64,${block.base64}`, alt: `image (${mime}) from the tool` });
  }
  if (block.type === "audio" && AUDIO_TYPES.test(mime) && block.base64) {
    return el("audio", { controls: true, src: `data:${mime};base64,${block.base64}`, "aria-label": `audio (${mime}) from the tool` });
  }
  const size = block.base64 ? Math.floor(block.base64.length * 3 / 4) : 0;
  return el("p", { className: "result-file", text: `${block.type} (${mime || "unknown type"}, about ${size} bytes)` });
}

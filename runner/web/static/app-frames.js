// MCP Apps in the conversation: the card of a call of a tool with an app mounts the app's page
// (apps-host.js: a sandboxed, opaque-origin frame talking only through the bridge) with the
// call's arguments and result. The app's tool calls go to /api/app-call, through the manifest's
// policy; an approval is asked in the card, as the page asks its other approvals.
import { postJson } from "./api.js";
import { mountApp, openableUrl } from "./apps-host.js";
import { resultMounts } from "./cards.js";
import { el } from "./dom.js";
import { questionPanel } from "./questions.js";

const MAX_HEIGHT = 600;
const shown = new Map();  // the mounted apps' handles and their frames' places, closed when their thread is left

function hostContext() {
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  return { theme: dark ? "dark" : "light", locale: navigator.language || "en-US" };
}

// The person's decision on `approval`, asked in `area`; the panel goes once answered.
function askInCard(area, approval) {
  return new Promise((resolve) => {
    const panel = questionPanel(approval, async (decision) => {
      panel.remove();
      resolve(decision);
    });
    panel.classList.add("app-approval");
    area.append(panel);
    panel.querySelector("button")?.focus();
  });
}

function mountInCard(slot, call, result, detail) {
  const app = detail.app;
  if (!app) return;
  if (app.error) {
    slot.append(el("p", { className: "error app-error", role: "alert", text: `The app cannot be shown: ${app.error}` }));
    return;
  }
  const frameArea = el("div", { className: "app-frame" });
  const questions = el("div", { className: "app-questions" });  // beside the frame: the frame never moves
  slot.append(el("h4", { text: "App" }), frameArea, questions);
  let handle = null;
  handle = mountApp(frameArea, {
    src: app.src,
    csp: app.csp,
    toolName: app.toolName,
    tool: app.tool || undefined,
    toolInput: call.args || {},
    toolResult: app.toolResult,
    hostContext: hostContext(),
    maxHeight: MAX_HEIGHT,
    async callTool(name, args) {
      let answer;
      for (;;) {
        let reply;
        try {
          reply = await postJson("/api/app-call", { key: app.key, name, arguments: args, answer });
        } catch (exc) {
          throw new Error(exc.message);  // the refusal's text is what the app is told
        }
        if (!reply.approval) return reply.result;
        answer = await askInCard(questions, reply.approval);
      }
    },
    async openLink(url) {
      const safe = openableUrl(url);
      if (safe === null) throw new Error("only http and https links are opened");
      window.open(safe, "_blank", "noopener,noreferrer");
    },
    onClose() {
      shown.delete(handle);
    },
  });
  shown.set(handle, frameArea);
}

// Close every app shown (the thread is left or deleted): their bridges end, their frames go.
export function closeApps(reason) {
  for (const handle of [...shown.keys()]) handle.destroy(reason);
  shown.clear();
}

// Close the apps shown inside `node` (a turn leaving the page: shown again, it mounts them anew).
export function closeAppsIn(node, reason) {
  for (const [handle, place] of [...shown]) {
    if (node.contains(place)) {
      handle.destroy(reason);
      shown.delete(handle);
    }
  }
}

resultMounts.push(mountInCard);

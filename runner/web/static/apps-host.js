// MCP Apps, the host side of the bridge (the io.modelcontextprotocol/ui extension, SEP-1865,
// 2026-01-26): an app's page runs in an <iframe sandbox="allow-scripts"> -- an opaque origin, so
// it reaches neither this page nor its cookies, storage or API -- and talks to the page only
// through JSON-RPC 2.0 messages over postMessage, which this module checks one by one.
//
// The frame's document is served by the page's server with runner.web.apps.AppPage.headers():
// its Content-Security-Policy arrives as an HTTP header, so the page's own policy does not apply
// to it (a srcdoc frame would inherit the page's policy and its scripts could not run). Nothing
// here evaluates code or writes HTML: only attributes, textContent and postMessage.
//
//   const app = mountApp(container, {src, csp, toolName, toolInput, toolResult, callTool,
//                                    openLink, hostContext});
//   app.sendToolResult(result);   // when the tool finishes after the frame was mounted
//   await app.teardown("closed"); // asks the app, then removes the frame

export const PROTOCOL_VERSION = "2026-01-26";
export const HOST_INFO = Object.freeze({name: "mcp-run", version: "1"});

const ERROR = Object.freeze({
  invalidParams: -32602,
  methodNotFound: -32601,
  refused: -32000, // implementation-defined: the host declined or the call failed
});
const MAX_TOOL_NAME = 128;
// An app's tools/call and ui/open-link requests waiting for the page at once; more are refused
// at once (a page cannot flood the person with approvals or the servers with calls).
export const MAX_IN_FLIGHT = 8;
const DEFAULT_MAX_HEIGHT = 800;
const TEARDOWN_WAIT_MS = 2000;

function isObject(value) {
  return Object.prototype.toString.call(value) === "[object Object]";
}

function isId(value) {
  return (typeof value === "string" && value.length <= 200) || Number.isSafeInteger(value);
}

// A URL the page may open: http(s) only, never javascript:, data:, file:, blob:, ...
export function openableUrl(value) {
  if (typeof value !== "string" || value.length > 4096) return null;
  let url;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

// The frame's document must come from the page's own server (where it is served with its policy).
function sameOriginUrl(value) {
  const url = new URL(value, window.location.href);
  if (url.origin !== window.location.origin) {
    throw new Error(`mountApp: src must be a URL of this page's server, not ${url.origin}`);
  }
  return url.href;
}

class RequestError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * Show an MCP App in `container` and bridge it.
 *
 * options.src         URL (this page's origin) of the app's document, served with its headers
 * options.csp         the domains the document's policy approved (AppCsp.declared()), told to the app
 * options.toolName    the tool whose page this is (the frame's accessible title)
 * options.tool        its MCP definition, if known (the app gets it as hostContext.toolInfo)
 * options.toolInput   the call's arguments, if known yet (else app.sendToolInput later)
 * options.toolResult  the CallToolResult, if known yet (else app.sendToolResult later)
 * options.callTool    async (name, args) => CallToolResult; throw to refuse (the error's message
 *                     is what the app is told). Without it, the app cannot call tools.
 * options.openLink    async (url) => void, only ever given http(s) URLs. Without it, no links.
 * options.hostContext merged into the hostContext of the ui/initialize answer (theme, locale, ...)
 * options.maxHeight   the tallest the frame grows when the app reports its size (pixels)
 * options.onLog       (params) => void for the app's notifications/message
 * options.onClose     (reason) => void when the bridge closes (teardown, destroy, navigation)
 */
export function mountApp(container, options) {
  if (!(container instanceof Element)) throw new TypeError("mountApp: container must be an element");
  if (!isObject(options) || typeof options.src !== "string") throw new TypeError("mountApp: options.src is required");
  const callTool = typeof options.callTool === "function" ? options.callTool : null;
  const openLink = typeof options.openLink === "function" ? options.openLink : null;
  const maxHeight = Number.isFinite(options.maxHeight) ? options.maxHeight : DEFAULT_MAX_HEIGHT;
  const toolName = typeof options.toolName === "string" ? options.toolName : "app";

  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("allow", "");
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.setAttribute("title", `App of ${toolName}`);
  frame.className = "mcp-app-frame";
  frame.style.width = "100%";
  frame.style.height = "150px";
  frame.style.border = "0";

  let initialized = false;
  let closed = false;
  let loads = 0;
  let nextId = 1;
  let inputSent = false;
  let inFlight = 0;
  const queued = []; // notifications held until the app says it is initialized (the spec's rule)
  const pending = new Map(); // our requests (ui/resource-teardown) awaiting the app's answer

  function post(message) {
    // An opaque origin cannot be named: "*" is the only target, and the frame is ours alone.
    if (!closed && frame.contentWindow) frame.contentWindow.postMessage(message, "*");
  }

  function notify(method, params) {
    const message = {jsonrpc: "2.0", method, params};
    if (initialized) post(message);
    else queued.push(message);
  }

  function answer(id, result) {
    post({jsonrpc: "2.0", id, result});
  }

  function fail(id, code, message) {
    post({jsonrpc: "2.0", id, error: {code, message: String(message).slice(0, 1000)}});
  }

  function initializeResult() {
    const hostCapabilities = {
      logging: {},
      sandbox: {permissions: {}, csp: isObject(options.csp) ? options.csp : {}},
    };
    if (callTool) hostCapabilities.serverTools = {};
    if (openLink) hostCapabilities.openLinks = {};
    const hostContext = {
      displayMode: "inline",
      availableDisplayModes: ["inline"],
      platform: "web",
      containerDimensions: {maxHeight},
      ...(isObject(options.hostContext) ? options.hostContext : {}),
    };
    if (isObject(options.tool)) hostContext.toolInfo = {tool: options.tool};
    return {protocolVersion: PROTOCOL_VERSION, hostInfo: HOST_INFO, hostCapabilities, hostContext};
  }

  async function bounded(work) {
    if (inFlight >= MAX_IN_FLIGHT) {
      throw new RequestError(ERROR.refused, `too many requests at once (at most ${MAX_IN_FLIGHT})`);
    }
    inFlight += 1;
    try {
      return await work();
    } finally {
      inFlight -= 1;
    }
  }

  async function handleRequest(method, params) {
    switch (method) {
      case "ui/initialize":
        return initializeResult();
      case "ping":
        return {};
      case "ui/request-display-mode":
        return {mode: "inline"};
      case "tools/call": {
        if (!callTool) throw new RequestError(ERROR.methodNotFound, "this host does not call tools for apps");
        if (!initialized) throw new RequestError(ERROR.refused, "tools/call before ui/notifications/initialized");
        const name = params.name;
        const args = params.arguments === undefined ? {} : params.arguments;
        if (typeof name !== "string" || name.length === 0 || name.length > MAX_TOOL_NAME || !isObject(args)) {
          throw new RequestError(ERROR.invalidParams, "tools/call needs a tool name and an arguments object");
        }
        let result;
        try {
          result = await bounded(() => callTool(name, args));
        } catch (error) {
          if (error instanceof RequestError) throw error;
          throw new RequestError(ERROR.refused, error instanceof Error ? error.message : String(error));
        }
        if (!isObject(result)) throw new RequestError(ERROR.refused, "the tool call gave no result");
        return result;
      }
      case "ui/open-link": {
        if (!openLink) throw new RequestError(ERROR.methodNotFound, "this host does not open links for apps");
        const url = openableUrl(params.url);
        if (url === null) throw new RequestError(ERROR.invalidParams, "only http and https links are opened");
        try {
          await bounded(() => openLink(url));
        } catch (error) {
          if (error instanceof RequestError) throw error;
          throw new RequestError(ERROR.refused, error instanceof Error ? error.message : String(error));
        }
        return {};
      }
      default:
        throw new RequestError(ERROR.methodNotFound, `method not supported by this host: ${method.slice(0, 100)}`);
    }
  }

  function handleNotification(method, params) {
    if (method === "ui/notifications/initialized") {
      if (initialized) return;
      initialized = true;
      for (const message of queued.splice(0)) post(message);
    } else if (method === "ui/notifications/size-changed") {
      if (Number.isFinite(params.height) && params.height >= 0) {
        frame.style.height = `${Math.min(Math.ceil(params.height), maxHeight)}px`;
      }
    } else if (method === "notifications/message") {
      if (typeof options.onLog === "function") options.onLog(params);
    }
  }

  function handleResponse(message) {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    waiter();
  }

  function onMessage(event) {
    // Only this frame's window, and only while it shows its own (opaque-origin) document.
    if (closed || event.source !== frame.contentWindow || event.origin !== "null") return;
    const message = event.data;
    if (!isObject(message) || message.jsonrpc !== "2.0") return;
    if (typeof message.method === "string") {
      const params = message.params === undefined ? {} : message.params;
      if (!isObject(params) || message.method.length > 200) {
        if (isId(message.id)) fail(message.id, ERROR.invalidParams, "params must be an object");
        return;
      }
      if (message.id === undefined) {
        handleNotification(message.method, params);
        return;
      }
      if (!isId(message.id)) return;
      handleRequest(message.method, params).then(
        (result) => answer(message.id, result),
        (error) => fail(message.id, error instanceof RequestError ? error.code : ERROR.refused,
                        error instanceof Error ? error.message : String(error)),
      );
    } else if (isId(message.id) && ("result" in message || "error" in message)) {
      handleResponse(message);
    }
  }

  function close(reason) {
    if (closed) return;
    closed = true;
    window.removeEventListener("message", onMessage);
    for (const waiter of pending.values()) waiter();
    pending.clear();
    frame.remove();
    if (typeof options.onClose === "function") options.onClose(reason);
  }

  frame.addEventListener("load", () => {
    loads += 1;
    // A second load means the app navigated its frame away: whatever is there now is not the
    // page the server declared, so the bridge is closed and the frame removed.
    if (loads > 1) close("the app left its page");
  });
  window.addEventListener("message", onMessage);
  frame.src = sameOriginUrl(options.src);
  container.append(frame);

  const handle = {
    frame,
    get initialized() {
      return initialized;
    },
    get closed() {
      return closed;
    },
    sendToolInput(args) {
      if (inputSent) return;
      inputSent = true;
      notify("ui/notifications/tool-input", {arguments: isObject(args) ? args : {}});
    },
    sendToolResult(result) {
      handle.sendToolInput({}); // the spec requires tool-input before tool-result
      notify("ui/notifications/tool-result", isObject(result) ? result : {content: []});
    },
    sendToolCancelled(reason) {
      handle.sendToolInput({});
      notify("ui/notifications/tool-cancelled", {reason: String(reason ?? "")});
    },
    sendHostContext(changes) {
      if (isObject(changes)) notify("ui/notifications/host-context-changed", changes);
    },
    // Ask the app to tear down (bounded wait for its answer), then close the bridge.
    teardown(reason = "closed") {
      if (closed) return Promise.resolve();
      if (!initialized) {
        close(reason);
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const id = `teardown-${nextId++}`;
        const timer = setTimeout(() => pending.get(id)?.(), TEARDOWN_WAIT_MS);
        pending.set(id, () => {
          clearTimeout(timer);
          pending.delete(id);
          close(reason);
          resolve();
        });
        post({jsonrpc: "2.0", id, method: "ui/resource-teardown", params: {reason: String(reason)}});
      });
    },
    destroy(reason = "destroyed") {
      close(reason);
    },
  };
  if (options.toolInput !== undefined) handle.sendToolInput(options.toolInput);
  if (options.toolResult !== undefined) handle.sendToolResult(options.toolResult);
  return handle;
}

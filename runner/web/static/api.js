// The page's API: every request carries this run's token (embedded in the page by the server
// that served it) in a header another site cannot send without a preflight, which is never allowed.

const TOKEN = document.querySelector('meta[name="mcp-run-token"]').content;

export class ApiError extends Error {}

function headers(extra = {}) {
  return { "X-MCP-Run-Token": TOKEN, ...extra };
}

async function refusal(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && typeof body.error === "string") message = body.error;
  } catch {
    // not JSON: the status says it
  }
  return new ApiError(message);
}

export async function getJson(path) {
  const response = await fetch(path, { headers: headers(), cache: "no-store" });
  if (!response.ok) throw await refusal(response);
  return response.json();
}

export async function postJson(path, body) {
  const response = await fetch(path, {
    method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body),
  });
  if (!response.ok) throw await refusal(response);
  return response.json();
}

// Server-sent events of a response, each as {kind, data}; `onEvent` is called as they arrive.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) onEvent({ kind, data: JSON.parse(data.join("\n")) });
    }
  }
}

// POST `body` to `path` and hand each server-sent event of the answer to `onEvent`.
// `onOpen` is called once the request is taken, before the first event; `signal` aborts the
// request (the server sees it closed: a turn's stream stops its turn).
export async function postStream(path, body, onEvent, onOpen = () => {}, signal = undefined) {
  const response = await fetch(path, {
    method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body), signal,
  });
  if (!response.ok) throw await refusal(response);
  onOpen();
  await readEvents(response, onEvent);
}

export async function getStream(path, onEvent, signal, onOpen = () => {}) {
  const response = await fetch(path, { headers: headers(), signal, cache: "no-store" });
  if (!response.ok) throw await refusal(response);
  onOpen();
  await readEvents(response, onEvent);
}

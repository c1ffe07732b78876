// The playground: a chat over linserve's public HTTP API only. Each answered
// turn leaves a checkpoint (a fork of the session at that turn), so the
// conversation can be forked at any turn: forking a checkpoint again starts
// a branch that continues from exactly that state. The tree of branches and
// the live session are kept in this browser's localStorage, and the sessions
// in the server's store, so both survive a reload and a server restart.
"use strict";

const $ = (id) => document.getElementById(id);
const saved = JSON.parse(localStorage.getItem("linserve-playground") || "null");
// nodes: checkpoint id -> {id, parent, session, messages}; live: the session
// the next turn continues, the messages it holds, the checkpoint it left.
let nodes = saved?.nodes ?? {};
let live = saved?.live ?? { session: null, messages: [], node: null };
let busy = false;

function save() {
  localStorage.setItem("linserve-playground", JSON.stringify({ nodes, live }));
}

function headers(extra = {}) {
  const token = $("token").value.trim();
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (!response.ok) {
    let message = `${response.status}`;
    try { message += `: ${(await response.json()).error.message}`; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

const postJson = (path, body) =>
  api(path, { method: "POST", headers: { "Content-Type": "application/json" },
              body: JSON.stringify(body) }).then((r) => r.json());

function status(text) { $("status").textContent = text; }

function render() {
  const list = $("messages");
  list.replaceChildren();
  live.messages.forEach((m) => {
    const item = document.createElement("li");
    item.className = m.role;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = m.role;
    item.append(role);
    if (m.reasoning) {
      const thought = document.createElement("span");
      thought.className = "reasoning";
      thought.textContent = m.reasoning;
      item.append(thought);
    }
    item.append(document.createTextNode(m.content));
    if (m.role === "assistant" && m.node && nodes[m.node]) {
      const fork = document.createElement("button");
      fork.className = "fork";
      fork.type = "button";
      fork.textContent = "fork here";
      fork.addEventListener("click", () => forkAt(m.node));
      item.append(fork);
    }
    list.append(item);
  });
  $("session-line").textContent = live.session
    ? `session ${live.session.slice(0, 8)}…` : "no session yet: the first turn makes one";
  renderTree();
  save();
}

function renderTree() {
  const children = {};
  Object.values(nodes).forEach((n) => (children[n.parent ?? "root"] ??= []).push(n));
  const build = (parent) => {
    const ul = document.createElement("ul");
    (children[parent] ?? []).forEach((n) => {
      const li = document.createElement("li");
      if (n.id === live.node) li.className = "current";
      const label = document.createElement("span");
      const last = n.messages.filter((m) => m.role === "user").pop();
      label.textContent = `turn ${n.messages.length / 2}: ${(last?.content ?? "").slice(0, 24)}`;
      label.title = "continue from this turn (a new branch)";
      label.addEventListener("click", () => forkAt(n.id));
      li.append(label);
      if (children[n.id]) li.append(build(n.id));
      ul.append(li);
    });
    return ul;
  };
  $("tree").replaceChildren(...build("root").childNodes);
}

// A new branch from a checkpoint: a fork of it, so the checkpoint stays as
// it was for later forks.
async function forkAt(nodeId) {
  if (busy) return;
  const node = nodes[nodeId];
  try {
    const fork = await api(`/v1/sessions/${node.session}/fork`, { method: "POST", body: "" })
      .then((r) => r.json());
    live = { session: fork.id, messages: structuredClone(node.messages), node: node.id };
    status(`forked at turn ${node.messages.length / 2}: session ${fork.id.slice(0, 8)}…`);
    render();
  } catch (error) {
    status(`fork failed: ${error.message}`);
  }
}

// Reads a chat completion's server-sent events, calling `onChunk` for each.
async function readEvents(response, onChunk) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data !== "[DONE]") onChunk(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  busy = true;
  $("send").disabled = true;
  const request = {
    messages: [{ role: "user", content: text }],
    max_tokens: Number($("max_tokens").value),
    temperature: Number($("temperature").value),
    top_p: Number($("top_p").value),
    stream: true,
    stream_options: { include_usage: true },
  };
  if ($("seed").value !== "") request.seed = Number($("seed").value);
  if (live.session) {
    request.session_id = live.session;
  } else {
    request.session = "new";
    if ($("named-state").value) request.initial_state = $("named-state").value;
  }
  const answer = { role: "assistant", content: "", reasoning: "" };
  live.messages.push({ role: "user", content: text }, answer);
  render();
  const started = performance.now();
  let firstToken = 0;
  let usage = null;
  try {
    const response = await api("/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
    live.session = response.headers.get("x-session-id") ?? live.session;
    await readEvents(response, (chunk) => {
      if (chunk.session_id) live.session = chunk.session_id;
      if (chunk.usage) usage = chunk.usage;
      const delta = chunk.choices?.[0]?.delta ?? {};
      if ((delta.content || delta.reasoning_content) && !firstToken) firstToken = performance.now();
      answer.content += delta.content ?? "";
      answer.reasoning += delta.reasoning_content ?? "";
      $("messages").lastChild.lastChild.textContent = answer.content;
    });
    const seconds = (performance.now() - (firstToken || started)) / 1000;
    const tokens = usage?.completion_tokens ?? 0;
    $("speed").textContent = `first token ${((firstToken || performance.now()) - started).toFixed(0)} ms` +
      (tokens > 1 && seconds > 0 ? `, ${((tokens - 1) / seconds).toFixed(1)} tokens/s` : "") +
      ` (${tokens} tokens)`;
    // The checkpoint of this turn: a fork that later branches start from.
    const checkpoint = await api(`/v1/sessions/${live.session}/fork`, { method: "POST", body: "" })
      .then((r) => r.json());
    nodes[checkpoint.id] = { id: checkpoint.id, parent: live.node, session: checkpoint.id,
                             messages: structuredClone(live.messages) };
    answer.node = checkpoint.id;
    nodes[checkpoint.id].messages[live.messages.length - 1].node = checkpoint.id;
    live.node = checkpoint.id;
    status("");
  } catch (error) {
    status(`failed: ${error.message}`);
    live.messages.splice(-2, 2);
  }
  busy = false;
  $("send").disabled = false;
  render();
}

async function exportSession() {
  if (!live.session) return status("no session to export yet");
  try {
    const blob = await (await api(`/v1/sessions/${live.session}/state`)).blob();
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = `${live.session}.state`;
    link.click();
    URL.revokeObjectURL(link.href);
    status(`exported ${blob.size} bytes`);
  } catch (error) {
    status(`export failed: ${error.message}`);
  }
}

async function importSession(file) {
  try {
    const session = await api("/v1/sessions/import", {
      method: "POST", headers: { "Content-Type": "application/octet-stream" },
      body: await file.arrayBuffer(),
    }).then((r) => r.json());
    live = { session: session.id, messages: [{ role: "system",
      content: `imported ${file.name}: ${session.position} tokens of history (their text stays in the file)` }],
      node: null };
    status(`imported as session ${session.id.slice(0, 8)}…`);
    render();
  } catch (error) {
    status(`import failed: ${error.message}`);
  }
}

async function refreshSessions() {
  try {
    const page = await (await api("/v1/sessions?page_size=100")).json();
    const rows = page.data.map((s) => {
      const row = document.createElement("tr");
      [s.id.slice(0, 12) + "…", s.position, s.state_bytes].forEach((v) => {
        const cell = document.createElement("td");
        cell.textContent = v;
        row.append(cell);
      });
      return row;
    });
    $("sessions").tBodies[0].replaceChildren(...rows);
  } catch (error) {
    status(`sessions: ${error.message}`);
  }
}

async function start() {
  $("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("prompt").value;
    if (!text.trim() || busy) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.ctrlKey) $("ask").requestSubmit();
  });
  $("new-chat").addEventListener("click", () => {
    live = { session: null, messages: [], node: null };
    render();
  });
  $("export").addEventListener("click", exportSession);
  $("import").addEventListener("change", (event) => {
    if (event.target.files[0]) importSession(event.target.files[0]);
  });
  $("refresh").addEventListener("click", refreshSessions);
  try {
    const model = (await (await api("/v1/models")).json()).data[0];
    $("model").textContent = `${model.id} (${model.architecture}, ${model.state_bytes_per_session} bytes a session)`;
    const states = (await (await api("/v1/states")).json()).data;
    states.forEach((s) => $("named-state").append(new Option(s.id, s.id)));
  } catch (error) {
    status(`${error.message} (a token may be needed)`);
  }
  // Continue where you left off: the kept session, if the server still has it.
  if (live.session) {
    try {
      await api(`/v1/sessions/${live.session}`);
      status("continuing where you left off");
    } catch (_) {
      live = { session: null, messages: [], node: null };
      status("the kept session is gone: a new conversation");
    }
  }
  render();
  refreshSessions();
}

start();

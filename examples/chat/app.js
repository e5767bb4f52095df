// The chat page: the AI SDK's AbstractChat with DefaultChatTransport on a dex-agents session.
// The chat ID (the session ID) lives in the URL's #hash, so a reload hydrates the chat from
// GET /api/chat/{id}/messages and resumes a running turn with resumeStream().
import { AbstractChat, DefaultChatTransport } from "ai";

class State {
  constructor(messages, onChange) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
    this.onChange = onChange;
  }
  get status() { return this._status; }
  set status(value) { this._status = value; this.onChange?.(); }
  get messages() { return this._messages; }
  set messages(value) { this._messages = value; this.onChange?.(); }
  pushMessage = (message) => { this.messages = [...this.messages, message]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => { this.messages = this.messages.map((m, i) => (i === index ? message : m)); };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor({ messages, onChange, ...init }) {
    super({ ...init, state: new State(messages, onChange) });
  }
}

const api = "/api/chat";
const id = location.hash.slice(1) || `chat-${crypto.randomUUID().slice(0, 8)}`;
history.replaceState(null, "", `#${id}`);

const list = document.getElementById("messages");
const status = document.getElementById("status");

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;  // always text, never HTML
  return node;
}

function renderPart(part) {
  if (part.type === "text") return element("p", "text", part.text);
  if (part.type === "reasoning") return element("p", "reasoning", part.text);
  if (part.type === "steering-message") return element("p", "steered", part.parts.map((p) => p.text).join(" "));
  if (!part.type.startsWith("tool-")) return null;
  const box = element("div", `tool ${part.state}`);
  box.dataset.tool = part.type.slice(5);
  box.append(element("span", "call", `${part.type.slice(5)} ${JSON.stringify(part.input ?? {})}`));
  if (part.state === "output-available") box.append(element("div", "output", `→ ${JSON.stringify(part.output)}`));
  if (part.state === "output-error") box.append(element("div", "output", `✗ ${part.errorText}`));
  if (part.state === "output-denied") box.append(element("div", "output", "✗ not approved"));
  if (part.state === "approval-requested") {
    const approve = element("button", "approve", "Approve");
    const reject = element("button", "reject", "Reject");
    approve.onclick = () => answer(part.approval.id, true);
    reject.onclick = () => answer(part.approval.id, false, prompt("Why not?") || undefined);
    box.append(approve, reject);
  }
  return box;
}

function render() {
  if (!chat) return;
  status.textContent = chat.status;
  list.replaceChildren(...chat.messages.map((message) => {
    const item = element("li", message.role);
    item.dataset.id = message.id;
    for (const part of message.parts) {
      const node = renderPart(part);
      if (node) item.append(node);
    }
    return item;
  }));
}

async function answer(approvalId, approved, reason) {
  await chat.addToolApprovalResponse({ id: approvalId, approved, reason });
  await chat.sendMessage();
}

let chat;
const response = await fetch(`${api}/${encodeURIComponent(id)}/messages`);
const messages = response.ok ? await response.json() : [];
chat = new Chat({
  id,
  messages,
  transport: new DefaultChatTransport({ api }),
  onChange: render,
  onError: (error) => { status.textContent = `error: ${error.message}`; },
});
render();
window.dexChat = chat;
await chat.resumeStream();  // a turn that runs (or waits for an approval) streams in again, from its start

document.getElementById("send").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = event.target.elements.text;
  const text = input.value;
  input.value = "";
  await chat.sendMessage({ text });
});

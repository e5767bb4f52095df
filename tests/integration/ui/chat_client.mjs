// The real AI SDK client (the pinned `ai` 7.x package) against `vercel_ai_app` serving the demo's order agent.
//
// node chat_client.mjs BASE_URL AI_MODULE_PATH
//
// Each scenario drives AbstractChat with DefaultChatTransport as a page does (sendMessage,
// addToolApprovalResponse then sendMessage(), resumeStream after a dropped connection, a reloaded page
// hydrated from GET …/messages), and asserts what the user would see. It prints one JSON line per
// scenario and exits 1 on the first failure.
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";

const [base, aiModule] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pathToFileURL(aiModule).href);
const api = `${base}/api/chat`;

class State {
  constructor(messages = []) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage = (message) => { this.messages = [...this.messages, message]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => { this.messages = this.messages.map((m, i) => (i === index ? message : m)); };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new State(messages) });
  }
}

function chat(id, { fetch, messages } = {}) {
  const errors = [];
  const instance = new Chat({
    id,
    messages,
    transport: new DefaultChatTransport({ api, fetch }),
    onError: (error) => errors.push(String(error)),
  });
  instance.errors = errors;
  return instance;
}

function assistant(instance) {
  const last = instance.messages.at(-1);
  assert.equal(last.role, "assistant", `the last message is the assistant's: ${JSON.stringify(instance.messages)}`);
  return last;
}

const text = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join(" | ");
const tool = (message, name) => message.parts.find((p) => p.type === `tool-${name}`);
const shape = (message) => message.parts.map((p) => `${p.type}:${p.state ?? ""}:${p.text ?? p.output ?? ""}`);

// A fetch whose first POST (or GET) response is cut after `chunks` reads, as a dropped connection is.
function dropping(chunks, method = "POST") {
  let dropped = false;
  return async (url, init = {}) => {
    const response = await fetch(url, init);
    if (dropped || (init.method ?? "GET") !== method || !response.body) return response;
    dropped = true;
    const reader = response.body.getReader();
    let seen = 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        if (++seen > chunks) {
          await reader.cancel();
          return controller.error(new TypeError("network error: the connection dropped"));
        }
        controller.enqueue(value);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

async function post(body) {
  const response = await fetch(api, { method: "POST", headers: { "content-type": "application/json" }, body });
  return { status: response.status, type: response.headers.get("content-type"), json: await response.json() };
}

const scenarios = {
  async plain() {
    const c = chat("chat-plain");
    await c.sendMessage({ text: "Hello there" });
    assert.equal(c.status, "ready", c.errors.join());
    const reply = assistant(c);
    assert.equal(reply.id, "assistant-turn-1");
    assert.match(text(reply), /I am the demo's scripted model/);
    await c.sendMessage({ text: "What is order 8?" });
    const second = assistant(c);
    assert.equal(second.id, "assistant-turn-2");
    assert.equal(tool(second, "find_order").state, "output-available");
    assert.deepEqual(tool(second, "find_order").input, { order_id: "8" });
    assert.match(text(second), /Order 8 \(a rain jacket, 89.00 EUR\) is shipped/);
    assert.equal(c.messages.length, 4);
    return { messages: c.messages.length };
  },

  async approval() {
    const c = chat("chat-approve");
    await c.sendMessage({ text: "Refund order 7 and tell the customer." });
    const asking = tool(assistant(c), "refund_order");
    assert.equal(asking.state, "approval-requested");
    assert.equal(asking.approval.id, "turn-1.call-2");
    assert.deepEqual(asking.input, { order_id: "7" });
    await c.addToolApprovalResponse({ id: asking.approval.id, approved: true });
    await c.sendMessage();
    assert.equal(c.status, "ready", c.errors.join());
    const done = assistant(c);
    assert.equal(c.messages.length, 2, "the answer continues the same assistant message");
    assert.equal(tool(done, "refund_order").state, "output-available");
    assert.match(tool(done, "refund_order").output, /Refund R-1 of 42.00 EUR issued for order 7/);
    assert.equal(tool(done, "email_customer").state, "output-available");
    assert.match(text(done), /Done: order 7 is refunded \(R-1, 42.00 EUR\)/);
    const hydrated = await (await fetch(`${api}/chat-approve/messages`)).json();
    assert.deepEqual(hydrated.map((m) => [m.id, m.role]), c.messages.map((m) => [m.id, m.role]));
    assert.equal(text(hydrated[1]), text(done));
    assert.deepEqual(
      hydrated[1].parts.filter((p) => p.type.startsWith("tool-")).map((p) => [p.type, p.state, p.output]),
      done.parts.filter((p) => p.type.startsWith("tool-")).map((p) => [p.type, p.state, p.output]),
    );
    return { parts: done.parts.length };
  },

  async rejection() {
    const c = chat("chat-reject");
    await c.sendMessage({ text: "Refund order 8 please." });
    const asking = tool(assistant(c), "refund_order");
    assert.equal(asking.state, "approval-requested");
    await c.addToolApprovalResponse({ id: asking.approval.id, approved: false, reason: "Too costly" });
    await c.sendMessage();
    const done = assistant(c);
    assert.equal(tool(done, "refund_order").state, "output-denied");
    assert.equal(tool(done, "email_customer"), undefined);
    assert.match(text(done), /was not approved \(Too costly\)/);
    const again = await post(JSON.stringify({ id: "chat-reject", trigger: "submit-message", messages: c.messages }));
    assert.equal(again.status, 400, "nothing is left to answer");
    return { parts: done.parts.length };
  },

  async resume() {
    // The POST's stream drops after a few chunks; resumeStream replays the turn and nothing repeats.
    const c = chat("chat-resume", { fetch: dropping(4) });
    await c.sendMessage({ text: "What is order 7?" });
    assert.equal(c.status, "error");
    await c.resumeStream();
    assert.equal(c.status, "ready", c.errors.join());
    const reply = assistant(c);
    assert.equal(c.messages.length, 2);
    assert.equal(text(reply), "Let me look up order 7. | Order 7 (trail running shoes, 42.00 EUR) is delivered.");
    assert.equal(reply.parts.filter((p) => p.type === "tool-find_order").length, 1);

    // The approval's stream drops too; a resume rebuilds the whole message.
    const d = chat("chat-resume-approval", { fetch: dropping(3) });
    const cut = dropping(3);
    await d.sendMessage({ text: "Refund order 7 and tell the customer." });
    assert.equal(d.status, "error");
    await d.resumeStream();
    const asking = tool(assistant(d), "refund_order");
    assert.equal(asking.state, "approval-requested");
    d.transport.fetch = cut;
    await d.addToolApprovalResponse({ id: asking.approval.id, approved: true });
    await d.sendMessage();
    assert.equal(d.status, "error");
    await d.resumeStream();
    assert.equal(d.status, "ready", d.errors.join());
    const done = assistant(d);
    assert.match(text(done), /Done: order 7 is refunded/);
    assert.equal(done.parts.filter((p) => p.type === "tool-refund_order").length, 1);
    assert.equal((text(done).match(/Let me look up order 7/g) ?? []).length, 1);

    // A page reloaded in the middle of a turn: hydrate from …/messages, then resume the running turn.
    const live = chat("chat-reload");
    const sending = live.sendMessage({ text: "Refund order 8 please." });
    await waitFor(async () => (await (await fetch(`${api}/chat-reload/messages`)).json()).length === 1);
    const history = await (await fetch(`${api}/chat-reload/messages`)).json();
    const reloaded = chat("chat-reload", { messages: history });
    await reloaded.resumeStream();
    await sending;
    assert.deepEqual(shape(assistant(reloaded)), shape(assistant(live)));
    assert.equal(tool(assistant(reloaded), "refund_order").state, "approval-requested");
    return { parts: done.parts.length };
  },

  async refused() {
    const cases = [
      ["not json", 400],
      ["[1, 2]", 400],
      [JSON.stringify({ messages: [{ role: "user", parts: [{ type: "text", text: "hi" }] }] }), 400],
      [JSON.stringify({ id: "chat-bad", messages: [] }), 400],
      [JSON.stringify({ id: "chat-bad", messages: [{ role: "user", parts: [] }] }), 400],
      [JSON.stringify({ id: "chat-bad", trigger: "regenerate-message", messages: [{ role: "user", parts: [{ type: "text", text: "hi" }] }] }), 400],
      [JSON.stringify({ id: "chat-bad", messages: [{ role: "system", parts: [{ type: "text", text: "hi" }] }] }), 400],
      [JSON.stringify({ id: "chat-plain", messages: [{ role: "assistant", parts: [{ type: "tool-x", state: "approval-responded", approval: { id: "turn-9.nope", approved: true } }] }] }), 409],
      [JSON.stringify({ id: "chat-plain", messages: [{ role: "assistant", parts: [{ type: "tool-x", state: "approval-responded", approval: { id: "turn-1.x", approved: "yes" } }] }] }), 400],
      [JSON.stringify({ id: "chat-bad\u0000", messages: [{ role: "user", parts: [{ type: "text", text: "hi" }] }] }), 400],
    ];
    for (const [body, status] of cases) {
      const answer = await post(body);
      assert.equal(answer.status, status, `${body} -> ${JSON.stringify(answer)}`);
      assert.match(answer.type, /application\/json/);
      assert.equal(typeof answer.json.error, "string");
    }
    assert.equal((await fetch(`${api}/chat-bad/messages`)).status, 404, "no session was started");
    assert.equal((await fetch(`${api}/chat-bad/stream`)).status, 204);
    assert.equal((await fetch(`${api}/chat-plain/stream`)).status, 204, "no turn is active");
    return { cases: cases.length };
  },
};

async function waitFor(probe, ms = 30_000) {
  const until = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

for (const [name, run] of Object.entries(scenarios)) {
  try {
    console.log(JSON.stringify({ scenario: name, ok: true, ...(await run()) }));
  } catch (error) {
    console.log(JSON.stringify({ scenario: name, ok: false, error: String(error.stack ?? error) }));
    process.exit(1);
  }
}

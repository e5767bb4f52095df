// The console's page script: polled lists and the live event stream (dex_agents.console.live says what each
// update means). It inserts live text with textContent only; server-rendered fragments are escaped HTML.
"use strict";
(function () {
  // The Sessions and Approvals pages fetch their list again every few seconds, unless someone is typing in it.
  for (const list of document.querySelectorAll("[data-poll]")) {
    setInterval(async function () {
      if (list.contains(document.activeElement)) { return; }
      try {
        const response = await fetch(list.dataset.poll, {credentials: "same-origin", cache: "no-store"});
        if (response.ok) { list.innerHTML = (await response.json()).html; }  // server-rendered, escaped
      } catch (error) { /* try again at the next tick */ }
    }, Number(list.dataset.pollMs) || 5000);
  }
})();

(function () {
  const live = document.getElementById("live");
  if (!live) { return; }
  const events = live.querySelector(".events");
  const state = document.getElementById("live-state");
  const blocks = new Map();  // block key -> {attempt, el}
  const tools = new Map();   // call id -> el
  const seen = new Set();    // event ids already applied (a resumed stream never repeats one, but be sure)
  let refreshing = null;

  function add(cls, turn) {
    const el = document.createElement("div");
    el.className = cls;
    el.dataset.turn = turn || "";
    events.appendChild(el);
    return el;
  }

  function refresh() {
    if (refreshing) { return; }
    refreshing = setTimeout(async function () {
      refreshing = null;
      try {
        const response = await fetch(live.dataset.fragments, {credentials: "same-origin", cache: "no-store"});
        if (!response.ok) { return; }
        const parts = await response.json();
        const panel = document.getElementById("panel");
        if (panel.contains(document.activeElement)) { setTimeout(refresh, 1000); return; }  // someone is typing
        panel.innerHTML = parts.panel;  // server-rendered, escaped
        const transcript = document.getElementById("transcript");
        if (transcript.dataset.latest === "1") { transcript.innerHTML = parts.transcript; }
      } catch (error) { /* the next event refreshes again */ }
    }, 150);
  }

  function forget(turn) {
    for (const el of Array.from(events.children)) {
      if (el.dataset.turn === turn) { el.remove(); }
    }
    for (const [key, block] of Array.from(blocks.entries())) {
      if (block.el.dataset.turn === turn) { blocks.delete(key); }
    }
    for (const [call, el] of Array.from(tools.entries())) {
      if (el.dataset.turn === turn) { tools.delete(call); }
    }
  }

  function apply(update) {
    switch (update.kind) {
      case "text": {
        let block = blocks.get(update.block);
        if (!block) {
          block = {attempt: update.attempt, el: add("text " + update.text_kind, update.turn)};
          blocks.set(update.block, block);
        }
        if (update.attempt < block.attempt) { return; }  // a superseded attempt
        if (update.attempt > block.attempt) { block.attempt = update.attempt; block.el.textContent = ""; }
        block.el.dataset.attempt = String(update.attempt);
        block.el.textContent += update.text;
        break;
      }
      case "tool": {
        let el = tools.get(update.call);
        if (!el) { el = add("tool", update.turn); tools.set(update.call, el); }
        if (update.effect) { el.dataset.effect = update.effect; }
        el.dataset.status = update.status;
        el.dataset.tool = update.tool;
        el.textContent = "tool " + update.tool + " (" + update.call + ")" +
          (el.dataset.effect ? " · " + el.dataset.effect : "") + " · " + update.status +
          (update.status === "running" ? " · attempt " + update.attempt : "");
        break;
      }
      case "usage": {
        const usage = document.getElementById("usage");
        if (usage) { usage.textContent = update.text; }
        break;
      }
      case "committed": {
        forget(update.turn);
        add("note", "").textContent = update.text;
        break;
      }
      case "lasting": {
        add("note " + (update.style || ""), "").textContent = update.text;  // not dropped when the turn commits
        break;
      }
      default: {
        const el = add("note" + (update.error ? " error" : ""), update.turn);
        el.textContent = update.text;
      }
    }
    if (update.refresh) { refresh(); }
  }

  const source = new EventSource(live.dataset.events);
  source.addEventListener("open", function () { state.textContent = "live"; });
  source.addEventListener("error", function () {
    if (source.readyState !== EventSource.CLOSED) { state.textContent = "reconnecting"; }
  });
  source.addEventListener("problem", function (message) {
    // Dex refused to read the stream (for example the session has ended): stop asking.
    source.close();
    state.textContent = "stopped: " + JSON.parse(message.data).error;
  });
  const log = [];  // what was applied, for people debugging the page (and for the tests)
  let duplicates = 0;
  source.addEventListener("agent", function (message) {
    if (seen.has(message.lastEventId)) { duplicates += 1; return; }
    seen.add(message.lastEventId);
    const update = JSON.parse(message.data);
    log.push({kind: update.kind, type: update.type, attempt: update.attempt, tool: update.tool || null,
              status: update.status || null});
    apply(update);
  });
  window.dexConsole = {source: source, log: log, duplicates: function () { return duplicates; }};
})();

// FrogBot web chat: vanilla JavaScript over the HTTP API of serve-contract.md.
"use strict";
(() => {
  const $ = (sel) => document.querySelector(sel);
  const TOKEN_KEY = "frogbot.token";
  const TITLES_KEY = "frogbot.titles";

  const ui = {
    list: $("#chat-list"),
    newChat: $("#new-chat"),
    token: $("#token"),
    title: $("#chat-title"),
    chatIdLabel: $("#chat-id"),
    state: $("#state"),
    error: $("#error"),
    scroller: $("#messages"),
    messages: $("#message-list"),
    pins: $("#pins"),
    questions: $("#questions"),
    composer: $("#composer"),
    text: $("#composer textarea"),
    send: $("#send"),
    stop: $("#stop"),
    steerOption: $("#steer-option"),
    steer: $("#steer"),
    readonly: $("#readonly"),
    attach: $("#attach"),
    attachInput: $("#attach-input"),
    attachments: $("#attachments"),
  };

  const app = {
    chatId: null,
    chat: null, // the last GET /api/chats/{id}, or null for a chat that does not exist yet
    pendingKey: "",
    events: null, // AbortController of the event stream
    refreshTimer: null,
    refreshing: false,
    refreshAgain: false,
    nodes: new Map(), // message id → {sig, node}: unchanged messages keep their nodes (and apps)
    attachments: [], // File objects chosen for the next message
    fileUrls: new Map(), // a file part's URL → a promise of its object URL (fetched with the token)
  };

  // ---- helpers ----------------------------------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function token() {
    return (localStorage.getItem(TOKEN_KEY) || "").trim();
  }

  function headers(extra) {
    const out = Object.assign({}, extra || {});
    const t = token();
    if (t) out.Authorization = "Bearer " + t;
    return out;
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
    if (body) init.body = JSON.stringify(body);
    const res = await fetch(path, init);
    if (res.status === 204) return null;
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(res.status, err.code || "http-" + res.status, err.message || text || res.statusText);
    }
    return data;
  }

  function showError(err) {
    if (!err) {
      ui.error.hidden = true;
      ui.error.textContent = "";
      return;
    }
    const msg = err instanceof ApiError ? `${err.message} (${err.code})` : String(err.message || err);
    ui.error.textContent = msg;
    ui.error.hidden = false;
  }

  function newId(prefix) {
    const rnd = (crypto.randomUUID ? crypto.randomUUID().replace(/-/g, "") : Math.random().toString(36).slice(2) + Date.now().toString(36));
    return prefix + rnd.slice(0, 12);
  }

  // Titles (the first words of a chat's first message) remembered by this browser.
  function titles() {
    try { return JSON.parse(localStorage.getItem(TITLES_KEY) || "{}") || {}; } catch (_) { return {}; }
  }

  function titleOf(id) {
    return titles()[id] || null;
  }

  function rememberTitle(id, text) {
    if (!id || !text || titleOf(id)) return;
    const all = titles();
    const words = text.replace(/\s+/g, " ").trim();
    all[id] = words.length > 48 ? words.slice(0, 47) + "…" : words;
    const keys = Object.keys(all);
    if (keys.length > 300) delete all[keys[0]];
    try { localStorage.setItem(TITLES_KEY, JSON.stringify(all)); } catch (_) { /* full: no titles */ }
  }

  function chatFromHash() {
    const m = /(?:^#|&)chat=([A-Za-z0-9_-]{1,128})/.exec(location.hash);
    return m ? m[1] : null;
  }

  function timeOf(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (isNaN(d)) return "";
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : d.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  // ---- chat list --------------------------------------------------------------------------

  async function loadChats() {
    let data;
    try {
      data = await api("GET", "/api/chats");
    } catch (err) {
      ui.list.replaceChildren(h("div", { class: "empty", text: "Could not load chats." }));
      showError(err);
      return;
    }
    const chats = data.chats || [];
    if (app.chatId && !chats.some((c) => c.chatId === app.chatId)) {
      chats.unshift({ chatId: app.chatId, state: app.chat ? app.chat.state : "idle", channel: null, draft: !app.chat });
    }
    if (!chats.length) {
      ui.list.replaceChildren(h("div", { class: "empty", text: "No chats yet." }));
      return;
    }
    ui.list.replaceChildren(...chats.map((c) => h("a", {
      class: "chat-item" + (c.chatId === app.chatId ? " active" : ""),
      href: "#chat=" + encodeURIComponent(c.chatId),
      title: c.chatId + (c.updatedAt ? " · " + timeOf(c.updatedAt) : ""),
      dataset: { chatId: c.chatId, state: c.state },
    },
    h("span", { class: "name", text: c.draft ? "New chat" : titleOf(c.chatId) || c.chatId }),
    c.channel ? h("span", { class: "channel", text: c.channel.platform }) : null,
    h("span", { class: "dot", dataset: { state: c.state }, title: c.state }))));
  }

  // ---- one chat ---------------------------------------------------------------------------

  function selectChat(id) {
    if (app.chatId === id) return;
    app.chatId = id;
    app.chat = null;
    app.pendingKey = "";
    ui.questions.replaceChildren();
    ui.questions.hidden = true;
    showError(null);
    renderChat();
    stopEvents();
    if (id) refresh(); // starts the event stream once the chat exists
    loadChats();
  }

  function scheduleRefresh(delay) {
    clearTimeout(app.refreshTimer);
    app.refreshTimer = setTimeout(refresh, delay === undefined ? 60 : delay);
  }

  async function refresh() {
    if (app.refreshing) {
      app.refreshAgain = true;
      return;
    }
    const id = app.chatId;
    if (!id) return;
    app.refreshing = true;
    try {
      let chat = null;
      try {
        chat = await api("GET", "/api/chats/" + encodeURIComponent(id));
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      if (id !== app.chatId) return;
      const wasState = app.chat ? app.chat.state : null;
      app.chat = chat;
      if (chat && !app.events) startEvents(id);
      if (chat) {
        const first = (chat.messages || []).find((m) => m.role === "user");
        if (first) rememberTitle(id, (first.parts || []).filter((p) => p.type === "text").map((p) => p.text).join(" "));
      }
      renderChat();
      let pending = { calls: [] };
      if (chat && chat.state === "awaiting") {
        pending = await api("GET", "/api/chats/" + encodeURIComponent(id) + "/pending");
        if (id !== app.chatId) return;
      }
      renderQuestions(pending.calls || []);
      if (!chat || wasState !== chat.state) loadChats();
    } catch (err) {
      showError(err);
    } finally {
      app.refreshing = false;
      if (app.refreshAgain) {
        app.refreshAgain = false;
        scheduleRefresh(0);
      }
    }
  }

  function renderChat() {
    const chat = app.chat;
    const state = chat ? chat.state : "idle";
    ui.title.textContent = app.chatId ? (chat ? titleOf(app.chatId) || app.chatId : "New chat") : "FrogBot";
    ui.chatIdLabel.textContent = chat && titleOf(app.chatId) ? app.chatId : "";
    ui.state.hidden = !chat;
    ui.state.dataset.state = state;
    ui.state.textContent = { idle: "idle", running: "working…", awaiting: "waiting for your answer" }[state] || state;
    document.body.dataset.state = state;
    const item = app.chatId ? ui.list.querySelector(`.chat-item[data-chat-id="${CSS.escape(app.chatId)}"]`) : null;
    if (item && chat) {
      item.dataset.state = state;
      item.querySelector(".dot").dataset.state = state;
      item.querySelector(".dot").title = state;
    }

    const readOnly = !!(chat && chat.channel);
    ui.stop.hidden = readOnly || state !== "running";
    ui.composer.hidden = readOnly || !app.chatId;
    ui.readonly.hidden = !readOnly;
    if (readOnly) {
      ui.readonly.replaceChildren(h("div", {
        text: `This chat belongs to a ${chat.channel.platform} thread; continue it there.`,
      }));
    }
    ui.steerOption.hidden = state !== "running";
    if (state !== "running") ui.steer.checked = false;

    const nearBottom = ui.scroller.scrollHeight - ui.scroller.scrollTop - ui.scroller.clientHeight < 80;
    const messages = (chat ? chat.messages || [] : []).filter(visible);
    const pinned = pinnedOf(messages);
    const thread = messages.filter((m) => !pinned.has(m));
    const used = new Set();
    const keep = (m, where) => {
      const sig = where + "\u0000" + JSON.stringify(m) + "\u0000" + (app.chat ? app.chat.owner : "") + timeOf((m.metadata || {}).createdAt);
      let entry = app.nodes.get(m.id + where);
      if (!entry || entry.sig !== sig) {
        entry = { sig, node: where === "pin" ? renderPin(m) : renderMessage(m) };
        app.nodes.set(m.id + where, entry);
      }
      used.add(m.id + where);
      return entry.node;
    };
    reconcile(ui.pins, [...pinned].map((m) => keep(m, "pin")));
    ui.pins.hidden = !pinned.size;
    ui.pins.classList.toggle("has-app", [...pinned].some(isApp));
    if (!messages.length) {
      ui.messages.replaceChildren(h("div", { class: "welcome" },
        h("h2", { text: "Hi, I'm FrogBot." }),
        h("p", {}, "Send a message to start. With the demo model, ", h("code", { text: "ask" }),
          " makes it ask you a question and ", h("code", { text: "slow 3" }), " makes it take its time.")));
      app.nodes.clear();
      return;
    }
    const nodes = thread.map((m) => keep(m, "thread"));
    for (const k of [...app.nodes.keys()]) if (!used.has(k)) app.nodes.delete(k);
    if (state === "running") {
      // The reply being written lands before the queued messages.
      const firstQueued = thread.findIndex((m) => (m.metadata || {}).status === "queued");
      nodes.splice(firstQueued < 0 ? nodes.length : firstQueued, 0, h("div", { class: "typing", "aria-label": "FrogBot is working" }, h("span", { text: "●" }), " ", h("span", { text: "●" }), " ", h("span", { text: "●" })));
    }
    reconcile(ui.messages, nodes);
    if (nearBottom || app.stickToBottom) {
      app.stickToBottom = false;
      ui.scroller.scrollTop = ui.scroller.scrollHeight;
    }
  }

  // Puts `nodes` in `container` in order, moving as little as possible: a node that stays is
  // never taken out (an app's iframe would reload).
  function reconcile(container, nodes) {
    const want = new Set(nodes);
    for (const c of [...container.children]) if (!want.has(c)) c.remove();
    nodes.forEach((n, i) => {
      const at = container.children[i];
      if (at !== n) container.insertBefore(n, at || null);
    });
  }

  // What the thread shows: no deleted message (a live event may carry its tombstone) and no
  // block event (a click stored for the agent's inbox).
  function visible(m) {
    const meta = m.metadata || {};
    if (meta.deletedAt) return false;
    return !(m.parts || []).some((p) => p && p.type === "data-event");
  }

  // The pinned messages: one per key, the newest (last in the thread's order) wins.
  function pinnedOf(messages) {
    const byKey = new Map();
    for (const m of messages) {
      const key = (m.metadata || {}).pin;
      if (m.role === "assistant" && typeof key === "string" && key) byKey.set(key, m);
    }
    return new Set(messages.filter((m) => [...byKey.values()].includes(m)));
  }

  const BLOCK_PREFIX = "data-block-";
  const isBlock = (p) => p && typeof p.type === "string" && p.type.startsWith(BLOCK_PREFIX);

  // An app: a pinned message whose only content is one html block.
  function isApp(m) {
    const parts = (m.parts || []).filter((p) => !(p.type === "text" && !String(p.text || "").trim()) && p.type !== "step-start");
    return !!(m.metadata || {}).pin && parts.length === 1 && parts[0].type === BLOCK_PREFIX + "html";
  }

  function renderPin(m) {
    const meta = m.metadata || {};
    const app_ = isApp(m);
    const edited = meta.editedAt ? h("span", { class: "edited", title: meta.editedAt, text: "edited" }) : null;
    if (app_) {
      const part = m.parts.find(isBlock);
      const data = part.data || {};
      return h("div", { class: "pin app", dataset: { pin: meta.pin, messageId: m.id } },
        h("div", { class: "pin-head" }, h("span", { class: "pin-key", text: "📌 " + (meta.title || data.title || meta.pin) }), edited, unpinButton(meta.pin)),
        renderBlock(m, part, true));
    }
    return h("div", { class: "pin", dataset: { pin: meta.pin, messageId: m.id } },
      h("div", { class: "pin-head" }, h("span", { class: "pin-key", text: "📌 " + meta.pin }), edited, unpinButton(meta.pin)),
      ...renderBody(m));
  }

  // The person unpins: the message goes back to its place in the thread (the chat's change
  // event redraws it there).
  function unpinButton(key) {
    const btn = h("button", { type: "button", class: "unpin", title: "Unpin", "aria-label": "Unpin " + key, text: "×" });
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      try {
        await api("DELETE", `/api/chats/${encodeURIComponent(app.chatId)}/pins/${encodeURIComponent(key)}`);
      } catch (err) {
        btn.disabled = false;
        showError(err);
      }
    });
    return btn;
  }

  // A message's content: its title, text, tool calls and blocks, in order.
  function renderBody(m) {
    const meta = m.metadata || {};
    const body = [];
    if (typeof meta.title === "string" && meta.title.trim()) body.push(h("div", { class: "msg-title", role: "heading", "aria-level": "3", text: meta.title }));
    let text = "";
    const flushText = () => {
      if (text.trim()) body.push(h("div", { class: "bubble", text: text.replace(/^\n+|\n+$/g, "") }));
      text = "";
    };
    for (const p of m.parts || []) {
      if (!p || typeof p.type !== "string") continue;
      if (p.type === "text") {
        text += p.text;
      } else if (p.type.startsWith("tool-")) {
        flushText();
        body.push(renderToolPart(p));
      } else if (isBlock(p)) {
        flushText();
        body.push(renderBlock(m, p, false));
      } else if (p.type === "file" && typeof p.url === "string") {
        flushText();
        body.push(renderFile(p));
      }
    }
    flushText();
    return body;
  }

  // A file part: an image shown, any other file a link that downloads it. The server's files
  // are fetched with the bearer token and shown through an object URL.
  function fileUrl(url) {
    if (!url.startsWith("/api/")) return Promise.resolve(url.startsWith("data:") ? url : "");
    if (!app.fileUrls.has(url)) {
      app.fileUrls.set(url, fetch(url, { headers: headers() })
        .then((res) => (res.ok ? res.blob() : Promise.reject(new Error("HTTP " + res.status))))
        .then((blob) => URL.createObjectURL(blob))
        .catch(() => { app.fileUrls.delete(url); return ""; }));
    }
    return app.fileUrls.get(url);
  }

  function renderFile(p) {
    const name = p.filename || "file";
    const image = /^image\//.test(p.mediaType || "") && p.mediaType !== "image/svg+xml";
    const box = h("div", { class: "file-part", "data-media-type": p.mediaType || "" });
    if (image) {
      const img = h("img", { alt: name, title: name });
      box.append(img);
      fileUrl(p.url).then((u) => { if (u) img.src = u; else box.replaceChildren(h("span", { text: "🖼 " + name + " (unavailable)" })); });
    } else {
      const a = h("a", { text: "📄 " + name, download: name, href: "#" });
      fileUrl(p.url).then((u) => { if (u) a.href = u; });
      box.append(a);
    }
    return box;
  }

  function renderAttachments() {
    ui.attachments.replaceChildren(...app.attachments.map((f, i) => h("span", { class: "chip" },
      f.name,
      h("button", { type: "button", title: "Remove", "aria-label": "Remove " + f.name, text: "×",
        onclick: () => { app.attachments.splice(i, 1); renderAttachments(); } }))));
    ui.attachments.hidden = app.attachments.length === 0;
  }

  // Uploads a file to the chat: the part a message sends it with.
  async function upload(chatId, file) {
    const res = await fetch(`/api/chats/${encodeURIComponent(chatId)}/files?name=${encodeURIComponent(file.name)}`, {
      method: "POST",
      headers: headers({ "Content-Type": file.type || "application/octet-stream", "X-FrogBot-Upload": "1" }),
      body: file,
    });
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(res.status, err.code || "http-" + res.status, `${file.name}: ${err.message || res.statusText}`);
    }
    return data.part;
  }

  function renderMessage(m) {
    const meta = m.metadata || {};
    const queued = meta.status === "queued";
    const cls = ["message", m.role];
    if (queued) cls.push("queued");
    const body = renderBody(m);
    if ((m.parts || []).some(isBlock)) cls.push("has-blocks");
    if ((m.parts || []).some((p) => p && p.type === BLOCK_PREFIX + "html")) cls.push("has-app");
    if (!body.length && !meta.error) body.push(h("div", { class: "bubble", text: "…" }));
    if (meta.error) {
      body.push(h("div", { class: "error-text", text: `${meta.error.message || "The turn failed"} (${meta.error.code || "error"})` }));
    }
    const metaLine = [];
    const ACKS = { seen: "👀 seen", working: "⏳ working", done: "✅ done", failed: "❌ failed" };
    if (m.role === "user" && ACKS[meta.ack]) metaLine.push(h("span", { class: "ack", dataset: { ack: meta.ack }, text: ACKS[meta.ack] }));
    if (queued) metaLine.push(h("span", { class: "badge queued", text: "queued" }));
    if (queued && meta.delivery === "steer") metaLine.push(h("span", { class: "badge steer", text: "steer" }));
    if (m.role === "user" && meta.author && app.chat && app.chat.owner !== meta.author) metaLine.push(h("span", { text: meta.author }));
    if (m.role === "assistant" && meta.model) metaLine.push(h("span", { text: meta.model }));
    if (meta.editedAt) metaLine.push(h("span", { class: "edited", title: meta.editedAt, text: "edited" }));
    const t = timeOf(meta.createdAt);
    if (t) metaLine.push(h("span", { text: t }));
    if (queued && app.chat && !app.chat.channel) {
      metaLine.push(h("button", {
        type: "button", class: "link-button", text: "remove",
        onclick: async () => {
          try {
            await api("DELETE", `/api/chats/${encodeURIComponent(app.chatId)}/messages/${encodeURIComponent(m.id)}`);
            scheduleRefresh(0);
          } catch (err) { showError(err); }
        },
      }));
    }
    return h("div", { class: cls.join(" "), dataset: { messageId: m.id, role: m.role, status: meta.status || "" } },
      ...body, metaLine.length ? h("div", { class: "meta" }, ...metaLine) : null);
  }

  // ---- blocks (the rply messages model: data-block-{type} parts) ----------------------------

  // What every app shows for a block of a type it does not know (frogbot-model's
  // UNKNOWN_BLOCK_TEXT).
  const UNKNOWN_BLOCK_TEXT = "⚠️ This message has content this version cannot show. Update FrogBot to see it.";

  const str = (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
  const num = (v, d) => (typeof v === "number" && isFinite(v) ? v : d);

  const BLOCKS = {
    table(d) {
      const columns = Array.isArray(d.columns) ? d.columns.map(str) : [];
      const rows = Array.isArray(d.rows) ? d.rows.filter(Array.isArray) : [];
      if (!columns.length && !rows.length) throw new Error("empty table");
      const width = Math.max(columns.length, ...rows.map((r) => r.length));
      const pad = (cells) => Array.from({ length: width }, (_, i) => str(cells[i]));
      return h("div", { class: "table-wrap" }, h("table", {},
        columns.length ? h("thead", {}, h("tr", {}, pad(columns).map((c) => h("th", { scope: "col", text: c })))) : null,
        h("tbody", {}, rows.map((r) => h("tr", {}, pad(r).map((c) => h("td", { text: c })))))));
    },
    progress(d) {
      const max = num(d.max, 100) > 0 ? num(d.max, 100) : 100;
      const value = Math.min(Math.max(num(d.value, 0), 0), max);
      const pct = Math.round((value / max) * 100);
      const label = str(d.label);
      return h("div", { class: "progress" },
        label ? h("span", { class: "progress-label", text: label }) : null,
        h("progress", { value: String(value), max: String(max), "aria-label": label || "progress" }),
        h("span", { class: "progress-pct", text: pct + "%" }));
    },
    image(d) {
      const url = str(d.url);
      const alt = str(d.alt);
      if (!/^https?:\/\//i.test(url)) return h("div", { class: "image-missing", text: alt ? `[image: ${alt}]` : "[image]" });
      return h("img", { src: url, alt, title: alt || null, loading: "lazy", referrerpolicy: "no-referrer", decoding: "async" });
    },
    code(d) {
      const lang = str(d.language).replace(/[^A-Za-z0-9_+#-]/g, "").slice(0, 32);
      return h("pre", {}, h("code", { class: lang ? "language-" + lang : null, text: str(d.code) }));
    },
    fields(d) {
      const fields = Array.isArray(d.fields) ? d.fields : [];
      return h("dl", { class: "fields" }, fields.flatMap((f) => [h("dt", { text: str(f && f.key) }), h("dd", { text: str(f && f.value) })]));
    },
    html(d, full) {
      // An app: its own page in a sandbox with scripts but no same origin, so it can reach
      // neither this page nor the API with the person's token.
      const frame = h("iframe", {
        class: "app-frame" + (full ? " full" : ""),
        sandbox: "allow-scripts",
        referrerpolicy: "no-referrer",
        title: str(d.title) || "App",
      });
      // The frame's page writes the app into itself from the fragment (never sent to the
      // server); a srcdoc frame would inherit this page's Content-Security-Policy.
      frame.src = "/app-frame#" + encodeURIComponent(str(d.html));
      return frame;
    },
  };

  function renderBlock(m, p, full) {
    const type = p.type.slice(BLOCK_PREFIX.length);
    const data = p.data && typeof p.data === "object" ? p.data : {};
    let el = null;
    if (Object.prototype.hasOwnProperty.call(BLOCKS, type)) {
      try { el = BLOCKS[type](data, full); } catch (_) { el = null; }
    }
    if (!el) el = h("div", { class: "unknown-text", text: UNKNOWN_BLOCK_TEXT });
    // An app's frame knows its block: the bridge sends the app's events as its buttons would.
    if (el.tagName === "IFRAME") {
      el.dataset.messageId = m.id;
      if (typeof p.id === "string") el.dataset.blockId = p.id;
    }
    const events = Array.isArray(data.events) ? data.events.filter((e) => e && typeof e.label === "string") : [];
    return h("div", { class: "block block-" + (el.classList.contains("unknown-text") ? "unknown" : type), dataset: typeof p.id === "string" ? { blockId: p.id, type } : { type } },
      el, events.length ? h("div", { class: "events" }, events.map((e) => eventButton(m, p, e))) : null);
  }

  // The app bridge: an app (an html block, in its sandboxed frame) sends one of its block's
  // events with `parent.postMessage({type: "frogbot:event", value}, "*")`, and hears back
  // `{type: "frogbot:event-result", value, sent}`. Only a frame of an app this page drew is
  // heard (the message's source is that frame's window and its origin the sandbox's opaque
  // "null"); the value must be one of the block's events (the server checks it, as for a
  // button: anything else is refused as stale); at most one event a second per frame.
  const APP_EVENT_GAP_MS = 1000;
  const appEventAt = new WeakMap();
  window.addEventListener("message", async (ev) => {
    const d = ev.data;
    if (!d || typeof d !== "object" || d.type !== "frogbot:event") return;
    if (ev.origin !== "null" || !ev.source) return;
    const frame = [...document.querySelectorAll("iframe.app-frame")].find((f) => f.contentWindow === ev.source);
    if (!frame || !frame.dataset.messageId || !frame.dataset.blockId) return;
    if (typeof d.value !== "string" || !d.value || d.value.length > 200) return;
    const now = Date.now();
    if (now - (appEventAt.get(frame) || 0) < APP_EVENT_GAP_MS) return;
    appEventAt.set(frame, now);
    let sent = false;
    try {
      await api("POST", `/api/chats/${encodeURIComponent(app.chatId)}/block-events`,
        { messageId: frame.dataset.messageId, blockId: frame.dataset.blockId, value: d.value });
      sent = true;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409)) showError(err);
    }
    // The frame's origin is opaque: "*" is the only target it can be reached by, and this goes
    // to that one window.
    ev.source.postMessage({ type: "frogbot:event-result", value: d.value, sent }, "*");
  });

  // An app drawn in a question's card answers the question: `parent.postMessage({type:
  // "frogbot:answer", answers: [{header, selected: [...]}, …]}, "*")`, heard back as
  // `{type: "frogbot:answer-result", sent}`. Only a frame this page drew inside that card is
  // heard (its window the message's source, the sandbox's opaque origin); the answer goes the way
  // of the card's own controls (the server checks it against the inputs and who may answer; the
  // first answer wins); at most one a second per frame.
  window.addEventListener("message", async (ev) => {
    const d = ev.data;
    if (!d || typeof d !== "object" || d.type !== "frogbot:answer") return;
    if (ev.origin !== "null" || !ev.source) return;
    const frame = [...document.querySelectorAll(".question iframe.app-frame")].find((f) => f.contentWindow === ev.source);
    const card = frame && frame.closest(".question");
    if (!card || !card.dataset.toolCallId || card.classList.contains("readonly")) return;
    const ok = (a) => a && typeof a.header === "string" && Array.isArray(a.selected)
      && a.selected.length <= 100 && a.selected.every((x) => typeof x === "string" && x.length <= 10000);
    if (!Array.isArray(d.answers) || d.answers.length > 50 || !d.answers.every(ok)) return;
    const now = Date.now();
    if (now - (appEventAt.get(frame) || 0) < APP_EVENT_GAP_MS) return;
    appEventAt.set(frame, now);
    const source = ev.source;
    const answers = d.answers.map((a) => ({ header: a.header, selected: a.selected }));
    let sent = false;
    await settle(card, { toolCallId: card.dataset.toolCallId, output: { answers } }, () => {
      sent = true;
      source.postMessage({ type: "frogbot:answer-result", sent }, "*");
    });
    if (!sent) source.postMessage({ type: "frogbot:answer-result", sent }, "*");
  });

  // A button that sends an event (the block id and the button's value) to the agent's inbox.
  function eventButton(m, p, e) {
    const value = typeof e.value === "string" ? e.value : e.label;
    const btn = h("button", { type: "button", class: "event", disabled: typeof p.id !== "string", dataset: { value }, text: e.label });
    let timer = null;
    btn.addEventListener("click", async () => {
      clearTimeout(timer);
      btn.disabled = true;
      btn.dataset.state = "sending";
      try {
        await api("POST", `/api/chats/${encodeURIComponent(app.chatId)}/block-events`, { messageId: m.id, blockId: p.id, value });
        btn.dataset.state = "sent";
        btn.textContent = "✓ sent";
        timer = setTimeout(() => {
          btn.textContent = e.label;
          delete btn.dataset.state;
          btn.disabled = false;
        }, 1500);
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          btn.dataset.state = "stale";
          btn.textContent = e.label + " — no longer available";
        } else {
          btn.disabled = false;
          delete btn.dataset.state;
          showError(err);
        }
      }
    });
    return btn;
  }

  function renderToolPart(p) {
    const name = p.type.slice(5);
    if (name === "question") {
      const qs = (p.input && p.input.questions) || [];
      const title = [...new Set(qs.map((q) => q.question || q.header))].join(" · ") || "Question";
      if (p.state === "output-available") {
        const answers = (p.output && p.output.answers) || [];
        const summary = answers.map((a) => `${a.header}: ${(a.selected || []).join(", ")}`).join("; ");
        return h("div", { class: "tool question-part", dataset: { state: p.state } }, "Asked ", h("strong", { text: title }), " → ", summary);
      }
      if (p.state === "output-error") {
        return h("div", { class: "tool question-part", dataset: { state: p.state } }, "Asked ", h("strong", { text: title }), " — ", p.errorText || "not answered");
      }
      return h("div", { class: "tool question-part", dataset: { state: p.state } }, "Asking ", h("strong", { text: title }));
    }
    // Any other tool: its name and state, then (unfolded on click) its arguments, its result
    // or error, and its approval — asked, approved or denied, by whom and when.
    const a = p.approval || null;
    const status = {
      "output-available": "done",
      "output-error": p.errorText || "failed",
      "approval-requested": "waiting for approval",
      "approval-responded": "approved, running",
      "output-denied": "denied",
    }[p.state] || "running";
    const json = (v) => { try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); } };
    const rows = [h("div", { class: "tool-args" }, h("div", { class: "tool-label", text: "Arguments" }), h("pre", { text: json(p.input) }))];
    if (p.state === "output-available") rows.push(h("div", { class: "tool-result" }, h("div", { class: "tool-label", text: "Result" }), h("pre", { text: typeof p.output === "string" ? p.output : json(p.output) })));
    if (p.state === "output-error") rows.push(h("div", { class: "tool-result error" }, h("div", { class: "tool-label", text: "Error" }), h("pre", { text: p.errorText || "" })));
    if (a && a.approved != null) {
      const when = a.at ? ` at ${String(a.at).slice(0, 16).replace("T", " ")} UTC` : "";
      const who = a.by ? ` by ${a.by}` : "";
      const why = a.reason ? ` — ${a.reason}` : "";
      rows.push(h("div", { class: "tool-approval", dataset: { approved: String(a.approved) }, text: (a.approved ? "Approved" : "Denied") + who + when + why }));
    }
    const cls = "tool" + (p.state === "output-error" || p.state === "output-denied" ? " error" : "") + (a ? " needs-approval" : "");
    return h("details", { class: cls, dataset: { state: p.state, toolCallId: p.toolCallId } },
      h("summary", {}, "Tool ", h("strong", { text: name }), " — ", status),
      ...rows);
  }

  // ---- questions --------------------------------------------------------------------------

  function renderQuestions(calls) {
    const readOnly = !!(app.chat && app.chat.channel);
    const key = JSON.stringify([readOnly, calls.map((c) => c.toolCallId)]);
    if (key === app.pendingKey) return; // keep what the person already typed or ticked
    app.pendingKey = key;
    ui.questions.replaceChildren(...calls.map((c) => renderCall(c, readOnly)));
    ui.questions.hidden = !calls.length;
    if (calls.length) ui.scroller.scrollTop = ui.scroller.scrollHeight;
  }

  // The kinds of input a question may hold (rply's input blocks); `choice` when absent.
  const kindOf = (q) => q.kind || "choice";
  const isSimple = (q) => (kindOf(q) === "choice" && !q.multiple) || kindOf(q) === "confirm";

  function expiresLine(iso) {
    const t = new Date(iso);
    if (isNaN(t)) return null;
    const hm = t.toISOString().slice(11, 16);
    const today = t.toISOString().slice(0, 10) === new Date().toISOString().slice(0, 10);
    const day = today ? "" : t.toLocaleDateString("en-GB", { day: "numeric", month: "short", timeZone: "UTC" }) + " ";
    return h("div", { class: "expires", dataset: { expiresAt: iso }, text: `open until ${day}${hm} UTC` });
  }

  function renderCall(call, readOnly) {
    const questions = (call.input && call.input.questions) || [];
    // One simple input answers on tap; anything else is sent together with "Send answers".
    const simple = questions.length === 1 && isSimple(questions[0]);
    const picks = questions.map(() => new Set());
    const customs = [];
    const fields = [];
    // An approval: the question put to the approvers of a tool call (Approve / Deny / a reason).
    const approval = call.approval || null;
    const card = h("div", { class: "question" + (approval ? " approval" : "") + (readOnly ? " readonly" : ""), dataset: { toolCallId: call.toolCallId } });
    // An elicitation: a tool (an MCP server) asks for input while its call runs.
    if (call.elicitation) card.append(h("div", { class: "q-source", text: `${call.elicitation.toolName} asks:` }));
    // What the question is about (a table, a diff, an image), drawn as a message's blocks.
    for (const b of (call.input && Array.isArray(call.input.blocks) && call.input.blocks) || []) {
      if (!b || typeof b.type !== "string") continue;
      const { type, id, events, ...data } = b;
      card.append(h("div", { class: "q-block" }, renderBlock({ id: "" }, { type: BLOCK_PREFIX + type, id, data }, false)));
    }

    const answerOf = () => questions.map((q, i) => {
      const kind = kindOf(q);
      if (kind === "text_input" || kind === "number_input") {
        const v = fields[i].value.trim();
        return { header: q.header, selected: v ? [v] : [] };
      }
      if (kind === "toggle") return { header: q.header, selected: [fields[i].checked ? "on" : "off"] };
      const selected = [...picks[i]];
      const own = customs[i] ? customs[i].value.trim() : "";
      if (own) {
        if (q.multiple) selected.push(own);
        else return { header: q.header, selected: [own] };
      }
      return { header: q.header, selected };
    });

    const submit = async () => {
      const answers = answerOf();
      const missing = answers.findIndex((a, i) => !a.selected.length && questions[i].required !== false);
      if (missing >= 0) {
        showError(new Error(`Answer “${questions[missing].header}” first.`));
        return;
      }
      const invalid = fields.findIndex((f) => f && !f.checkValidity());
      if (invalid >= 0) {
        showError(new Error(`“${questions[invalid].header}”: ${fields[invalid].validationMessage}`));
        return;
      }
      await settle(card, { toolCallId: call.toolCallId, output: { answers } });
    };

    const firstDefault = (q) => (Array.isArray(q.default) ? q.default[0] : q.default);

    questions.forEach((q, i) => {
      const kind = kindOf(q);
      const opts = h("div", { class: "options" });
      if (kind === "choice") {
        for (const o of q.options || []) {
          if (q.multiple) {
            const box = h("input", { type: "checkbox", value: o.label, disabled: readOnly, dataset: { label: o.label },
              onchange: (e) => { if (e.target.checked) picks[i].add(o.label); else picks[i].delete(o.label); } });
            opts.append(h("label", { title: o.description || null }, box, o.label));
          } else {
            const btn = h("button", { type: "button", disabled: readOnly, title: o.description || null, dataset: { label: o.label }, text: o.label });
            btn.addEventListener("click", () => {
              picks[i].clear();
              picks[i].add(o.label);
              if (customs[i]) customs[i].value = "";
              if (simple) return submit();
              opts.querySelectorAll("button").forEach((b) => b.classList.toggle("selected", b === btn));
            });
            opts.append(btn);
          }
        }
      } else if (kind === "confirm") {
        const label = (q.label && q.label.trim()) || "Confirm";
        const btn = h("button", { type: "button", class: q.danger ? "confirm danger" : "confirm", disabled: readOnly, dataset: { label }, text: label });
        btn.addEventListener("click", () => {
          picks[i].clear();
          picks[i].add(label);
          if (simple) return submit();
          btn.classList.add("selected");
        });
        opts.append(btn);
      } else if (kind === "toggle") {
        const d = firstDefault(q);
        const box = h("input", { type: "checkbox", role: "switch", class: "toggle", disabled: readOnly, dataset: { header: q.header } });
        box.checked = d === true || d === "on";
        fields[i] = box;
        opts.append(h("label", { class: "toggle-label" }, box, q.label || "On"));
      } else {
        const attrs = { class: "field", disabled: readOnly, placeholder: q.placeholder || null, dataset: { header: q.header } };
        let field;
        if (kind === "number_input") {
          field = h("input", { ...attrs, type: "number", step: q.step != null ? String(q.step) : "any" });
          if (q.min != null) field.min = String(q.min);
          if (q.max != null) field.max = String(q.max);
        } else if (q.multiline) {
          field = h("textarea", { ...attrs, rows: 3 });
        } else {
          field = h("input", { ...attrs, type: "text" });
        }
        if (kind === "text_input") field.maxLength = q.maxLength || 4000;
        field.required = q.required !== false;
        fields[i] = field;
        if (kind !== "text_input" || !q.multiline) {
          field.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); submit(); } });
        }
        opts.append(field);
        if (q.unit) opts.append(h("span", { class: "unit", text: q.unit }));
      }
      const described = (q.options || []).filter((o) => o.description);
      const q_el = h("div", { class: "q", dataset: { header: q.header, kind } },
        h("div", { class: "q-header", text: q.header }),
        // Inputs that share their question (an ask's several inputs) show it once.
        q.question && (i === 0 || q.question !== questions[i - 1].question)
          // An approval's arguments come in a Markdown code fence; the card shows them as code.
          ? h("div", { class: "q-text", text: approval ? q.question.replace(/^```[a-z]*\n?/gm, "") : q.question }) : null,
        opts,
        described.length ? h("div", { class: "option-desc" }, described.map((o) => `${o.label}: ${o.description}`).join(" · ")) : null);
      if (q.custom && !readOnly) {
        const input = h("input", { type: "text", class: "custom-input", placeholder: approval ? "Or deny with a reason…" : q.multiple ? "Add your own…" : "Or type your own answer…" });
        customs[i] = input;
        if (!q.multiple) input.addEventListener("input", () => {
          if (input.value.trim()) { picks[i].clear(); opts.querySelectorAll("button").forEach((b) => b.classList.remove("selected")); }
        });
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); submit(); } });
        q_el.append(h("div", { class: "custom" }, input, simple ? h("button", { type: "button", class: "custom-submit", text: "Answer", onclick: submit }) : null));
      }
      card.append(q_el);
    });

    if (call.expiresAt) card.append(expiresLine(call.expiresAt));
    if (!readOnly) {
      card.append(h("div", { class: "actions" },
        h("button", { type: "button", class: "dismiss", text: "Dismiss", onclick: () => settle(card, { toolCallId: call.toolCallId, dismissed: true }) }),
        simple ? null : h("button", { type: "button", class: "submit", text: "Send answers", onclick: submit })));
      if (approval) card.querySelector(".custom-submit")?.replaceChildren("Deny");
    }
    return card;
  }

  async function settle(card, body, onSettled) {
    card.querySelectorAll("button, input, textarea").forEach((el) => { el.disabled = true; });
    try {
      await api("POST", `/api/chats/${encodeURIComponent(app.chatId)}/settle`, body);
      showError(null);
      if (onSettled) onSettled();
      card.remove();
      ui.questions.hidden = !ui.questions.children.length;
      app.stickToBottom = true;
    } catch (err) {
      card.querySelectorAll("button, input, textarea").forEach((el) => { el.disabled = false; });
      showError(err);
    }
    scheduleRefresh(0);
  }

  // ---- sending ----------------------------------------------------------------------------

  async function sendMessage() {
    const text = ui.text.value.trim();
    if ((!text && !app.attachments.length) || !app.chatId) return;
    const chatId = app.chatId;
    // The files first: a message is sent only once every one of them is stored.
    const files = app.attachments.slice();
    const parts = [];
    try {
      for (const f of files) parts.push(await upload(chatId, f));
    } catch (err) {
      showError(err);
      return;
    }
    app.attachments = [];
    renderAttachments();
    if (text) parts.push({ type: "text", text });
    const body = { id: newId("msg-"), parts };
    if (app.chat && app.chat.state === "running" && ui.steer.checked) body.delivery = "steer";
    ui.text.value = "";
    autosize();
    ui.steer.checked = false;
    showError(null);
    app.stickToBottom = true;
    const wasNew = !app.chat;
    if (wasNew) rememberTitle(chatId, text || files.map((f) => f.name).join(", "));
    const request = api("POST", `/api/chats/${encodeURIComponent(chatId)}/messages`, body);
    // The JSON request answers when the turn ends; the event stream shows it meanwhile.
    setTimeout(() => { if (chatId === app.chatId) { scheduleRefresh(0); if (wasNew) loadChats(); } }, 150);
    try {
      await request;
    } catch (err) {
      if (chatId === app.chatId) {
        showError(err);
        if (!ui.text.value) ui.text.value = text;
        // The files stay chosen (sending them again finds them stored: one file each).
        if (files.length && !app.attachments.length) { app.attachments = files; renderAttachments(); }
      }
    }
    if (chatId === app.chatId) scheduleRefresh(0);
    loadChats();
  }

  function autosize() {
    ui.text.style.height = "auto";
    ui.text.style.height = Math.min(ui.text.scrollHeight, 200) + "px";
  }

  // ---- live events (fetch-based SSE, so the bearer token can be sent) ---------------------

  function stopEvents() {
    if (app.events) app.events.abort();
    app.events = null;
  }

  async function startEvents(id) {
    const ctrl = new AbortController();
    app.events = ctrl;
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    let delay = 500;
    while (!ctrl.signal.aborted) {
      try {
        const res = await fetch(`/api/chats/${encodeURIComponent(id)}/events`, {
          headers: headers({ Accept: "text/event-stream" }),
          signal: ctrl.signal,
        });
        if (res.status === 404) { await sleep(1000); continue; } // not saved yet
        if (res.status === 401 || res.status === 403) {
          const data = await res.json().catch(() => ({}));
          showError(new ApiError(res.status, (data.error || {}).code || "forbidden", (data.error || {}).message || "not allowed"));
          return;
        }
        if (!res.ok || !res.body) throw new Error("events: HTTP " + res.status);
        delay = 500;
        scheduleRefresh(0);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n/g, "\n");
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
            if (!data) continue;
            try { onEvent(JSON.parse(data)); } catch (_) { /* not JSON: ignore */ }
          }
        }
      } catch (err) {
        if (ctrl.signal.aborted) return;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 8000);
    }
  }

  let listTimer = null;
  function onEvent(ev) {
    if (ev.type === "message" && ev.message && app.chat && Array.isArray(app.chat.messages)
      && ev.message.role === "assistant") {
      // An agent message's edit, pin or deletion shows at once (a tombstone hides it); the
      // refresh below brings the rest.
      const list = app.chat.messages;
      const at = list.findIndex((m) => m.id === ev.message.id);
      if (at >= 0) list[at] = ev.message;
      else list.push(ev.message);
      renderChat();
    }
    if (ev.type === "state") {
      if (app.chat && app.chat.state !== ev.state) {
        app.chat.state = ev.state;
        renderChat();
      }
      clearTimeout(listTimer);
      listTimer = setTimeout(loadChats, 150);
    }
    scheduleRefresh();
  }

  // ---- wiring -----------------------------------------------------------------------------

  ui.composer.addEventListener("submit", (e) => { e.preventDefault(); sendMessage(); });
  ui.attach.addEventListener("click", () => ui.attachInput.click());
  ui.attachInput.addEventListener("change", () => {
    app.attachments.push(...ui.attachInput.files);
    ui.attachInput.value = "";
    renderAttachments();
  });
  // Pasted images (a screenshot) are attached too.
  ui.text.addEventListener("paste", (e) => {
    const pasted = [...((e.clipboardData && e.clipboardData.files) || [])];
    if (!pasted.length) return;
    e.preventDefault();
    app.attachments.push(...pasted);
    renderAttachments();
  });
  ui.stop.addEventListener("click", async () => {
    try {
      await api("POST", `/api/chats/${encodeURIComponent(app.chatId)}/stop`, {});
      scheduleRefresh(0);
    } catch (err) { showError(err); }
  });
  ui.text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendMessage(); }
  });
  ui.text.addEventListener("input", autosize);
  ui.newChat.addEventListener("click", () => {
    location.hash = "chat=" + newId("web-");
    ui.text.focus();
  });
  ui.token.value = token();
  ui.token.addEventListener("change", () => {
    const t = ui.token.value.trim();
    if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
    const id = app.chatId;
    app.chatId = null;
    selectChat(id);
  });
  window.addEventListener("hashchange", () => {
    const id = chatFromHash();
    if (id) selectChat(id);
  });
  window.addEventListener("focus", () => { loadChats(); if (app.chatId) scheduleRefresh(0); });

  const initial = chatFromHash();
  if (initial) {
    selectChat(initial);
  } else {
    history.replaceState(null, "", "#chat=" + newId("web-"));
    selectChat(chatFromHash());
  }
  ui.text.focus();
})();

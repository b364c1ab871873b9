// The playground page: one channel with threads, the Home tab, modals; live through server-sent events.
"use strict";

const $ = (id) => document.getElementById(id);
const el = Blocks.el;
const ui = {
  user: new URLSearchParams(location.search).get("user") || "",
  state: null,
  tab: "channel",
  replyTo: null,
  collapsed: new Set(),
  modalKey: "",
  pending: false,
  again: false,
};

async function call(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ user: ui.user, ...body }),
  });
  const answer = await response.json().catch(() => ({ ok: false, error: "bad answer" }));
  if (!response.ok) showProblem(answer.error || "refused");
  else if (answer.problem) showProblem(answer.problem);
  return answer;
}

function showProblem(text) {
  const box = $("problem");
  box.textContent = text || "";
  box.hidden = !text;
}

async function refresh() {
  if (ui.pending) { ui.again = true; return; }
  ui.pending = true;
  try {
    do {
      ui.again = false;
      const asked = ui.user;
      const query = asked ? "?user=" + encodeURIComponent(asked) : "";
      const response = await fetch("/ui/state" + query);
      if (!response.ok) continue;
      // Asked for before the user was switched: someone else's state (rendering it would switch
      // back), so ask again for the one chosen now.
      if (ui.user !== asked) ui.again = true;
      else render(await response.json());
    } while (ui.again);
  } finally {
    ui.pending = false;
  }
}

function context() {
  const people = {};
  for (const p of ui.state.people) people[p.id] = p.name;
  people[ui.state.bot.id] = ui.state.bot.name;
  const channels = { [ui.state.channel.id]: ui.state.channel.name };
  return { people, channels, me: ui.user, onButton };
}

function clock(ts) {
  return new Date(Number(ts) * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function messageNode(m, ctx, extra) {
  const isBot = m.name === ui.state.bot.name;
  const node = el("div", "msg" + (extra || ""));
  node.dataset.ts = m.ts;
  const avatar = el("div", "avatar" + (isBot ? " bot" : ""), (m.name || "?").slice(0, 1).toUpperCase());
  const main = el("div", "body");
  const meta = el("div", "meta");
  meta.append(el("span", "name", m.name || ""));
  if (isBot) meta.append(el("span", "time", "APP"));
  meta.append(el("span", "time", clock(m.ts)));
  if (m.edited) meta.append(el("span", "edited", "(edited)"));
  main.append(meta);
  const blocks = m.blocks || [];
  main.append(blocks.length ? Blocks.render(blocks, { ...ctx, message: m }) : Blocks.mrkdwn(m.text, ctx));
  node.append(avatar, main);
  return node;
}

function ephemeralNode(e, ctx) {
  const node = messageNode({ ...e, name: ui.state.bot.name }, ctx, " ephemeral");
  node.querySelector(".meta").append(el("span", "only", "Only visible to you"));
  return node;
}

function render(state) {
  ui.state = state;
  ui.user = state.me.id;
  renderPeople();
  renderGuide(state.guide);
  const ctx = context();
  const box = $("messages");
  const pane = $("channel");
  const atBottom = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 80;
  box.replaceChildren();
  const byThread = {};
  const top = [];
  for (const e of state.ephemerals) (e.thread_ts ? (byThread[e.thread_ts] ||= []) : top).push(e);
  const flow = [...state.messages.map((m) => ({ m })), ...top.map((e) => ({ e }))];
  flow.sort((a, b) => Number((a.m || a.e).ts) - Number((b.m || b.e).ts));
  for (const item of flow) {
    if (item.e) { box.append(ephemeralNode(item.e, ctx)); continue; }
    const m = item.m;
    const node = messageNode(m, ctx);
    const replies = [...m.replies.map((r) => ({ m: r })), ...(byThread[m.ts] || []).map((e) => ({ e }))];
    replies.sort((a, b) => Number((a.m || a.e).ts) - Number((b.m || b.e).ts));
    const body = node.querySelector(".body");
    const bar = el("div", "thread-bar");
    const open = !ui.collapsed.has(m.ts);
    if (m.replies.length) {
      const toggle = el("button", "link", (open ? "▾ " : "▸ ") + m.replies.length + (m.replies.length === 1 ? " reply" : " replies"));
      toggle.type = "button";
      toggle.addEventListener("click", () => { open ? ui.collapsed.add(m.ts) : ui.collapsed.delete(m.ts); render(ui.state); });
      bar.append(toggle);
    }
    const reply = el("button", "link", "Reply in thread");
    reply.type = "button";
    reply.addEventListener("click", () => setReply(m.ts));
    bar.append(reply);
    body.append(bar);
    if (open && replies.length) {
      const thread = el("div", "thread");
      thread.dataset.thread = m.ts;
      for (const r of replies) thread.append(r.e ? ephemeralNode(r.e, ctx) : messageNode(r.m, ctx));
      body.append(thread);
    }
    box.append(node);
  }
  if (atBottom) pane.scrollTop = pane.scrollHeight;
  renderHome(ctx);
  renderModal(ctx);
}

function renderPeople() {
  const select = $("who");
  if (!select.options.length) {
    for (const p of ui.state.people) {
      const option = el("option", "", p.name + " (" + p.role + ")");
      option.value = p.id;
      select.append(option);
    }
  }
  select.value = ui.user;
  const me = ui.state.people.find((p) => p.id === ui.user);
  const approver = ui.state.people.find((p) => p.role === "approver");
  $("role").textContent = "You are " + me.name + ", the " + me.role + ". Only " + approver.name +
    " (the approver) may approve what the agents ask to run.";
}

// The guide: which model runs, what a run takes here, and the suggested tasks (the server's list).
function renderGuide(guide) {
  $("team-line").textContent = guide.team;
  $("timing").textContent = guide.timing ? "· " + guide.timing : "";
  const box = $("suggestions");
  if (box.childElementCount) return;
  for (const s of guide.suggestions) {
    const button = el("button", "btn suggestion");
    button.type = "button";
    button.title = s.text;
    button.append(el("span", "label", s.label), el("span", "shows", s.shows));
    button.addEventListener("click", () => suggest(s.text));
    box.append(button);
  }
}

// A suggestion is typed for the user and sent through the composer, like any typed task.
function suggest(text) {
  setReply(null);
  $("text").value = text;
  $("composer").requestSubmit();
}

function renderHome(ctx) {
  const home = $("home-view");
  if (!ui.state.home) return;
  home.replaceChildren(Blocks.render(ui.state.home.blocks, { ...ctx, view: ui.state.home }));
}

function renderModal(ctx) {
  const view = ui.state.modal;
  const key = view ? view.id + ":" + view.hash : "";
  if (key === ui.modalKey) return; // keep what the user is typing
  ui.modalKey = key;
  $("modal").hidden = !view;
  if (!view) return;
  $("modal-title").textContent = (view.title && view.title.text) || "";
  $("modal-body").replaceChildren(Blocks.render(view.blocks, { ...ctx, view }));
  $("modal-submit").textContent = (view.submit && view.submit.text) || "Submit";
  $("modal-submit").hidden = !view.submit;
  $("modal-close").textContent = (view.close && view.close.text) || "Close";
  $("modal-error").hidden = true;
}

function setReply(ts) {
  ui.replyTo = ts;
  $("replying").hidden = !ts;
  if (ts) $("text").focus();
}

function askConfirm(confirm) {
  return new Promise((resolve) => {
    $("confirm-title").textContent = (confirm.title && confirm.title.text) || "Are you sure?";
    $("confirm-text").replaceChildren(Blocks.mrkdwn((confirm.text && confirm.text.text) || "", context()));
    $("confirm-yes").textContent = (confirm.confirm && confirm.confirm.text) || "Yes";
    $("confirm-yes").className = "btn " + (confirm.style === "danger" ? "danger" : "primary");
    $("confirm-no").textContent = (confirm.deny && confirm.deny.text) || "Cancel";
    $("confirm").hidden = false;
    const done = (answer) => { $("confirm").hidden = true; $("confirm-yes").onclick = $("confirm-no").onclick = null; resolve(answer); };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
  });
}

async function onButton(element, block, node) {
  if (element.confirm && !(await askConfirm(element.confirm))) return;
  const where = {};
  const host = node.closest("[data-ts]");
  if (node.closest("#modal")) where.view_id = ui.state.modal.id;
  else if (node.closest("#home")) where.view_id = ui.state.home.id;
  else where.message_ts = host.dataset.ts;
  node.disabled = true;
  await call("/ui/click", { action_id: element.action_id, block_id: block.block_id, value: element.value, ...where });
  node.disabled = false;
}

function modalValues() {
  const values = {};
  for (const field of $("modal-body").querySelectorAll("[data-action-id][data-block-id]")) {
    const type = field.dataset.type;
    const entry = type === "static_select"
      ? { type, selected_option: { value: field.value, text: { type: "plain_text", text: field.selectedOptions[0]?.textContent || "" } } }
      : { type, value: field.value || null };
    (values[field.dataset.blockId] ||= {})[field.dataset.actionId] = entry;
  }
  return values;
}

function wire() {
  $("who").addEventListener("change", (event) => {
    ui.user = event.target.value;
    history.replaceState(null, "", "?user=" + encodeURIComponent(ui.user));
    ui.modalKey = "";
    showProblem("");
    if (ui.tab === "home") call("/ui/home", {});
    refresh();
  });
  $("tab-channel").addEventListener("click", () => showTab("channel"));
  $("tab-home").addEventListener("click", () => showTab("home"));
  $("composer").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("text").value;
    if (!text.trim()) return;
    showProblem("");
    $("send").disabled = true;
    const answer = await call("/ui/send", { text, thread_ts: ui.replyTo });
    $("send").disabled = false;
    if (answer.ok) { $("text").value = ""; setReply(null); }
  });
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
  });
  $("cancel-reply").addEventListener("click", () => setReply(null));
  const close = () => ui.state.modal && call("/ui/close", { view_id: ui.state.modal.id });
  $("modal-x").addEventListener("click", close);
  $("modal-close").addEventListener("click", close);
  $("modal-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await call("/ui/submit", { view_id: ui.state.modal.id, values: modalValues() });
    for (const box of $("modal-body").querySelectorAll("[data-error-for]")) {
      const text = (answer.errors || {})[box.dataset.errorFor];
      box.textContent = text || "";
      box.hidden = !text;
    }
    const general = (answer.errors || {})[""];
    $("modal-error").textContent = general || "";
    $("modal-error").hidden = !general;
  });
}

function showTab(tab) {
  ui.tab = tab;
  $("channel").hidden = tab !== "channel";
  $("home").hidden = tab !== "home";
  $("composer").hidden = tab !== "channel";
  $("tab-channel").classList.toggle("active", tab === "channel");
  $("tab-home").classList.toggle("active", tab === "home");
  if (tab === "home") call("/ui/home", {});
}

function live() {
  const events = new EventSource("/ui/events");
  events.addEventListener("change", () => refresh());
  // What changed before the stream was (re)connected, e.g. a modal opened by the first click, is
  // read again once it is: a change is never announced only to a page that was not listening yet.
  events.addEventListener("open", () => refresh());
  events.onerror = () => { /* EventSource reconnects by itself */ };
}

wire();
refresh().then(live);

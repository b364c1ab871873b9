// Block Kit and mrkdwn rendering for the playground. Every piece of text becomes a DOM text node
// (never innerHTML): what an agent writes is shown, never run.
"use strict";

const Blocks = (() => {
  const EMOJI = {
    white_check_mark: "✅", x: "❌", warning: "⚠️", hourglass: "⌛", hourglass_flowing_sand: "⏳",
    robot_face: "🤖", lock: "🔒", no_entry: "⛔", alarm_clock: "⏰", tada: "🎉", eyes: "👀",
    ballot_box_with_check: "☑️", thumbsup: "👍", "+1": "👍", stop_sign: "🛑", memo: "📝",
  };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function unescape(text) {
    return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  }

  function emojify(text) {
    return text.replace(/:([a-z0-9_+-]+):/g, (m, name) => EMOJI[name] || m);
  }

  function dateText(epoch, fallback) {
    const when = new Date(Number(epoch) * 1000);
    return isNaN(when.getTime()) ? fallback : when.toLocaleString();
  }

  // `<...>` tokens: links, user/channel mentions, specials, dates.
  function angle(inner, ctx) {
    if (inner.startsWith("@")) {
      const id = inner.slice(1).split("|")[0];
      const name = (ctx.people && ctx.people[id]) || id;
      return el("span", "mention" + (id === ctx.me ? " me" : ""), "@" + name);
    }
    if (inner.startsWith("#")) {
      const [id, label] = inner.slice(1).split("|");
      return el("span", "mention", "#" + (label || (ctx.channels && ctx.channels[id]) || id));
    }
    if (inner.startsWith("!")) {
      const [head, label] = inner.slice(1).split("|");
      if (head.startsWith("date^")) return document.createTextNode(dateText(head.split("^")[1], label || ""));
      if (head.startsWith("subteam^")) return el("span", "mention", label || "@group");
      return el("span", "mention", "@" + head);
    }
    const [url, label] = inner.split("|");
    if (/^(https?:|mailto:)/i.test(url)) {
      const a = el("a", "", unescape(label || url));
      a.href = unescape(url);
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      return a;
    }
    return document.createTextNode("<" + unescape(inner) + ">");
  }

  const INLINE = /<([^<>\n]+)>|`([^`\n]+)`|\*([^*\n]+)\*|_([^_\n]+)_|~([^~\n]+)~/g;

  function inline(text, ctx, parent) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.append(emojify(unescape(text.slice(last, m.index))));
      if (m[1] !== undefined) parent.append(angle(m[1], ctx));
      else if (m[2] !== undefined) parent.append(el("code", "", unescape(m[2])));
      else {
        const tag = m[3] !== undefined ? "b" : m[4] !== undefined ? "i" : "s";
        const node = el(tag);
        inline(m[3] ?? m[4] ?? m[5], ctx, node);
        parent.append(node);
      }
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(emojify(unescape(text.slice(last))));
  }

  function mrkdwn(text, ctx) {
    const root = el("div", "mrkdwn");
    const parts = String(text || "").split("```");
    parts.forEach((part, i) => {
      if (i % 2 === 1) {
        root.append(el("pre", "", unescape(part.replace(/^\n/, ""))));
        return;
      }
      let quote = null;
      part.split("\n").forEach((line, j, lines) => {
        const quoted = /^(&gt;|>) ?/.exec(line);
        const target = quoted ? (quote ||= root.appendChild(el("blockquote"))) : root;
        if (!quoted) quote = null;
        inline(quoted ? line.slice(quoted[0].length) : line, ctx, target);
        if (j < lines.length - 1) target.append(el("br"));
      });
    });
    return root;
  }

  function textObject(obj, ctx) {
    if (!obj) return el("span");
    if (obj.type === "mrkdwn") return mrkdwn(obj.text, ctx);
    return el("span", "plain", emojify(obj.text || ""));
  }

  function button(element, block, ctx) {
    const b = el("button", "btn" + (element.style ? " " + element.style : ""), element.text ? element.text.text : "");
    b.type = "button";
    b.dataset.actionId = element.action_id || "";
    b.addEventListener("click", () => ctx.onButton(element, block, b));
    return b;
  }

  function accessory(element, block, ctx) {
    if (!element) return null;
    if (element.type === "button") return button(element, block, ctx);
    if (element.type === "image") return el("span", "muted", "[image: " + (element.alt_text || "") + "]");
    return el("span", "muted", "[" + element.type + "]");
  }

  function richElements(elements, ctx, parent) {
    for (const e of elements || []) {
      if (e.type === "text") {
        const s = e.style || {};
        let node = document.createTextNode(e.text || "");
        for (const [flag, tag] of [["code", "code"], ["bold", "b"], ["italic", "i"], ["strike", "s"]]) {
          if (s[flag]) { const w = el(tag); w.append(node); node = w; }
        }
        parent.append(node);
      } else if (e.type === "link") parent.append(angle(e.url + (e.text ? "|" + e.text : ""), ctx));
      else if (e.type === "user") parent.append(angle("@" + e.user_id, ctx));
      else if (e.type === "channel") parent.append(angle("#" + e.channel_id, ctx));
      else if (e.type === "usergroup") parent.append(el("span", "mention", "@group"));
      else if (e.type === "broadcast") parent.append(el("span", "mention", "@" + e.range));
      else if (e.type === "emoji") parent.append(EMOJI[e.name] || ":" + e.name + ":");
      else if (e.type === "date") parent.append(dateText(e.timestamp, e.fallback || ""));
    }
  }

  function richText(block, ctx) {
    const root = el("div", "rich");
    for (const part of block.elements || []) {
      if (part.type === "rich_text_section") { const p = el("div"); richElements(part.elements, ctx, p); root.append(p); }
      else if (part.type === "rich_text_preformatted") { const p = el("pre"); richElements(part.elements, ctx, p); root.append(p); }
      else if (part.type === "rich_text_quote") { const p = el("blockquote"); richElements(part.elements, ctx, p); root.append(p); }
      else if (part.type === "rich_text_list") {
        const list = el(part.style === "ordered" ? "ol" : "ul", "rt");
        list.style.marginLeft = (part.indent || 0) * 16 + "px";
        for (const item of part.elements || []) { const li = el("li"); richElements(item.elements, ctx, li); list.append(li); }
        root.append(list);
      }
    }
    return root;
  }

  function input(block, ctx) {
    const wrap = el("div", "input");
    const e = block.element || {};
    const id = "in-" + block.block_id + "-" + e.action_id;
    const label = el("label", "", (block.label && block.label.text) || "");
    label.htmlFor = id;
    if (block.optional) label.append(el("span", "muted", " (optional)"));
    wrap.append(label);
    let field;
    if (e.type === "plain_text_input") {
      field = el(e.multiline ? "textarea" : "input");
      if (e.multiline) field.rows = 3;
      if (e.initial_value) field.value = e.initial_value;
      if (e.max_length) field.maxLength = e.max_length;
      if (e.placeholder) field.placeholder = e.placeholder.text;
    } else if (e.type === "static_select") {
      field = el("select");
      for (const o of e.options || []) { const opt = el("option", "", o.text.text); opt.value = o.value; field.append(opt); }
    } else {
      field = el("input");
      field.disabled = true;
      field.value = "[" + e.type + " is not shown in the playground]";
    }
    field.id = id;
    field.dataset.blockId = block.block_id;
    field.dataset.actionId = e.action_id;
    field.dataset.type = e.type;
    wrap.append(field);
    if (block.hint) wrap.append(el("div", "hint", block.hint.text));
    const err = el("div", "problem");
    err.dataset.errorFor = block.block_id;
    err.hidden = true;
    wrap.append(err);
    return wrap;
  }

  function block(b, ctx) {
    const box = el("div", "blk " + b.type);
    switch (b.type) {
      case "header": box.append(el("h3", "", emojify((b.text && b.text.text) || ""))); break;
      case "divider": return el("hr", "divider");
      case "section": {
        const text = el("div", "text");
        if (b.text) text.append(textObject(b.text, ctx));
        if (b.fields) { const f = el("div", "fields"); for (const x of b.fields) f.append(textObject(x, ctx)); text.append(f); }
        box.append(text);
        const acc = accessory(b.accessory, b, ctx);
        if (acc) box.append(acc);
        break;
      }
      case "context":
        for (const e of b.elements || []) box.append(e.type === "image" ? el("span", "", "▪") : textObject(e, ctx));
        break;
      case "actions":
        for (const e of b.elements || []) box.append(e.type === "button" ? button(e, b, ctx) : accessory(e, b, ctx));
        break;
      case "rich_text": box.append(richText(b, ctx)); break;
      case "markdown": box.append(mrkdwn(b.text, ctx)); break;
      case "image": box.append(el("span", "muted", "[image: " + (b.alt_text || "") + "]")); break;
      case "input": return input(b, ctx);
      default: box.append(el("span", "muted", "[" + b.type + " block]"));
    }
    return box;
  }

  function render(blocks, ctx) {
    const root = el("div", "blocks");
    for (const b of blocks || []) root.append(block(b, ctx));
    return root;
  }

  return { render, mrkdwn, el, emojify };
})();

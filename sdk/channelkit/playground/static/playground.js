/* channelkit playground page: long-polls /_emulator/state and renders the emulated chat.
 *
 * Every piece of text from the emulator (messages, cards, drafts) is put on the page as
 * DOM nodes built here (text nodes, or the few Telegram HTML tags allowed), never as HTML.
 * An unexpected error is logged with console.error and shown in the error bar; the page
 * keeps polling, and one card that fails to render does not stop the others. */
(function () {
  "use strict";

  var chat = document.getElementById("chat");
  var typing = document.getElementById("typing");
  var draftEl = document.getElementById("draft");
  var form = document.getElementById("composer-form");
  var input = document.getElementById("composer");
  var platformEl = document.getElementById("platform");
  var errorBar = document.getElementById("error-bar");
  var errorText = document.getElementById("error-text");
  var errorClose = document.getElementById("error-close");
  var rendered = {};   // timeline seq -> element
  var cardEls = {};    // card id -> element
  var msgEls = {};     // user msgId -> element
  var version = -1;
  var pollWait = 8;
  var offline = false; // the last poll could not reach the playground
  var platform = "";   // the emulated platform, from the first poll
  var chatAs = document.getElementById("chat-as");
  var mention = document.getElementById("mention");
  var mentionLabel = document.getElementById("mention-label");
  var sentWhere = {};  // user msgId -> where the page sent it ("group", "group, teammate")
  // the second person of the emulated group (an id every emulator accepts)
  var TEAMMATE = "70017001";
  // platforms whose people write to the bot in direct chats only
  var NO_GROUPS = { weixin: true };
  // platforms whose emulator takes no files from the person (every one does now)
  var NO_FILES = {};
  var attach = document.getElementById("attach");

  // -- errors ----------------------------------------------------------------------------
  function describe(err) {
    if (err && err.message) return err.message;
    return String(err);
  }

  function showError(text) {
    if (!errorBar) return;
    errorText.textContent = text;
    errorBar.hidden = false;
  }

  function hideError() {
    if (errorBar) errorBar.hidden = true;
  }

  // An unexpected error: the console gets the whole error (with its stack), the page a line.
  function reportError(what, err) {
    console.error("playground: " + what + " failed:", err);
    showError(what + " failed: " + describe(err));
  }

  if (errorClose) errorClose.addEventListener("click", hideError);
  // Whatever escapes a handler: the browser logs it already, the page shows it too.
  window.addEventListener("error", function (e) {
    showError("error: " + (e.message || "unknown error"));
  });
  window.addEventListener("unhandledrejection", function (e) {
    reportError("a background task", e.reason);
  });

  // -- nodes -----------------------------------------------------------------------------
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // Minimal, safe Markdown: **bold** and line breaks (text nodes only).
  function renderText(node, text) {
    clear(node);
    var parts = String(text || "").split(/(\*\*[^*]+\*\*)/);
    parts.forEach(function (part) {
      if (/^\*\*[^*]+\*\*$/.test(part)) node.appendChild(el("b", null, part.slice(2, -2)));
      else if (part) node.appendChild(document.createTextNode(part));
    });
  }

  // The markup each platform's bot text is written in, drawn by markup.js as the platform
  // shows it (Slack: mrkdwn, or Markdown where the view says so, as a stream's text is).
  var PLATFORM_MARKUP = {
    slack: "slack", dingtalk: "dingtalk", feishu: "feishu", discord: "discord"
  };

  function markupOf(markup) {
    if (platform === "slack" && markup === "markdown") return "markdown";
    return PLATFORM_MARKUP[platform] || null;
  }

  // A bot's text: in its platform's markup where it has one, else as renderText does.
  function renderBotText(node, text, markup) {
    var dialect = markupOf(markup);
    if (dialect) window.renderMarkup(node, text || "", dialect);
    else renderText(node, text);
  }

  // -- Telegram HTML (parse_mode "HTML") ----------------------------------------------------
  // The tags Telegram's HTML parse mode knows, by the group an end tag must match.
  var TG_TAGS = {
    b: "b", strong: "b", i: "i", em: "i", u: "u", ins: "u", s: "s", strike: "s", del: "s",
    code: "code", pre: "pre", a: "a", blockquote: "blockquote",
    "tg-spoiler": "spoiler", span: "spoiler"
  };
  var TG_ELEMENT = { spoiler: "span", a: "a" };
  var TG_TAG_RE = /<(\/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s[^<>]*)?)>/g;
  var TG_ENTITIES = { lt: "<", gt: ">", amp: "&", quot: "\"" };

  function decodeEntities(text) {
    return text.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|lt|gt|amp|quot);/g, function (m, name) {
      if (name.charAt(0) !== "#") return TG_ENTITIES[name];
      var hex = name.charAt(1) === "x" || name.charAt(1) === "X";
      var code = parseInt(name.slice(hex ? 2 : 1), hex ? 16 : 10);
      return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff)
        ? String.fromCodePoint(code) : m;
    });
  }

  function tagAttribute(attrs, name) {
    var re = new RegExp("(?:^|\\s)" + name + "\\s*=\\s*(?:\"([^\"]*)\"|'([^']*)'|([^\\s\"'=<>`]+))", "i");
    var m = re.exec(attrs);
    if (!m) return null;
    return decodeEntities(m[1] !== undefined ? m[1] : m[2] !== undefined ? m[2] : m[3]);
  }

  // Only http(s) and tg: links become links.
  function safeHref(href) {
    if (href === null) return null;
    href = href.trim();
    return /^(?:https?|tg):/i.test(href) ? href : null;
  }

  function openTgTag(name, attrs) {
    var group = TG_TAGS[name];
    if (!group) return null;
    if (name === "span" && tagAttribute(attrs, "class") !== "tg-spoiler") return null;
    var node = el(TG_ELEMENT[group] || group, "tg-" + group);
    if (group === "spoiler") {
      node.title = "spoiler: click to show";
      node.addEventListener("click", function () { node.classList.toggle("revealed"); });
    } else if (group === "a") {
      var href = safeHref(tagAttribute(attrs, "href"));
      if (href === null) return el("span", "tg-link-refused");
      node.href = href;
      node.target = "_blank";
      node.rel = "noopener noreferrer";
    }
    return node;
  }

  // Telegram HTML as DOM nodes: the allowed tags become elements (no attributes but a
  // checked href), entities are decoded, anything else (other tags, unmatched end tags)
  // stays visible as the literal text it is.
  function renderTelegramHtml(node, html) {
    clear(node);
    var stack = [{ group: null, node: node }];
    var top = function () { return stack[stack.length - 1].node; };
    var addText = function (text, decode) {
      if (text) top().appendChild(document.createTextNode(decode ? decodeEntities(text) : text));
    };
    var last = 0;
    var m;
    TG_TAG_RE.lastIndex = 0;
    while ((m = TG_TAG_RE.exec(html)) !== null) {
      addText(html.slice(last, m.index), true);
      last = TG_TAG_RE.lastIndex;
      var name = m[2].toLowerCase();
      var handled = false;
      if (m[1]) {
        var group = TG_TAGS[name];
        for (var i = stack.length - 1; group && i > 0; i--) {
          if (stack[i].group === group) { stack.length = i; handled = true; break; }
        }
      } else {
        var opened = openTgTag(name, m[3]);
        if (opened) {
          top().appendChild(opened);
          stack.push({ group: TG_TAGS[name], node: opened });
          handled = true;
        }
      }
      if (!handled) addText(m[0], false);
    }
    addText(html.slice(last), true);
  }

  // A message's text in the format it was sent with: Telegram's HTML parse mode; the
  // platform's markup (markup.js); anything else as plain text.
  function renderFormatted(node, text, parseMode, markup) {
    if (parseMode && String(parseMode).toUpperCase() === "HTML") renderTelegramHtml(node, text || "");
    else if (markupOf(markup)) window.renderMarkup(node, text || "", markupOf(markup));
    else node.textContent = text || "";
  }

  // -- requests ----------------------------------------------------------------------------
  function readJson(response, what) {
    if (!response.ok) {
      return response.text().then(function (body) {
        throw new Error(what + " answered HTTP " + response.status + ": " + body.slice(0, 200));
      });
    }
    return response.json();
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {})
    }).then(function (r) { return readJson(r, "POST " + path); });
  }

  // -- chat rows ---------------------------------------------------------------------------
  function scrollDown() { chat.scrollTop = chat.scrollHeight; }

  // Rows go before the draft, which stays the last thing in the list.
  function appendRow(row) {
    if (draftEl && draftEl.parentNode === chat) chat.insertBefore(row, draftEl);
    else chat.appendChild(row);
    return row;
  }

  // ``files`` of a view or timeline entry ({name, contentType, size, url?}): an image
  // with a url inline, any other file with a url as a link, one without (what the person
  // sent) as its name and size.
  function renderFiles(box, files) {
    clear(box);
    (files || []).forEach(function (f) {
      var label = (f.name || "file") + " (" + (f.size || 0) + " bytes)";
      if (f.url && /^image\//.test(f.contentType || "")) {
        var img = el("img");
        img.src = f.url;
        img.alt = f.name || "image";
        img.title = label;
        box.appendChild(img);
      } else if (f.url) {
        var link = el("a", "file", label);
        link.href = f.url;
        link.target = "_blank";
        link.rel = "noopener";
        if (f.name) link.setAttribute("download", f.name);
        box.appendChild(link);
      } else {
        box.appendChild(el("div", "file", "\ud83d\udcce " + label));
      }
    });
  }

  function addMessage(entry) {
    var row = el("div", "row " + (entry.from === "user" ? "user" : "bot"));
    row.dataset.seq = entry.seq;
    var bubble = el("div", "bubble");
    bubble.classList.add(entry.from === "user" ? "user-message" : "bot-message");
    if (entry.from !== "user" && entry.format === "markdown") renderBotText(bubble, entry.text);
    else renderText(bubble, entry.text);
    if (entry.files && entry.files.length) renderFiles(bubble.appendChild(el("div", "files")), entry.files);
    row.appendChild(bubble);
    if (entry.from === "user") {
      var reactions = el("div", "reactions");
      row.appendChild(reactions);
      if (entry.msgId) {
        msgEls[entry.msgId] = row;
        if (sentWhere[entry.msgId]) labelWhere(row, sentWhere[entry.msgId]);
      }
    } else if (entry.via) {
      row.appendChild(el("div", "meta", "via " + entry.via));
    }
    return appendRow(row);
  }

  function addCard(entry) {
    var row = el("div", "row bot");
    row.dataset.seq = entry.seq;
    var card = el("div", "card");
    card.dataset.cardId = entry.card;
    row.appendChild(card);
    cardEls[entry.card] = card;
    return appendRow(row);
  }

  function setButtons(card, disabled) {
    card.querySelectorAll("button").forEach(function (b) { b.disabled = disabled; });
  }

  function action(cardId, name, formData, userId) {
    // A teammate's click changes nothing (the SDK refuses it), so it locks no buttons.
    var card = userId ? null : cardEls[cardId];
    var before = card ? card.dataset.state + "/" + card.dataset.rev : null;
    if (card) setButtons(card, true);
    // A click the platform acknowledged but the SDK ignored (for example one that raced
    // the card's activation) changes nothing: let the person click again.
    setTimeout(function () {
      if (card && card.dataset.state + "/" + card.dataset.rev === before) setButtons(card, false);
    }, 1500);
    var body = { action: name, form: formData || {} };
    if (userId) body.userId = userId;
    return post("/_emulator/cards/" + encodeURIComponent(cardId) + "/action", body).then(function (res) {
      if (card && (!res || res.status >= 300 || res.status === 0)) {
        // the channel's answer to the platform's callback: shown on the card itself
        var note = card.querySelector(".error-note") || el("div", "error-note");
        note.textContent = "callback answered " + (res ? res.status : "?");
        card.appendChild(note);
        setButtons(card, false);
      }
    }).catch(function (err) {
      if (card) setButtons(card, false);
      reportError("the " + name + " click", err);
    });
  }

  function renderBadge(card, view) {
    var badge = card.querySelector(".badge");
    var state = String(view.state || "");
    badge.className = "badge " + state;
    badge.textContent = state.charAt(0).toUpperCase() + state.slice(1);
  }

  function renderStatus(card, view) {
    if (!card.dataset.built) {
      var head = el("div", "card-head");
      head.appendChild(el("span", "badge"));
      head.appendChild(el("span", "status-line"));
      card.appendChild(head);
      var body = el("div", "card-body");
      body.appendChild(el("div", "card-content"));
      card.appendChild(body);
      var actions = el("div", "card-actions");
      // the card's own label when the status card carries one (its locale)
      var stop = el("button", "stop-btn danger", view.stopLabel || "Stop");
      stop.type = "button";
      stop.addEventListener("click", function () { action(view.id, "stop"); });
      actions.appendChild(stop);
      // Only the person who started a run may stop it: try it as somebody else.
      var mate = el("button", "stop-teammate-btn", "Stop as a teammate");
      mate.type = "button";
      mate.title = "Click Stop as another person in the chat: the run keeps going";
      mate.addEventListener("click", function () { action(view.id, "stop", null, "teammate"); });
      actions.appendChild(mate);
      card.appendChild(actions);
      card.dataset.built = "1";
    }
    renderBadge(card, view);
    card.querySelector(".status-line").textContent = view.statusLine || "";
    var content = card.querySelector(".card-content");
    renderBotText(content, view.content);
    content.classList.toggle("empty", !view.content);
    var canStop = (view.actions || []).indexOf("stop") >= 0;
    card.querySelectorAll(".stop-btn, .stop-teammate-btn").forEach(function (b) {
      b.hidden = !canStop;
      if (!canStop) b.disabled = true;
    });
  }

  function collectForm(card, view) {
    var data = {};
    (view.questions || []).forEach(function (q) {
      var checked = Array.prototype.slice.call(
        card.querySelectorAll('input[data-q="' + CSS.escape(q.name) + '"]:checked')
      ).map(function (i) { return i.value; });
      data[q.name] = q.multi ? checked : (checked[0] || "");
      if (q.other) {
        var text = card.querySelector('input[name="' + CSS.escape(q.other.name) + '"]');
        if (text && text.value.trim()) data[q.other.name] = text.value.trim();
      }
    });
    return data;
  }

  function renderQuestion(card, view) {
    if (!card.dataset.built) {
      card.classList.add("question-card");
      var head = el("div", "card-head");
      head.appendChild(el("span", "badge"));
      head.appendChild(el("span", "q-title"));
      card.appendChild(head);
      var body = el("form", "card-body question-form");
      body.appendChild(el("div", "q-desc"));
      (view.questions || []).forEach(function (q, qi) {
        var fs = el("fieldset", "question");
        fs.dataset.name = q.name;
        fs.appendChild(el("legend", null, q.label + (q.multi ? " (choose any)" : "")));
        (q.options || []).forEach(function (o, oi) {
          var label = el("label", "option");
          var box = document.createElement("input");
          box.type = q.multi ? "checkbox" : "radio";
          box.name = q.multi ? q.name + "__" + oi : "q" + qi + "-" + view.id;
          box.value = o.value;
          box.dataset.q = q.name;
          label.appendChild(box);
          label.appendChild(document.createTextNode(" " + o.text));
          fs.appendChild(label);
        });
        if (q.other) {
          var other = document.createElement("input");
          other.className = "other-text";
          other.name = q.other.name;
          other.placeholder = q.other.placeholder || "Other";
          fs.appendChild(other);
        }
        body.appendChild(fs);
      });
      body.addEventListener("submit", function (e) { e.preventDefault(); });
      card.appendChild(body);
      var actions = el("div", "card-actions");
      var submit = el("button", "submit-btn primary", "Submit");
      submit.type = "button";
      submit.addEventListener("click", function () { action(view.id, "submit", collectForm(card, view)); });
      var cancel = el("button", "cancel-btn", "Cancel");
      cancel.type = "button";
      cancel.addEventListener("click", function () { action(view.id, "cancel"); });
      actions.appendChild(submit);
      actions.appendChild(cancel);
      card.appendChild(actions);
      card.dataset.built = "1";
    }
    renderBadge(card, view);
    card.querySelector(".q-title").textContent = view.title || "Question";
    card.querySelector(".q-desc").textContent = view.desc || "";
    var open = (view.actions || []).indexOf("submit") >= 0;
    card.querySelectorAll("input").forEach(function (i) { i.disabled = !open; });
    var submitBtn = card.querySelector(".submit-btn");
    submitBtn.textContent = view.button || "Submit";
    if (!open) submitBtn.disabled = true;
    card.querySelector(".cancel-btn").hidden = !open;
  }

  // Buttons under a message or card: a callback button sends a tap (the platform's
  // callback_query or card action), a link button opens its http(s) link.
  function renderKeyboard(kb, view) {
    clear(kb);
    (view.keyboard || []).forEach(function (row) {
      var line = el("div", "kb-row");
      row.forEach(function (b) {
        var btn;
        if (b.data) {
          btn = el("button", "kb-btn", b.text);
          btn.type = "button";
          btn.dataset.data = b.data;
          btn.addEventListener("click", function () { action(view.id, "tap", { data: b.data }); });
        } else if (b.url && /^https?:\/\//i.test(b.url)) {
          btn = el("a", "kb-btn kb-link", b.text);
          btn.href = b.url;
          btn.target = "_blank";
          btn.rel = "noopener noreferrer";
        } else {
          btn = el("button", "kb-btn", b.text);
          btn.type = "button";
          btn.disabled = true;
        }
        line.appendChild(btn);
      });
      kb.appendChild(line);
    });
  }

  function renderCustom(card, view) {
    var key = JSON.stringify([view.content || "", view.keyboard || [], view.files || []]);
    if (card.dataset.custom === key) return;
    card.dataset.custom = key;
    clear(card);
    var body = el("div", "card-body");
    // a file message (DingTalk's image or file message) shows its file, not empty text
    if (view.content || !(view.files && view.files.length)) {
      body.appendChild(el("pre", "card-content", view.content || ""));
    }
    if (view.files && view.files.length) renderFiles(body.appendChild(el("div", "files")), view.files);
    card.appendChild(body);
    if (view.keyboard && view.keyboard.length) {
      var kb = el("div", "keyboard");
      renderKeyboard(kb, view);
      card.appendChild(kb);
    }
  }

  // Discord's select menus under a message: pick, then Choose sends the values.
  function renderSelects(box, view) {
    clear(box);
    (view.selects || []).forEach(function (menu) {
      var line = el("div", "kb-row dc-select");
      var select = document.createElement("select");
      select.multiple = (menu.maxValues || 1) > 1;
      select.disabled = !!menu.disabled;
      if (!select.multiple) {
        var none = el("option", null, menu.placeholder || "Choose\u2026");
        none.value = "";
        select.appendChild(none);
      }
      (menu.options || []).forEach(function (o) {
        var option = el("option", null, o.label);
        option.value = o.value;
        select.appendChild(option);
      });
      var choose = el("button", "kb-btn dc-choose", "Choose");
      choose.type = "button";
      choose.disabled = !!menu.disabled;
      choose.addEventListener("click", function () {
        var values = Array.prototype.slice.call(select.selectedOptions)
          .map(function (o) { return o.value; })
          .filter(function (v) { return v !== ""; });
        if (values.length) action(view.id, "select", { customId: menu.customId, values: values });
      });
      line.appendChild(select);
      line.appendChild(choose);
      box.appendChild(line);
    });
  }

  // A Discord modal the bot opened from a message: its text fields and Submit.
  function renderModal(box, view) {
    clear(box);
    var modal = view.modal;
    box.hidden = !modal;
    if (!modal) return;
    box.appendChild(el("div", "q-title", modal.title || ""));
    var inputs = {};
    (modal.fields || []).forEach(function (f) {
      var label = el("label", "dc-field", f.label || "");
      var input = document.createElement(f.style === 2 ? "textarea" : "input");
      input.placeholder = f.placeholder || "";
      input.dataset.customId = f.customId;
      inputs[f.customId] = input;
      label.appendChild(input);
      box.appendChild(label);
    });
    var submit = el("button", "kb-btn primary dc-modal-submit", "Submit");
    submit.type = "button";
    submit.addEventListener("click", function () {
      var form = {};
      Object.keys(inputs).forEach(function (k) { form[k] = inputs[k].value; });
      action(view.id, "modal", form);
    });
    box.appendChild(submit);
  }

  // A chat message with an optional inline keyboard (Telegram, Slack, Discord): edited in
  // place; Discord's also has select menus, a modal and embeds.
  function renderMessage(card, view) {
    if (!card.dataset.built) {
      card.classList.add("message-card");
      card.appendChild(el("div", "card-body msg-text"));
      card.appendChild(el("div", "files msg-files"));
      card.appendChild(el("div", "keyboard"));
      card.appendChild(el("div", "selects"));
      var modalForm = card.appendChild(el("form", "card-body dc-modal"));
      modalForm.addEventListener("submit", function (e) { e.preventDefault(); });
      card.appendChild(el("div", "meta msg-meta"));
      card.dataset.built = "1";
    }
    var selKey = JSON.stringify(view.selects || []);
    var selects = card.querySelector(".selects");
    if (selects.dataset.key !== selKey) {
      selects.dataset.key = selKey;
      renderSelects(selects, view);
    }
    var modalKey = JSON.stringify(view.modal || null);
    var modal = card.querySelector(".dc-modal");
    if (modal.dataset.key !== modalKey) {
      modal.dataset.key = modalKey;
      renderModal(modal, view);
    }
    var text = card.querySelector(".msg-text");
    var textKey = JSON.stringify([
      view.state === "deleted", view.text || "", view.parseMode || "", view.markup || ""
    ]);
    if (text.dataset.key !== textKey) {
      text.dataset.key = textKey;
      if (view.state === "deleted") text.textContent = "(message deleted)";
      else renderFormatted(text, view.text, view.parseMode, view.markup);
    }
    var filesKey = JSON.stringify(view.state === "deleted" ? [] : view.files || []);
    var filesBox = card.querySelector(".msg-files");
    if (filesBox.dataset.key !== filesKey) {
      filesBox.dataset.key = filesKey;
      renderFiles(filesBox, view.state === "deleted" ? [] : view.files);
    }
    var kbKey = JSON.stringify(view.keyboard || []);
    var kb = card.querySelector(".keyboard");
    if (card.dataset.kb !== kbKey) {
      card.dataset.kb = kbKey;
      renderKeyboard(kb, view);
    }
    var meta = [];
    if (view.edited) meta.push("edited");
    if (view.pinned) meta.push("pinned");
    if (platform === "discord" && view.ephemeral) meta.push("only you can see this");
    card.querySelector(".msg-meta").textContent = meta.join(" · ");
  }

  function renderToast(card, view) {
    var toast = card.querySelector(".toast");
    if (!view.toast) { if (toast) toast.remove(); return; }
    if (!toast) { toast = el("div", "toast"); card.appendChild(toast); }
    toast.className = "toast " + (view.toast.type || "info");
    toast.textContent = view.toast.text;
  }

  // A bot message may change kind in place (Slack's form becomes a plain message once
  // it is answered): start that card over in its new kind.
  function resetCard(card, kind) {
    clear(card);
    card.className = "card";
    delete card.dataset.built;
    delete card.dataset.custom;
    delete card.dataset.kb;
    card.dataset.kind = kind;
  }

  function renderCard(cardId, view) {
    var card = cardEls[cardId];
    if (!card || !view) return;
    if (card.dataset.kind !== view.kind) resetCard(card, view.kind);
    card.dataset.state = view.state;
    card.dataset.rev = view.updates || 0;
    if (view.kind === "status") renderStatus(card, view);
    else if (view.kind === "question") renderQuestion(card, view);
    else if (view.kind === "message") renderMessage(card, view);
    else renderCustom(card, view);
    renderToast(card, view);
  }

  // Weixin shows plain text only: no cards, no buttons. The agent's questions arrive as
  // the text prompt, answered by typing /approve or /deny; /cancel stops the run.
  var PLAIN_TEXT_HINTS = {
    weixin: "Say hello to the demo agent. Weixin shows plain text only: the agent " +
      "answers in one message while \u201ctyping\u201d shows, and its questions arrive " +
      "as a text prompt: reply /approve or /deny by typing. Send long, then /cancel, " +
      "to stop a run; fail to see a failed run."
  };

  function applyHint(platform) {
    var hint = document.getElementById("hint");
    var text = PLAIN_TEXT_HINTS[platform];
    if (!hint || !text || hint.dataset.platform === platform) return;
    hint.dataset.platform = platform;
    hint.textContent = text;
  }

  // Telegram's sendMessageDraft: the bot's message as it is being written, shown as the
  // last entry of the message list.
  function renderDraft(draft) {
    if (!draftEl) return;
    draftEl.hidden = !draft;
    draftEl.dataset.placeholder = draft && !draft.text ? "1" : "0";
    if (!draft) return;
    var key = JSON.stringify([draft.text || "", draft.parseMode || ""]);
    if (draftEl.dataset.key === key) return;
    draftEl.dataset.key = key;
    if (draft.text) renderFormatted(draftEl, draft.text, draft.parseMode);
    else draftEl.textContent = "Thinking\u2026";
  }

  function apply(state) {
    var first = !platform;
    platform = state.platform || "";
    if (platformEl && state.platform) platformEl.textContent = state.platform + " (emulated)";
    if (first && platform) showChatChoice();
    applyHint(state.platform);
    var atBottom = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80;
    var added = false;
    (state.timeline || []).forEach(function (entry) {
      if (rendered[entry.seq]) return;
      rendered[entry.seq] = entry.kind === "card" ? addCard(entry) : addMessage(entry);
      added = true;
    });
    var views = state.views || {};
    var running = false;
    Object.keys(cardEls).forEach(function (id) {
      try {
        renderCard(id, views[id]);
      } catch (err) {  // one card's trouble leaves the rest of the chat up to date
        reportError("rendering card " + id, err);
      }
      if (views[id] && views[id].state === "running") running = true;
    });
    var reactions = state.reactions || {};
    Object.keys(msgEls).forEach(function (msgId) {
      var list = reactions[msgId] || [];
      msgEls[msgId].querySelector(".reactions").textContent = list.join(" ");
      if (list.length) running = true;
    });
    // A question or permission prompt waiting for the person is their turn: the agent
    // is not working then, whatever reaction or status stays on meanwhile.
    var waiting = !!state.waiting;
    var waitingCards = state.waitingCards || [];
    Object.keys(cardEls).forEach(function (id) {
      cardEls[id].classList.toggle("awaiting", waitingCards.indexOf(id) >= 0);
    });
    document.body.dataset.waiting = waiting ? "1" : "0";
    typing.hidden = waiting || !(running || state.typing);
    renderDraft(state.draft);
    // Telegram's typing status lasts 5 s, and an answered request may change nothing
    // else the page sees at once: poll sooner so either can lapse.
    pollWait = state.typing || state.draft || state.requestPending ? 1 : 8;
    (state.timeline || []).forEach(function (entry) {
      var row = rendered[entry.seq];
      if (!row) return;
      row.classList.toggle("deleted", !!entry.deleted);
      row.classList.toggle("pinned", !!entry.pinned);
    });
    document.body.dataset.version = state.version;
    if (added || atBottom) scrollDown();
  }

  function poll() {
    fetch("/_emulator/state?since=" + version + "&wait=" + pollWait, { cache: "no-store" })
      .then(function (r) { return readJson(r, "GET /_emulator/state"); })
      .then(function (state) {
        if (offline) { offline = false; hideError(); }
        version = state.version;
        try {
          apply(state);
        } catch (err) {
          reportError("updating the chat", err);
        }
        setTimeout(poll, 30);
      }, function (err) {
        if (err instanceof TypeError) {
          // the request never got an answer: the playground stopped or restarts
          offline = true;
          console.warn("playground: cannot reach the playground, retrying:", describe(err));
          showError("cannot reach the playground; retrying\u2026");
        } else {
          reportError("polling the chat", err);
        }
        setTimeout(poll, 1000);
      });
  }

  // -- who writes, and where ------------------------------------------------------------
  function labelWhere(row, where) {
    if (!row.querySelector(".where")) row.appendChild(el("div", "meta where", where));
  }

  function showChatChoice() {
    if (!chatAs) return;
    chatAs.hidden = !!NO_GROUPS[platform];
    if (chatAs.hidden) chatAs.value = "dm";
    if (mentionLabel) mentionLabel.hidden = chatAs.value === "dm";
    if (attach) {
      attach.hidden = !!NO_FILES[platform];
      if (attach.hidden) attach.value = "";
    }
  }

  if (chatAs) chatAs.addEventListener("change", showChatChoice);

  // The send request for ``text``: a direct chat, or the emulated group written by you or
  // by a teammate, mentioning the bot or not.
  function outgoing(text) {
    var who = chatAs && !chatAs.hidden ? chatAs.value : "dm";
    var body = { text: text };
    var where = "";
    if (who !== "dm") {
      body.group = true;
      body.mentionsBot = !!(mention && mention.checked);
      where = "group" + (who === "teammate" ? ", teammate" : "") +
        (body.mentionsBot ? ", @bot" : ", not addressed");
    }
    if (who === "teammate") body.userId = TEAMMATE;
    return { body: body, where: where };
  }

  // The chosen file as ``{name, contentType, base64}`` (a promise; null when none).
  function readAttachment() {
    var file = attach && !attach.hidden && attach.files && attach.files[0];
    if (!file) return Promise.resolve(null);
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () {
        var url = String(reader.result || "");
        resolve({
          name: file.name,
          contentType: file.type || "application/octet-stream",
          base64: url.slice(url.indexOf(",") + 1)  // a data: URL, base64 after the comma
        });
      };
      reader.onerror = function () {
        reject(new Error("cannot read " + file.name + ": " + describe(reader.error)));
      };
      reader.readAsDataURL(file);
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value.trim();
    var hasFile = !!(attach && !attach.hidden && attach.files && attach.files.length);
    if (!text && !hasFile) return;
    input.value = "";
    scrollDown();
    var out = outgoing(text);
    readAttachment().then(function (file) {
      if (file) out.body.files = [file];
      return post("/_emulator/send", out.body);
    }).then(function (res) {
      if (out.body.files && attach) attach.value = "";  // delivered: the next message has none
      if (res && res.msgId && out.where) {
        sentWhere[res.msgId] = out.where;
        if (msgEls[res.msgId]) labelWhere(msgEls[res.msgId], out.where);
      }
      if (res && (res.status === 0 || res.status >= 300)) {
        console.warn("playground: the channel answered", res.status, "to a message:", res.body);
        showError("the channel answered " + res.status + " to your message");
      }
    }).catch(function (err) {
      if (!input.value) input.value = text;  // nothing lost: the text is back in the box
      reportError("sending your message", err);
    });
  });

  poll();
})();

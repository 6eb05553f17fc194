/* channelkit playground page: long-polls /_emulator/state and renders the emulated chat. */
(function () {
  "use strict";

  var chat = document.getElementById("chat");
  var typing = document.getElementById("typing");
  var draftEl = document.getElementById("draft");
  var form = document.getElementById("composer-form");
  var input = document.getElementById("composer");
  var platformEl = document.getElementById("platform");
  var rendered = {};   // timeline seq -> element
  var cardEls = {};    // card id -> element
  var msgEls = {};     // user msgId -> element
  var version = -1;
  var pollWait = 8;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  // Minimal, safe Markdown: **bold** and line breaks (text nodes only).
  function renderText(node, text) {
    node.textContent = "";
    var parts = String(text || "").split(/(\*\*[^*]+\*\*)/);
    parts.forEach(function (part) {
      if (/^\*\*[^*]+\*\*$/.test(part)) node.appendChild(el("b", null, part.slice(2, -2)));
      else if (part) node.appendChild(document.createTextNode(part));
    });
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {})
    }).then(function (r) { return r.json(); });
  }

  function scrollDown() { chat.scrollTop = chat.scrollHeight; }

  function addMessage(entry) {
    var row = el("div", "row " + (entry.from === "user" ? "user" : "bot"));
    row.dataset.seq = entry.seq;
    var bubble = el("div", "bubble");
    bubble.classList.add(entry.from === "user" ? "user-message" : "bot-message");
    renderText(bubble, entry.text);
    row.appendChild(bubble);
    if (entry.from === "user") {
      var reactions = el("div", "reactions");
      row.appendChild(reactions);
      if (entry.msgId) msgEls[entry.msgId] = row;
    } else if (entry.via) {
      row.appendChild(el("div", "meta", "via " + entry.via));
    }
    chat.appendChild(row);
    return row;
  }

  function addCard(entry) {
    var row = el("div", "row bot");
    row.dataset.seq = entry.seq;
    var card = el("div", "card");
    card.dataset.cardId = entry.card;
    row.appendChild(card);
    cardEls[entry.card] = card;
    chat.appendChild(row);
    return row;
  }

  function action(cardId, name, formData, userId) {
    // A teammate's click changes nothing (the SDK refuses it), so it locks no buttons.
    var card = userId ? null : cardEls[cardId];
    var before = card ? card.dataset.state + "/" + card.dataset.rev : null;
    if (card) card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    // A click the platform acknowledged but the SDK ignored (for example one that raced
    // the card's activation) changes nothing: let the person click again.
    setTimeout(function () {
      if (card && card.dataset.state + "/" + card.dataset.rev === before) {
        card.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      }
    }, 1500);
    var body = { action: name, form: formData || {} };
    if (userId) body.userId = userId;
    return post("/_emulator/cards/" + encodeURIComponent(cardId) + "/action", body).then(function (res) {
      if (card && (!res || res.status >= 300 || res.status === 0)) {
        var note = card.querySelector(".error-note") || el("div", "error-note");
        note.textContent = "callback answered " + (res ? res.status : "?");
        card.appendChild(note);
        card.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      }
    });
  }

  function renderStatus(card, view) {
    if (!card.dataset.built) {
      card.innerHTML = "";
      var head = el("div", "card-head");
      head.appendChild(el("span", "badge"));
      head.appendChild(el("span", "status-line"));
      card.appendChild(head);
      var body = el("div", "card-body");
      body.appendChild(el("div", "card-content"));
      card.appendChild(body);
      var actions = el("div", "card-actions");
      var stop = el("button", "stop-btn danger", "Stop");
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
    var badge = card.querySelector(".badge");
    badge.className = "badge " + view.state;
    badge.textContent = view.state.charAt(0).toUpperCase() + view.state.slice(1);
    card.querySelector(".status-line").textContent = view.statusLine || "";
    var content = card.querySelector(".card-content");
    renderText(content, view.content);
    content.classList.toggle("empty", !view.content);
    var canStop = view.actions.indexOf("stop") >= 0;
    card.querySelectorAll(".stop-btn, .stop-teammate-btn").forEach(function (b) {
      b.hidden = !canStop;
      if (!canStop) b.disabled = true;
    });
  }

  function collectForm(card, view) {
    var data = {};
    (view.questions || []).forEach(function (q) {
      var checked = Array.prototype.slice.call(
        card.querySelectorAll('input[data-q="' + q.name + '"]:checked')
      ).map(function (i) { return i.value; });
      data[q.name] = q.multi ? checked : (checked[0] || "");
      if (q.other) {
        var text = card.querySelector('input[name="' + q.other.name + '"]');
        if (text && text.value.trim()) data[q.other.name] = text.value.trim();
      }
    });
    return data;
  }

  function renderQuestion(card, view) {
    if (!card.dataset.built) {
      card.innerHTML = "";
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
        q.options.forEach(function (o, oi) {
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
    var badge = card.querySelector(".badge");
    badge.className = "badge " + view.state;
    badge.textContent = view.state.charAt(0).toUpperCase() + view.state.slice(1);
    card.querySelector(".q-title").textContent = view.title || "Question";
    card.querySelector(".q-desc").textContent = view.desc || "";
    var open = view.actions.indexOf("submit") >= 0;
    card.querySelectorAll("input").forEach(function (i) { i.disabled = !open; });
    var submitBtn = card.querySelector(".submit-btn");
    submitBtn.textContent = view.button || "Submit";
    if (!open) submitBtn.disabled = true;
    card.querySelector(".cancel-btn").hidden = !open;
  }

  // Buttons under a message or card: a callback button sends a tap (the platform's
  // callback_query or card action), a link button opens its http(s) link.
  function renderKeyboard(kb, view) {
    kb.innerHTML = "";
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
    var key = JSON.stringify([view.content || "", view.keyboard || []]);
    if (card.dataset.custom === key) return;
    card.dataset.custom = key;
    card.innerHTML = "";
    var body = el("div", "card-body");
    body.appendChild(el("pre", "card-content", view.content || ""));
    card.appendChild(body);
    if (view.keyboard && view.keyboard.length) {
      var kb = el("div", "keyboard");
      renderKeyboard(kb, view);
      card.appendChild(kb);
    }
  }

  // A chat message with an optional inline keyboard (Telegram): edited in place.
  function renderMessage(card, view) {
    if (!card.dataset.built) {
      card.innerHTML = "";
      card.classList.add("message-card");
      card.appendChild(el("div", "card-body msg-text"));
      card.appendChild(el("div", "keyboard"));
      card.appendChild(el("div", "meta msg-meta"));
      card.dataset.built = "1";
    }
    card.querySelector(".msg-text").textContent = view.state === "deleted"
      ? "(message deleted)" : view.text;
    var kbKey = JSON.stringify(view.keyboard || []);
    var kb = card.querySelector(".keyboard");
    if (card.dataset.kb !== kbKey) {
      card.dataset.kb = kbKey;
      renderKeyboard(kb, view);
    }
    var meta = [];
    if (view.edited) meta.push("edited");
    if (view.pinned) meta.push("pinned");
    card.querySelector(".msg-meta").textContent = meta.join(" · ");
  }

  function renderToast(card, view) {
    var toast = card.querySelector(".toast");
    if (!view.toast) { if (toast) toast.remove(); return; }
    if (!toast) { toast = el("div", "toast"); card.appendChild(toast); }
    toast.className = "toast " + (view.toast.type || "info");
    toast.textContent = view.toast.text;
  }

  function renderCard(cardId, view) {
    var card = cardEls[cardId];
    if (!card || !view) return;
    card.dataset.kind = view.kind;
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

  function apply(state) {
    if (platformEl && state.platform) platformEl.textContent = state.platform + " (emulated)";
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
      renderCard(id, views[id]);
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
    // Telegram's sendMessageDraft: the bot's message as it is being written.
    if (draftEl) {
      draftEl.hidden = !state.draft;
      if (state.draft) renderText(draftEl, state.draft.text || "Thinking\u2026");
      draftEl.dataset.placeholder = state.draft && !state.draft.text ? "1" : "0";
    }
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
      .then(function (r) { return r.json(); })
      .then(function (state) {
        version = state.version;
        apply(state);
        setTimeout(poll, 30);
      })
      .catch(function () { setTimeout(poll, 1000); });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    input.value = "";
    post("/_emulator/send", { text: text });
  });

  poll();
})();

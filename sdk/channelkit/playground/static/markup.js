/* channelkit playground: a platform's message markup drawn as the platform shows it.
 *
 *   renderMarkup(node, text, dialect)
 *
 * replaces node's children with the text drawn in one dialect:
 *
 *   "slack"     Slack mrkdwn (chat.postMessage / chat.update text): *bold*, _italic_,
 *               ~strike~, `code`, ``` blocks, > quotes, <url|text> and <url> links,
 *               &amp; &lt; &gt; decoded exactly once, <!here>-style specials as text.
 *   "markdown"  standard Markdown as Slack's streams (markdown_text) show it.
 *   "feishu"    Feishu card Markdown: GFM tables drawn as tables, character references.
 *   "dingtalk"  DingTalk's Markdown subset: no tables, no strikethrough.
 *   "discord"   Discord Markdown: headings 1-3, __underline__, ||spoiler||, no tables.
 *   "plain"     (or anything else) the text as it is.
 *
 * Only DOM nodes and textContent: no message text ever reaches innerHTML, and a link
 * becomes a link only with an http(s) URL (target _blank, rel "noopener noreferrer");
 * any other URL is shown as text. Telegram's HTML parse mode has its own renderer in
 * playground.js. */
(function (global) {
  "use strict";

  // -- shared -------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function safeHref(href) {
    href = String(href || "").trim();
    return /^https?:\/\/[^\s]+$/i.test(href) ? href : null;
  }

  // A link when the URL is http(s); else its label as text (and the URL, when it says more).
  function link(parent, href, fill) {
    var safe = safeHref(href);
    var node;
    if (safe === null) {
      node = el("span", "mk-link-refused");
      node.title = "not an http(s) link";
    } else {
      node = el("a", "mk-a");
      node.href = safe;
      node.target = "_blank";
      node.rel = "noopener noreferrer";
    }
    fill(node);
    if (!node.firstChild) node.textContent = href;
    parent.appendChild(node);
    return node;
  }

  var WORD = /[\p{L}\p{N}]/u;
  var SPACE = /\s/;

  function isWord(ch) { return !!ch && WORD.test(ch); }
  function isSpace(ch) { return !ch || SPACE.test(ch); }

  // -- Slack mrkdwn --------------------------------------------------------------------------
  var SLACK_ENTITIES = { amp: "&", lt: "<", gt: ">" };

  // &amp; &lt; &gt; decoded in one pass: "&amp;lt;" shows as "&lt;", never as "<".
  function slackDecode(text) {
    return text.replace(/&(amp|lt|gt);/g, function (m, name) { return SLACK_ENTITIES[name]; });
  }

  function slackText(parent, text) {
    if (text) parent.appendChild(document.createTextNode(slackDecode(text)));
  }

  var SLACK_STYLE = { "*": "b", "_": "i", "~": "s" };

  // Where a *bold*, _italic_ or ~strike~ that opens at `start` closes, or -1. Slack opens
  // a marker after a space or punctuation, before a non-space; it closes before a space,
  // punctuation or the end, after a non-space; never across a line. `none[mark]`: where a
  // search found no closer up to (a closer does not depend on its opener, so a later
  // opener before that point finds none either: each line is searched once per mark).
  function slackCloser(text, start, none) {
    var mark = text.charAt(start);
    if (isWord(text.charAt(start - 1)) || isSpace(text.charAt(start + 1))) return -1;
    if (text.charAt(start + 1) === mark || start < (none[mark] || -1)) return -1;
    var j = start + 2;
    for (; j < text.length; j++) {
      var ch = text.charAt(j);
      if (ch === "\n") break;
      if (ch === mark && !isSpace(text.charAt(j - 1)) && !isWord(text.charAt(j + 1))) return j;
    }
    none[mark] = j;
    return -1;
  }

  // What Slack shows for <!here>, <@U1>, <#C1|general>, <!subteam^S1|@team>: text only.
  function slackSpecial(inner) {
    var bar = inner.indexOf("|");
    var label = bar >= 0 ? inner.slice(bar + 1) : "";
    var id = bar >= 0 ? inner.slice(0, bar) : inner;
    if (id.charAt(0) === "!") {
      if (label) return label;
      var name = id.slice(1).split("^")[0];
      return /^(here|channel|everyone)$/.test(name) ? "@" + name : "<" + inner + ">";
    }
    if (id.charAt(0) === "@") return label ? "@" + label.replace(/^@/, "") : id;
    return "#" + (label || id.slice(1));
  }

  function slackInline(parent, text) {
    var plainFrom = 0;
    var i = 0;
    var noCloser = false;  // no ">" after some "<": none after a later one either
    var none = {};  // slackCloser's memory of lines without a closer
    var flush = function (to) { slackText(parent, text.slice(plainFrom, to)); };
    while (i < text.length) {
      var ch = text.charAt(i);
      var end = -1;
      if (ch === "`") {
        end = text.indexOf("`", i + 1);
        if (end > i + 1 && text.slice(i + 1, end).indexOf("\n") < 0) {
          flush(i);
          parent.appendChild(el("code", "mk-code", slackDecode(text.slice(i + 1, end))));
          i = plainFrom = end + 1;
          continue;
        }
      } else if (ch === "<" && !noCloser) {
        end = text.indexOf(">", i + 1);
        noCloser = end < 0;
        var inner = end > i ? text.slice(i + 1, end) : "";
        if (inner && inner.indexOf("\n") < 0 && inner.indexOf("<") < 0) {
          flush(i);
          if (/^[!@#]/.test(inner)) {
            parent.appendChild(el("span", "mk-mention", slackDecode(slackSpecial(inner))));
          } else {
            var bar = inner.indexOf("|");
            var href = slackDecode(bar >= 0 ? inner.slice(0, bar) : inner);
            var label = bar >= 0 ? inner.slice(bar + 1) : "";
            link(parent, href, function (a) { slackInline(a, label); });
          }
          i = plainFrom = end + 1;
          continue;
        }
      } else if (SLACK_STYLE[ch]) {
        end = slackCloser(text, i, none);
        if (end > 0) {
          flush(i);
          var styled = el(SLACK_STYLE[ch], "mk-" + SLACK_STYLE[ch]);
          slackInline(styled, text.slice(i + 1, end));
          parent.appendChild(styled);
          i = plainFrom = end + 1;
          continue;
        }
      }
      i++;
    }
    flush(text.length);
  }

  // Slack has no lists or headings in mrkdwn: bullet lines ("• ", "◦ ", "1. ") are text
  // lines as written. ``` opens a preformatted block (to the next ```), "> " a quote line.
  function renderSlack(node, text) {
    var lines = String(text).split("\n");
    var para = [];
    var quote = null;
    var flushPara = function () {
      if (!para.length) return;
      var p = el("div", "mk-p");
      slackInline(p, para.join("\n"));
      node.appendChild(p);
      para = [];
    };
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      var fence = line.indexOf("```");
      if (fence >= 0) {
        // ``` ... ``` may open and close on one line, or span lines up to a closing ```
        var body = [];
        var rest = line.slice(fence + 3);
        var before = line.slice(0, fence);
        var close = rest.indexOf("```");
        var j = i;
        if (close >= 0) {
          body.push(rest.slice(0, close));
          rest = rest.slice(close + 3);
        } else {
          if (rest) body.push(rest);
          for (j = i + 1; j < lines.length; j++) {
            close = lines[j].indexOf("```");
            if (close >= 0) break;
            body.push(lines[j]);
          }
          if (j < lines.length) {
            body.push(lines[j].slice(0, close));
            rest = lines[j].slice(close + 3);
          } else {
            rest = "";
          }
          if (body.length && body[body.length - 1] === "") body.pop();
        }
        if (before) para.push(before);
        flushPara();
        quote = null;
        node.appendChild(el("pre", "mk-pre", slackDecode(body.join("\n"))));
        if (rest.trim()) para.push(rest);
        i = j;
        continue;
      }
      if (/^>/.test(line)) {
        flushPara();
        if (!quote) {
          quote = el("blockquote", "mk-quote");
          node.appendChild(quote);
        }
        var q = el("div", "mk-p");
        slackInline(q, line.replace(/^> ?/, ""));
        quote.appendChild(q);
        continue;
      }
      quote = null;
      if (line.trim() === "") {
        flushPara();
        continue;
      }
      para.push(line);
    }
    flushPara();
  }

  // -- Markdown (Feishu, DingTalk, Discord, Slack streams) -----------------------------------
  var DIALECTS = {
    markdown: { tables: true, strike: true, entities: true, headings: 6, discord: false },
    feishu: { tables: true, strike: true, entities: true, headings: 6, discord: false },
    dingtalk: { tables: false, strike: false, entities: true, headings: 6, discord: false },
    discord: { tables: false, strike: true, entities: false, headings: 3, discord: true }
  };

  var NAMED = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0" };
  var ENTITY = /^&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|(amp|lt|gt|quot|apos|nbsp));/;

  // An HTML character reference at the start of `text`: [length, character] or null.
  function entityAt(text) {
    var m = ENTITY.exec(text);
    if (!m) return null;
    if (m[3]) return [m[0].length, NAMED[m[3]]];
    var code = m[1] ? parseInt(m[1], 16) : parseInt(m[2], 10);
    if (code <= 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return null;
    return [m[0].length, String.fromCodePoint(code)];
  }

  var PUNCT = /[!-\/:-@\[-`{-~]/;
  // How far a closing marker, "]" or ")" is looked for: a paragraph of unmatched openers
  // costs at most this much per opener, not the rest of the paragraph each time.
  var REACH = 1000;

  // A run of `mark` starting at i: its length.
  function runAt(text, i, mark) {
    var n = 0;
    while (text.charAt(i + n) === mark) n++;
    return n;
  }

  // Where an emphasis of `size` marks opening at `start` closes (the index of its closing
  // marks), or -1. Code spans and escapes are skipped; "_" never works inside a word.
  function mdCloser(text, start, mark, size) {
    var open = runAt(text, start, mark);
    var from = start + size;
    if (isSpace(text.charAt(from))) return -1;
    if (mark === "_" && isWord(text.charAt(start - 1))) return -1;
    if (open > size && size === 1 && open !== 3) return -1;  // "**" is not two italics
    var stop = Math.min(text.length, from + REACH);
    for (var j = from; j < stop; j++) {
      var ch = text.charAt(j);
      if (ch === "\\") { j++; continue; }
      if (ch === "`") {
        var ticks = runAt(text, j, "`");
        var close = text.indexOf("`".repeat(ticks), j + ticks);
        if (close > 0) j = close + ticks - 1;
        else j += ticks - 1;
        continue;
      }
      if (ch !== mark) continue;
      var run = runAt(text, j, mark);
      var fits = size === 1 ? (run === 1 || run >= 3) : run >= size;
      var at = j + run - size;
      if (fits && j > from && !isSpace(text.charAt(j - 1)) &&
          !(mark === "_" && isWord(text.charAt(j + run)))) {
        return at;
      }
      j += run - 1;
    }
    return -1;
  }

  // The link destination after "](": [end index after ")", url] or null.
  function linkTarget(text, from) {
    var depth = 0;
    var stop = Math.min(text.length, from + REACH);
    for (var j = from; j < stop; j++) {
      var ch = text.charAt(j);
      if (ch === "\\") { j++; continue; }
      if (ch === "\n") return null;
      if (ch === "(") depth++;
      else if (ch === ")") {
        if (depth === 0) {
          var dest = text.slice(from, j).trim().split(/\s+/)[0] || "";
          return [j + 1, dest.replace(/^<(.*)>$/, "$1")];
        }
        depth--;
      }
    }
    return null;
  }

  // The "]" closing a link text opened at `start` ("["), or -1.
  function labelEnd(text, start) {
    var depth = 0;
    var stop = Math.min(text.length, start + REACH);
    for (var j = start + 1; j < stop; j++) {
      var ch = text.charAt(j);
      if (ch === "\\") { j++; continue; }
      if (ch === "`") {
        var ticks = runAt(text, j, "`");
        var close = text.indexOf("`".repeat(ticks), j + ticks);
        j = close > 0 ? close + ticks - 1 : j + ticks - 1;
        continue;
      }
      if (ch === "[") depth++;
      else if (ch === "]") {
        if (depth === 0) return j;
        depth--;
      }
    }
    return -1;
  }

  var AUTOLINK = /<(https?:\/\/[^\s<>]+)>/iy;

  function mdInline(parent, text, opts) {
    var buf = "";
    var flush = function () {
      if (buf) parent.appendChild(document.createTextNode(buf));
      buf = "";
    };
    var styled = function (tag, cls, inner) {
      flush();
      var node = el(tag, cls);
      mdInline(node, inner, opts);
      parent.appendChild(node);
      return node;
    };
    var i = 0;
    while (i < text.length) {
      var ch = text.charAt(i);
      var end;
      if (ch === "\\" && PUNCT.test(text.charAt(i + 1))) {
        buf += text.charAt(i + 1);
        i += 2;
        continue;
      }
      if (ch === "\n") {
        flush();
        parent.appendChild(el("br"));
        i++;
        continue;
      }
      if (ch === "&" && opts.entities) {
        var ent = entityAt(text.slice(i, i + 12));
        if (ent) { buf += ent[1]; i += ent[0]; continue; }
      }
      if (ch === "`") {
        var ticks = runAt(text, i, "`");
        var close = text.indexOf("`".repeat(ticks), i + ticks);
        while (close > 0 && text.charAt(close + ticks) === "`") {
          close = text.indexOf("`".repeat(ticks), close + runAt(text, close, "`"));
        }
        if (close > 0) {
          var code = text.slice(i + ticks, close).replace(/\n/g, " ");
          if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
          flush();
          parent.appendChild(el("code", "mk-code", code));
          i = close + ticks;
          continue;
        }
        buf += "`".repeat(ticks);
        i += ticks;
        continue;
      }
      if (ch === "!" && text.charAt(i + 1) === "[") {
        end = labelEnd(text, i + 1);
        var img = end > 0 && text.charAt(end + 1) === "(" ? linkTarget(text, end + 2) : null;
        if (img) {  // an image: a link to it (the page loads nothing from elsewhere)
          var alt = text.slice(i + 2, end);
          flush();
          link(parent, img[1], function (a) {
            a.appendChild(document.createTextNode("\ud83d\uddbc "));
            mdInline(a, alt || "image", opts);
          });
          i = img[0];
          continue;
        }
      }
      if (ch === "[") {
        end = labelEnd(text, i);
        var target = end > 0 && text.charAt(end + 1) === "(" ? linkTarget(text, end + 2) : null;
        if (target) {
          var label = text.slice(i + 1, end);
          flush();
          link(parent, target[1], function (a) { mdInline(a, label, opts); });
          i = target[0];
          continue;
        }
      }
      if (ch === "<") {
        AUTOLINK.lastIndex = i;
        var auto = AUTOLINK.exec(text);
        if (auto) {
          flush();
          link(parent, auto[1], function (a) { a.textContent = auto[1]; });
          i += auto[0].length;
          continue;
        }
      }
      if (ch === "*" || ch === "_") {
        var run = runAt(text, i, ch);
        var size = run >= 2 ? 2 : 1;
        end = mdCloser(text, i, ch, size);
        if (end < 0 && size === 2) { size = 1; end = mdCloser(text, i, ch, 1); }
        if (end > 0) {
          var inner = text.slice(i + size, end);
          if (opts.discord && ch === "_" && size === 2) styled("u", "mk-u", inner);
          else if (size === 2) styled("b", "mk-b", inner);
          else styled("i", "mk-i", inner);
          i = end + size;
          continue;
        }
        buf += text.slice(i, i + run);
        i += run;
        continue;
      }
      if ((ch === "~" && opts.strike) || (ch === "|" && opts.discord)) {
        if (runAt(text, i, ch) === 2) {
          end = text.indexOf(ch + ch, i + 2);
          if (end > i + 2 && !isSpace(text.charAt(i + 2)) && !isSpace(text.charAt(end - 1))) {
            var node = styled(ch === "~" ? "s" : "span", ch === "~" ? "mk-s" : "mk-spoiler",
              text.slice(i + 2, end));
            if (ch === "|") {
              node.title = "spoiler: click to show";
              node.addEventListener("click", function (e) {
                e.currentTarget.classList.toggle("revealed");
              });
            }
            i = end + 2;
            continue;
          }
        }
      }
      buf += ch;
      i++;
    }
    flush();
  }

  var FENCE = /^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  var HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  var RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  var QUOTE = /^ {0,3}> ?/;
  var ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])([ \t]+|$)/;
  var TABLE_RULE = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;

  // A table row's cells: split on "|" not escaped as "\|".
  function tableCells(line) {
    var s = line.trim();
    if (s.charAt(0) === "|") s = s.slice(1);
    if (s.charAt(s.length - 1) === "|" && s.charAt(s.length - 2) !== "\\") s = s.slice(0, -1);
    var cells = [];
    var cell = "";
    for (var i = 0; i < s.length; i++) {
      var ch = s.charAt(i);
      if (ch === "\\" && s.charAt(i + 1) === "|") { cell += "|"; i++; continue; }
      if (ch === "|") { cells.push(cell.trim()); cell = ""; continue; }
      cell += ch;
    }
    cells.push(cell.trim());
    return cells;
  }

  function startsBlock(lines, i, opts) {
    var line = lines[i];
    return line.trim() === "" || FENCE.test(line) || HEADING.test(line) || RULE.test(line) ||
      QUOTE.test(line) || ITEM.test(line) || isTable(lines, i, opts);
  }

  function isTable(lines, i, opts) {
    return opts.tables && i + 1 < lines.length && lines[i].indexOf("|") >= 0 &&
      TABLE_RULE.test(lines[i + 1]) && lines[i + 1].indexOf("-") >= 0 &&
      tableCells(lines[i]).length === tableCells(lines[i + 1]).length;
  }

  function renderTable(parent, lines, i, opts) {
    var aligns = tableCells(lines[i + 1]).map(function (c) {
      var left = c.charAt(0) === ":";
      var right = c.charAt(c.length - 1) === ":";
      return left && right ? "center" : right ? "right" : left ? "left" : "";
    });
    var wrap = el("div", "mk-table-wrap");
    var table = el("table", "mk-table");
    var row = function (section, cells, tag) {
      var tr = el("tr");
      aligns.forEach(function (align, k) {
        var td = el(tag);
        if (align) td.style.textAlign = align;
        mdInline(td, cells[k] || "", opts);
        tr.appendChild(td);
      });
      section.appendChild(tr);
    };
    var head = el("thead");
    row(head, tableCells(lines[i]), "th");
    table.appendChild(head);
    var body = el("tbody");
    var j = i + 2;
    for (; j < lines.length && lines[j].trim() !== "" && lines[j].indexOf("|") >= 0; j++) {
      row(body, tableCells(lines[j]), "td");
    }
    if (body.firstChild) table.appendChild(body);
    wrap.appendChild(table);
    parent.appendChild(wrap);
    return j;
  }

  function mdBlocks(parent, lines, opts) {
    var i = 0;
    while (i < lines.length) {
      var line = lines[i];
      var m;
      if (line.trim() === "") { i++; continue; }
      if ((m = FENCE.exec(line))) {
        var indent = m[1].length;
        var fence = m[2];
        var body = [];
        var j = i + 1;
        for (; j < lines.length; j++) {
          var closing = lines[j].trim();
          if (closing.charAt(0) === fence.charAt(0) && runAt(closing, 0, fence.charAt(0)) >= fence.length &&
              closing.replace(new RegExp("^\\" + fence.charAt(0) + "+"), "") === "") break;
          body.push(lines[j].replace(new RegExp("^ {0," + indent + "}"), ""));
        }
        var pre = el("pre", "mk-pre");
        var code = el("code", "mk-code", body.join("\n"));
        if (m[3]) pre.dataset.lang = m[3];
        pre.appendChild(code);
        parent.appendChild(pre);
        i = j + 1;
        continue;
      }
      if ((m = HEADING.exec(line))) {
        var level = m[1].length;
        if (level <= opts.headings) {
          var h = el("div", "mk-h mk-h" + level);
          h.setAttribute("role", "heading");
          h.setAttribute("aria-level", String(level));
          mdInline(h, m[2] || "", opts);
          parent.appendChild(h);
          i++;
          continue;
        }
      } else if (RULE.test(line)) {
        parent.appendChild(el("hr", "mk-hr"));
        i++;
        continue;
      } else if (QUOTE.test(line)) {
        var inner = [];
        for (; i < lines.length && QUOTE.test(lines[i]); i++) inner.push(lines[i].replace(QUOTE, ""));
        var quote = el("blockquote", "mk-quote");
        mdBlocks(quote, inner, opts);
        parent.appendChild(quote);
        continue;
      } else if (ITEM.test(line)) {
        i = mdList(parent, lines, i, opts);
        continue;
      } else if (isTable(lines, i, opts)) {
        i = renderTable(parent, lines, i, opts);
        continue;
      }
      var para = [line];
      for (i++; i < lines.length && !startsBlock(lines, i, opts); i++) para.push(lines[i]);
      var p = el("div", "mk-p");
      mdInline(p, para.join("\n").trim(), opts);
      parent.appendChild(p);
    }
  }

  // A list from lines[i]: its items (each item's lines indented under its marker belong to
  // it, nested lists included). Returns the index after the list.
  function mdList(parent, lines, i, opts) {
    var first = ITEM.exec(lines[i]);
    var ordered = /\d/.test(first[2]);
    var list = el(ordered ? "ol" : "ul", "mk-list");
    if (ordered && parseInt(first[2], 10) !== 1) list.start = parseInt(first[2], 10);
    var base = first[1].length;
    while (i < lines.length) {
      var m = ITEM.exec(lines[i]);
      if (!m || m[1].length !== base || /\d/.test(m[2]) !== ordered) break;
      var width = m[1].length + m[2].length + Math.max(1, Math.min(m[3].length, 4));
      var body = [lines[i].slice(m[0].length)];
      var j = i + 1;
      for (; j < lines.length; j++) {
        var next = lines[j];
        if (next.trim() === "") {
          var after = lines[j + 1];
          if (after !== undefined && /^\s*$/.test(after) === false &&
              after.length - after.replace(/^ +/, "").length >= width) {
            body.push("");
            continue;
          }
          break;
        }
        var lead = next.length - next.replace(/^ +/, "").length;
        if (lead >= width) { body.push(next.slice(width)); continue; }
        if (ITEM.test(next) || startsBlock(lines, j, opts)) break;
        body.push(next.trim());  // a lazy continuation of the item's paragraph
      }
      var li = el("li", "mk-li");
      mdBlocks(li, body, opts);
      list.appendChild(li);
      i = j;
      if (i < lines.length && lines[i].trim() === "" && i + 1 < lines.length) {
        var again = ITEM.exec(lines[i + 1]);
        if (again && again[1].length === base) i++;
      }
    }
    parent.appendChild(list);
    return i;
  }

  // -- entry point ----------------------------------------------------------------------------
  function renderMarkup(node, text, dialect) {
    clear(node);
    text = String(text === undefined || text === null ? "" : text);
    var name = String(dialect || "plain").toLowerCase();
    node.classList.add("mk");
    if (name === "slack" || name === "mrkdwn") {
      renderSlack(node, text);
    } else if (DIALECTS[name]) {
      mdBlocks(node, text.replace(/\r\n?/g, "\n").split("\n"), DIALECTS[name]);
    } else {
      node.classList.remove("mk");
      node.textContent = text;
    }
    return node;
  }

  renderMarkup.dialects = ["slack", "markdown", "feishu", "dingtalk", "discord", "plain"];
  global.renderMarkup = renderMarkup;
})(window);

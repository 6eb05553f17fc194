"""The message catalog: every text the SDK itself shows a person, in every language.

Each entry has a named key (``"notice.failed"``) and one text per locale, with named
placeholders (``"Queued, {ahead} ahead: ..."``). `messages()` returns the `Messages`
of a locale; ``messages("zh-CN").get("queue.ahead", ahead=2)`` formats one entry.

Locales: ``en`` (the default), ``zh-CN`` and ``de``, each complete (a test checks that
every key is in every locale with the same placeholders). A locale tag the catalog does
not hold falls back: first to its language (``de-AT`` -> ``de``, ``zh``/``zh-Hans``/
``zh-SG`` -> ``zh-CN``), then to ``en``; `resolve_locale()` is that rule. A key the
catalog does not hold is a programming error: `Messages.get()` raises `KeyError`.

The ``MSG_*`` / ``TEXT_*`` constants of the core and the adapters are the English
texts of catalog entries, as `Message` values (a ``str`` that also carries its key):
`Messages.text()` turns such a value into the locale's text, and leaves any other
string unchanged. Adding a language: add a table to `CATALOG` with every key of the
``en`` table (see ``docs/language.md``).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CATALOG",
    "DEFAULT_LOCALE",
    "LOCALES",
    "Message",
    "Messages",
    "check_locale",
    "en",
    "messages",
    "placeholders",
    "resolve_locale",
]

#: The locale used when none is configured or a tag cannot be resolved.
DEFAULT_LOCALE = "en"

_EN: dict[str, str] = {
    # -- run notices ---------------------------------------------------------------------
    "notice.failed": "Failed, please retry.",
    "notice.interrupted": "Interrupted, please retry.",
    "notice.busy": "Busy right now: too many requests are waiting. Please try again in a minute.",
    "notice.store_unavailable": "The bot is temporarily unavailable and could not handle "
    "that. Please try again in a few minutes.",
    "notice.last_uncertain": "Your previous answer may not have arrived: send /last to see "
    "it again.",
    # -- queue notices -------------------------------------------------------------------
    "queue.next": "Queued: your request starts as soon as a slot is free.",
    "queue.ahead": "Queued, {ahead} ahead: your request starts automatically.",
    "queue.starting": "Starting now.",
    # -- who may operate what ------------------------------------------------------------
    "owner.answer": "Only the person who started this task can answer.",
    "owner.answer_asked": "Only the person who asked can answer this.",
    "owner.stop": "Only the person who started this can stop it.",
    "owner.card_group": "Only the task owner can operate this card. This action had no effect.",
    "owner.card_direct": "You cannot operate this card. Only the task owner can submit or "
    "stop it.",
    "owner.card_title": "Card interaction",
    # -- access (refusals) ---------------------------------------------------------------
    "access.not_allowed": "Sorry, you are not on this bot's list of people it answers. Ask "
    "its operator to add you.",
    "access.dm_closed": "This bot does not answer direct messages.",
    "access.pairing": "You are not paired with this bot yet. Your pairing code is {code}: ask "
    "the bot's operator to approve it (it expires in an hour).",
    "access.admin_only": "Only the bot's admins may use /{command}.",
    # -- command replies -----------------------------------------------------------------
    "command.unauthorized": "Only authorized members can answer permission requests in this "
    "shared session.",
    "command.not_found_id": "No pending permission request with that id for this chat.",
    "command.none": "No pending permission request for this chat.",
    "command.submit_via_card": "Submit this question through its interactive card, or use "
    "/deny [request-id] to cancel it.",
    "command.no_approvable": "This permission request has no approvable option.",
    "command.no_always": "This permission request has no always-allow option.",
    "command.failed": "Failed to answer the permission request.",
    "command.approved": "Permission approved.",
    "command.approved_always": "Permission approved always.",
    "command.denied": "Permission denied.",
    "command.not_pending": "Permission request is no longer pending.",
    "command.cancel_unauthorized": "Only authorized members can cancel requests in this "
    "shared session.",
    "command.nothing_running": "No request is currently running.",
    "command.cancelled": "Cancelled current request.",
    "command.cancel_failed": "Failed to cancel current request.",
    "command.no_last_answer": "There is no recent answer to send again.",
    "command.ambiguous": "Multiple permission requests are pending for this chat. Reply with "
    "/{decision} <request-id>.",
    # -- the text permission prompt ------------------------------------------------------
    "prompt.reply_with": "Reply with:",
    "prompt.title": "Permission required to run a tool",
    "prompt.tool": "Tool: {tool}",
    "prompt.action": "Action: {action}",
    "prompt.parameters": "Parameters: {params}",
    "prompt.unknown_tool": "unknown",
    "prompt.tool_use": "Tool use",
    "prompt.allow_once": "allow once",
    "prompt.always_allow": "always allow",
    "prompt.deny": "deny",
    # -- buttons and card answers (Telegram, Slack, DingTalk) ----------------------------
    "button.stop": "Stop",
    "button.submit": "Submit",
    "button.cancel": "Cancel",
    "button.other": "Other",
    "button.unknown": "This button is not recognised.",
    "request.stale": "This request is no longer active.",
    "request.wrong_message": "This button does not belong to this request.",
    "request.busy": "This request is already being answered.",
    "request.sent": "Answer sent.",
    "question.stale": "This question is no longer active.",
    "question.wrong_message": "This button does not belong to this question.",
    "question.busy": "This question is already being processed.",
    "question.pick_one": "Select at least one option first.",
    "question.answer_all": "Answer every question first.",
    "question.hint_many": "Choose one or more options, then tap Submit.",
    "question.hint_one": "Tap an option to choose it.",
    "question.submitted": "Answer submitted.",
    "question.cancelled": "Cancelled.",
    "question.selected": "Selected.",
    "question.unselected": "Removed.",
    "question.recorded": "Answer recorded.",
    "question.unavailable": "This question is no longer available.",
    "question.newer": "A newer question is available. Answer the latest card.",
    "question.already_answered_keyboard": "This question was already answered; the "
    "keyboard's answer was not used.",
    "question.already_answered_form": "This question was already answered; the form's "
    "answer was not used.",
    "question.already_answered_card": "This question was already answered; the card's "
    "answer was not used.",
    # -- status lines (DingTalk status cards, Slack, Telegram) ---------------------------
    "status.queued": "Queued",
    "status.starting": "Starting now",
    "status.running": "Running",
    "status.completed": "Completed",
    "status.failed": "Failed",
    "status.stopped": "Stopped",
    "status.cancelled": "Cancelled",
    "status.unavailable": "Unavailable",
    "status.interrupted": "Interrupted",
    "status.answer_sent_below": "(The answer was sent below as a message.)",
    # -- /new, /status, /stop all (channelkit.core.operator_commands) -------------------
    "operator.new_session": "Started a new conversation: your next message begins a fresh "
    "agent session.",
    "operator.new_busy": "A request is still running or queued in this conversation: /cancel "
    "it or wait for it to finish, then send /new again.",
    "operator.new_unauthorized": "Only authorized members can start a new conversation in "
    "this shared session.",
    "operator.status_own": "This conversation",
    "operator.status_chat": "This chat",
    "operator.status": "{scope}: Running: {running}{details} · Queued: {queued}",
    "operator.status_idle": "{scope}: nothing is running and nothing is queued.",
    "operator.status_run": "started {seconds} s ago by {who}",
    "operator.status_you": "you",
    "operator.status_task": "a {kind} task",
    "operator.status_more": "+{count} more",
    "operator.stop_all": "Stopped {stopped} running and dropped {dropped} queued request(s) "
    "in this chat.",
    "operator.stop_all_not_stopped": " {count} could not be stopped (already delivering its "
    "answer).",
    "operator.stop_all_nothing": "Nothing is running or queued in this chat.",
    "operator.stop_usage": "Send /stop to stop your running request, or /stop all (admins) "
    "to stop every request in this chat.",
    "queue.dropped": "Stopped before it started.",
    # -- Slack status texts, Telegram/Weixin markers and terminal labels ----------------
    "telegram.help": "Send a message to talk to the agent.\n\n"
    "/cancel — Cancel the running request\n"
    "/approve [request-id] — Approve a pending permission request\n"
    "/approve-always [request-id] — Always approve a pending permission request\n"
    "/deny [request-id] — Deny a pending permission request\n"
    "/new — Start a new conversation\n"
    "/status — What runs and waits here\n"
    "/stop all — Stop every request in this chat (admins)\n"
    "/help — Show available commands",
    "slack.working": "Working…",
    "slack.stopped": "_Stopped._",
    "slack.done": "Done.",
    "slack.finished_stopped": "Stopped.",
    "slack.failed": "Failed.",
    "slack.thinking": "is thinking...",
    "marker.cancelled": "[cancelled]",
    "marker.failed": "[failed]",
    "marker.stopped": "[stopped]",
    "marker.truncated": "[Earlier output truncated]",
    "marker.image_pending": "[Image pending]",
    "label.submitted": "✅ Submitted",
    "label.cancelled": "✖️ Cancelled",
    "label.expired": "⌛ Expired",
    "label.submitted_plain": "Submitted",
    "label.cancelled_plain": "Cancelled",
    "label.expired_plain": "Expired",
    # -- Feishu cards (the texts Feishu cards have always shown in each language) --------
    "card.running": "Running...",
    "card.completed": "Completed",
    "card.cancelled": "Cancelled",
    "card.failed": "Failed, please retry",
    "card.stopped": "Stopped",
    "card.stop": "Stop",
    "card.title": "Assistant",
    "card.truncated": "Content too long, truncated",
    "card.form_title": "Please answer",
    "card.submit": "Submit",
    "card.cancel": "Cancel",
    "card.select": "Choose",
    "card.other": "Other (optional)",
    "card.q_processing": "Processing...",
    "card.q_submitted": "Submitted",
    "card.q_cancelled": "Cancelled",
    "card.q_expired": "Expired",
    "card.toast_stale": "This question has expired or was already answered.",
    "card.toast_already_answered": "This question was already answered.",
    "card.already_answered": "This question was already answered; the card's answer was "
    "not used.",
    "card.toast_invalid": "Please choose a valid answer for every question.",
    "card.toast_submitted": "Answer received, processing.",
    "card.toast_cancelled": "Cancelling.",
    "card.toast_stopped": "Stopped",
    "card.toast_not_owner": "Only the task owner can use this card.",
    "card.toast_stop_failed": "Stop failed, please retry",
    "card.delivery_failed": "The question card could not be delivered; the request was "
    "cancelled. Please retry.",
    "approval.answered": "Answered",
    "approval.answered_elsewhere": "✅ Answered elsewhere",
    "approval.title": "Permission required",
    "approval.hint": "Tap a button, or reply /approve, /approve-always or /deny.",
    "approval.not_owner": "Only the person who started this task can answer.",
    "approval.stale": "This request is no longer active.",
    "approval.busy": "This request is already being answered.",
    "approval.sent": "Answer sent.",
    "approval.unknown": "This button is not recognised.",
    # -- DingTalk question and approval cards ---------------------------------------------
    "dingtalk.other_field": "{header}: Other",
    "dingtalk.other_hint": "Enter a custom answer when Other is selected",
    "dingtalk.q_submitted": "Submitted.",
    "dingtalk.q_expired": "This question expired. Please retry.",
    "dingtalk.q_resolved_outside": "Resolved outside this card.",
    "dingtalk.delivery_failed": "The interactive question could not be delivered, so this "
    "request was cancelled. Please retry.",
    # -- Slack question forms ------------------------------------------------------------
    "slack.question": "Question",
    # -- Telegram's command menu (setMyCommands descriptions) ----------------------------
    "menu.start": "Show quick-start help",
    "menu.help": "Show available commands",
    "menu.cancel": "Cancel the running request",
    "menu.approve": "Approve a pending permission request",
    "menu.deny": "Deny a pending permission request",
    "menu.last": "Send your last answer again",
    "menu.new": "Start a new conversation",
    "menu.status": "What runs and waits here",
    "menu.stop": "Stop your request (/stop all: every request, admins)",
    # -- attachments (issue 25) ---------------------------------------------------------
    "attachment.too_large": "{name} was not received: it is larger than the limit of {limit}.",
    "attachment.not_received": "{name} could not be received.",
    "attachment.not_sent": "The agent's file {name} could not be sent here: {reason}.",
    # -- Discord messages and question forms -------------------------------------------
    "discord.stopped": "*Stopped.*",
    "discord.failed": "*Failed.*",
    "question.other_typed": "Other…",
    "question.choose": "Choose…",
    "question.your_answer": "Your answer",
    "question.numbered": "Question {number}",
}

_ZH_CN: dict[str, str] = {
    "notice.failed": "执行失败，请重试。",
    "notice.interrupted": "任务被中断，请重试。",
    "notice.busy": "当前繁忙：等待中的请求过多，请一分钟后再试。",
    "notice.store_unavailable": "机器人暂时不可用，未能处理该操作，请几分钟后再试。",
    "notice.last_uncertain": "上一条回答可能未送达：发送 /last 可再次查看。",
    "queue.next": "排队中：一有空位就开始处理你的请求。",
    "queue.ahead": "排队中，前面还有 {ahead} 个：轮到时会自动开始。",
    "queue.starting": "现在开始。",
    "owner.answer": "只有发起任务的人可以作答。",
    "owner.answer_asked": "只有提问对象可以作答。",
    "owner.stop": "只有发起任务的人可以停止它。",
    "owner.card_group": "只有任务发起人可以操作此卡片，本次操作未生效。",
    "owner.card_direct": "你无法操作此卡片，只有任务发起人可以提交或停止。",
    "owner.card_title": "卡片操作",
    "access.not_allowed": "抱歉，你不在此机器人的服务名单中，请联系管理员添加。",
    "access.dm_closed": "此机器人不回复私聊消息。",
    "access.pairing": "你尚未与此机器人配对。你的配对码是 {code}：请让机器人管理员批准"
    "（一小时内有效）。",
    "access.admin_only": "只有机器人管理员可以使用 /{command}。",
    "command.unauthorized": "在此共享会话中，只有授权成员可以处理权限请求。",
    "command.not_found_id": "此会话中没有该编号的待处理权限请求。",
    "command.none": "此会话中没有待处理的权限请求。",
    "command.submit_via_card": "请通过互动卡片提交此问题，或使用 /deny [request-id] 取消。",
    "command.no_approvable": "此权限请求没有可批准的选项。",
    "command.no_always": "此权限请求没有“始终允许”选项。",
    "command.failed": "处理权限请求失败。",
    "command.approved": "已批准。",
    "command.approved_always": "已始终批准。",
    "command.denied": "已拒绝。",
    "command.not_pending": "该权限请求已不在等待中。",
    "command.cancel_unauthorized": "在此共享会话中，只有授权成员可以取消请求。",
    "command.nothing_running": "当前没有正在运行的请求。",
    "command.cancelled": "已取消当前请求。",
    "command.cancel_failed": "取消当前请求失败。",
    "command.no_last_answer": "没有可以再次发送的最近回答。",
    "command.ambiguous": "此会话中有多个待处理的权限请求，请回复 /{decision} <request-id>。",
    "prompt.reply_with": "回复：",
    "prompt.title": "运行工具需要授权",
    "prompt.tool": "工具：{tool}",
    "prompt.action": "操作：{action}",
    "prompt.parameters": "参数：{params}",
    "prompt.unknown_tool": "未知",
    "prompt.tool_use": "工具调用",
    "prompt.allow_once": "允许一次",
    "prompt.always_allow": "始终允许",
    "prompt.deny": "拒绝",
    "button.stop": "停止",
    "button.submit": "提交",
    "button.cancel": "取消",
    "button.other": "其他",
    "button.unknown": "无法识别该按钮。",
    "request.stale": "该请求已失效。",
    "request.wrong_message": "该按钮不属于此请求。",
    "request.busy": "该请求正在处理中。",
    "request.sent": "已提交。",
    "question.stale": "该问题已失效。",
    "question.wrong_message": "该按钮不属于此问题。",
    "question.busy": "该问题正在处理中。",
    "question.pick_one": "请先至少选择一个选项。",
    "question.answer_all": "请先回答所有问题。",
    "question.hint_many": "选择一个或多个选项，然后点击“提交”。",
    "question.hint_one": "点击一个选项进行选择。",
    "question.submitted": "答案已提交。",
    "question.cancelled": "已取消。",
    "question.selected": "已选择。",
    "question.unselected": "已移除。",
    "question.recorded": "答案已记录。",
    "question.unavailable": "该问题已不可用。",
    "question.newer": "有更新的问题，请回答最新的卡片。",
    "question.already_answered_keyboard": "该问题已被回答，按钮上的答案未被采用。",
    "question.already_answered_form": "该问题已被回答，表单中的答案未被采用。",
    "question.already_answered_card": "该问题已被回答，卡片上的答案未被采用。",
    "status.queued": "排队中",
    "status.starting": "现在开始",
    "status.running": "运行中",
    "status.completed": "已完成",
    "status.failed": "已失败",
    "status.stopped": "已停止",
    "status.cancelled": "已取消",
    "status.unavailable": "不可用",
    "status.interrupted": "已中断",
    "status.answer_sent_below": "（回答已作为消息发送在下方。）",
    "operator.new_session": "已开始新的对话：你的下一条消息将开启新的智能体会话。",
    "operator.new_busy": "此对话中仍有请求在运行或排队：请 /cancel 或等待其完成，"
    "然后再发送 /new。",
    "operator.new_unauthorized": "在此共享会话中，只有授权成员可以开始新的对话。",
    "operator.status_own": "此对话",
    "operator.status_chat": "此会话",
    "operator.status": "{scope}：运行中：{running}{details} · 排队：{queued}",
    "operator.status_idle": "{scope}：没有正在运行或排队的请求。",
    "operator.status_run": "由 {who} 于 {seconds} 秒前开始",
    "operator.status_you": "你",
    "operator.status_task": "一个 {kind} 任务",
    "operator.status_more": "另有 {count} 个",
    "operator.stop_all": "已在此会话中停止 {stopped} 个运行中的请求，"
    "并移除 {dropped} 个排队的请求。",
    "operator.stop_all_not_stopped": " 有 {count} 个无法停止（正在发送回答）。",
    "operator.stop_all_nothing": "此会话中没有正在运行或排队的请求。",
    "operator.stop_usage": "发送 /stop 停止你正在运行的请求，"
    "或发送 /stop all（管理员）停止此会话中的所有请求。",
    "queue.dropped": "已在开始前停止。",
    "telegram.help": "发送消息即可与智能体对话。\n\n"
    "/cancel — 取消正在运行的请求\n"
    "/approve [request-id] — 批准待处理的权限请求\n"
    "/approve-always [request-id] — 始终批准待处理的权限请求\n"
    "/deny [request-id] — 拒绝待处理的权限请求\n"
    "/new — 开始新的对话\n"
    "/status — 查看正在运行和排队的请求\n"
    "/stop all — 停止此聊天中的所有请求（管理员）\n"
    "/help — 显示可用命令",
    "slack.working": "处理中…",
    "slack.stopped": "_已停止。_",
    "slack.done": "已完成。",
    "slack.finished_stopped": "已停止。",
    "slack.failed": "已失败。",
    "slack.thinking": "正在思考...",
    "marker.cancelled": "[已取消]",
    "marker.failed": "[已失败]",
    "marker.stopped": "[已停止]",
    "marker.truncated": "[前面的输出已截断]",
    "marker.image_pending": "[图片待发送]",
    "label.submitted": "✅ 已提交",
    "label.cancelled": "✖️ 已取消",
    "label.expired": "⌛ 已过期",
    "label.submitted_plain": "已提交",
    "label.cancelled_plain": "已取消",
    "label.expired_plain": "已过期",
    "card.running": "运行中...",
    "card.completed": "已完成",
    "card.cancelled": "已取消",
    "card.failed": "已失败，请重试",
    "card.stopped": "已停止生成",
    "card.stop": "停止",
    "card.title": "助手",
    "card.truncated": "内容过长，已截断",
    "card.form_title": "请回答以下问题",
    "card.submit": "提交",
    "card.cancel": "取消",
    "card.select": "请选择",
    "card.other": "其他（可选）",
    "card.q_processing": "正在处理...",
    "card.q_submitted": "已提交",
    "card.q_cancelled": "已取消",
    "card.q_expired": "已过期",
    "card.toast_stale": "该问题已过期或已处理。",
    "card.toast_already_answered": "该问题已被回答。",
    "card.already_answered": "该问题已被回答，卡片上的答案未被采用。",
    "card.toast_invalid": "请完整选择有效答案。",
    "card.toast_submitted": "已收到答案，正在处理。",
    "card.toast_cancelled": "正在取消。",
    "card.toast_stopped": "已停止",
    "card.toast_not_owner": "只有任务发起人可以操作此卡片。",
    "card.toast_stop_failed": "停止失败，请重试",
    "card.delivery_failed": "互动问题卡片投递失败，该请求已取消，请重试。",
    "approval.answered": "已回答",
    "approval.answered_elsewhere": "✅ 已在别处回答",
    "approval.title": "需要授权",
    "approval.hint": "点击按钮作答，或回复 /approve、/approve-always、/deny。",
    "approval.not_owner": "只有发起任务的人可以作答。",
    "approval.stale": "该请求已失效。",
    "approval.busy": "该请求正在处理中。",
    "approval.sent": "已提交。",
    "approval.unknown": "无法识别该按钮。",
    "dingtalk.other_field": "{header}：其他",
    "dingtalk.other_hint": "选择“其他”时请输入自定义答案",
    "dingtalk.q_submitted": "已提交。",
    "dingtalk.q_expired": "该问题已过期，请重试。",
    "dingtalk.q_resolved_outside": "已在此卡片之外作答。",
    "dingtalk.delivery_failed": "互动问题未能送达，此请求已取消，请重试。",
    "slack.question": "问题",
    "menu.start": "显示快速入门帮助",
    "menu.help": "显示可用命令",
    "menu.cancel": "取消正在运行的请求",
    "menu.approve": "批准待处理的权限请求",
    "menu.deny": "拒绝待处理的权限请求",
    "menu.last": "再次发送你的上一条回答",
    "menu.new": "开始新的对话",
    "menu.status": "查看此处正在运行和等待的请求",
    "menu.stop": "停止你的请求（/stop all：停止所有请求，仅管理员）",
    # -- attachments (issue 25) ---------------------------------------------------------
    "attachment.too_large": "未能接收 {name}：文件超过 {limit} 的上限。",
    "attachment.not_received": "未能接收 {name}。",
    "attachment.not_sent": "智能体的文件 {name} 无法发送到这里：{reason}。",
    "discord.stopped": "*已停止。*",
    "discord.failed": "*已失败。*",
    "question.other_typed": "其他…",
    "question.choose": "请选择…",
    "question.your_answer": "你的回答",
    "question.numbered": "问题 {number}",
}

_DE: dict[str, str] = {
    "notice.failed": "Fehlgeschlagen, bitte erneut versuchen.",
    "notice.interrupted": "Unterbrochen, bitte erneut versuchen.",
    "notice.busy": "Gerade ausgelastet: zu viele Anfragen warten. Bitte in einer Minute "
    "erneut versuchen.",
    "notice.store_unavailable": "Der Bot ist vorübergehend nicht erreichbar und konnte das "
    "nicht bearbeiten. Bitte in ein paar Minuten erneut versuchen.",
    "notice.last_uncertain": "Deine letzte Antwort ist vielleicht nicht angekommen: sende "
    "/last, um sie erneut zu sehen.",
    "queue.next": "In der Warteschlange: deine Anfrage startet, sobald ein Platz frei ist.",
    "queue.ahead": "In der Warteschlange, {ahead} davor: deine Anfrage startet automatisch.",
    "queue.starting": "Startet jetzt.",
    "owner.answer": "Nur die Person, die diese Aufgabe gestartet hat, kann antworten.",
    "owner.answer_asked": "Nur die gefragte Person kann hierauf antworten.",
    "owner.stop": "Nur die Person, die dies gestartet hat, kann es stoppen.",
    "owner.card_group": "Nur der Auftraggeber kann diese Karte bedienen. Diese Aktion hatte "
    "keine Wirkung.",
    "owner.card_direct": "Du kannst diese Karte nicht bedienen. Nur der Auftraggeber kann sie "
    "absenden oder stoppen.",
    "owner.card_title": "Karteninteraktion",
    "access.not_allowed": "Entschuldigung, du stehst nicht auf der Liste der Personen, denen "
    "dieser Bot antwortet. Bitte den Betreiber, dich hinzuzufügen.",
    "access.dm_closed": "Dieser Bot beantwortet keine Direktnachrichten.",
    "access.pairing": "Du bist noch nicht mit diesem Bot gekoppelt. Dein Kopplungscode ist "
    "{code}: bitte den Betreiber des Bots, ihn zu bestätigen (er läuft in einer Stunde ab).",
    "access.admin_only": "Nur die Admins des Bots dürfen /{command} verwenden.",
    "command.unauthorized": "Nur berechtigte Mitglieder können in dieser geteilten Sitzung "
    "Berechtigungsanfragen beantworten.",
    "command.not_found_id": "Keine offene Berechtigungsanfrage mit dieser ID in diesem Chat.",
    "command.none": "Keine offene Berechtigungsanfrage in diesem Chat.",
    "command.submit_via_card": "Beantworte diese Frage über ihre interaktive Karte, oder "
    "brich sie mit /deny [request-id] ab.",
    "command.no_approvable": "Diese Berechtigungsanfrage hat keine Option zum Erlauben.",
    "command.no_always": "Diese Berechtigungsanfrage hat keine Option „immer erlauben“.",
    "command.failed": "Die Berechtigungsanfrage konnte nicht beantwortet werden.",
    "command.approved": "Berechtigung erteilt.",
    "command.approved_always": "Berechtigung dauerhaft erteilt.",
    "command.denied": "Berechtigung verweigert.",
    "command.not_pending": "Die Berechtigungsanfrage ist nicht mehr offen.",
    "command.cancel_unauthorized": "Nur berechtigte Mitglieder können in dieser geteilten "
    "Sitzung Anfragen abbrechen.",
    "command.nothing_running": "Gerade läuft keine Anfrage.",
    "command.cancelled": "Aktuelle Anfrage abgebrochen.",
    "command.cancel_failed": "Die aktuelle Anfrage konnte nicht abgebrochen werden.",
    "command.no_last_answer": "Es gibt keine aktuelle Antwort, die erneut gesendet werden kann.",
    "command.ambiguous": "In diesem Chat sind mehrere Berechtigungsanfragen offen. Antworte "
    "mit /{decision} <request-id>.",
    "prompt.reply_with": "Antworte mit:",
    "prompt.title": "Berechtigung zum Ausführen eines Werkzeugs erforderlich",
    "prompt.tool": "Werkzeug: {tool}",
    "prompt.action": "Aktion: {action}",
    "prompt.parameters": "Parameter: {params}",
    "prompt.unknown_tool": "unbekannt",
    "prompt.tool_use": "Werkzeugaufruf",
    "prompt.allow_once": "einmal erlauben",
    "prompt.always_allow": "immer erlauben",
    "prompt.deny": "ablehnen",
    "button.stop": "Stopp",
    "button.submit": "Absenden",
    "button.cancel": "Abbrechen",
    "button.other": "Andere",
    "button.unknown": "Diese Schaltfläche ist unbekannt.",
    "request.stale": "Diese Anfrage ist nicht mehr aktiv.",
    "request.wrong_message": "Diese Schaltfläche gehört nicht zu dieser Anfrage.",
    "request.busy": "Diese Anfrage wird bereits beantwortet.",
    "request.sent": "Antwort gesendet.",
    "question.stale": "Diese Frage ist nicht mehr aktiv.",
    "question.wrong_message": "Diese Schaltfläche gehört nicht zu dieser Frage.",
    "question.busy": "Diese Frage wird bereits bearbeitet.",
    "question.pick_one": "Wähle zuerst mindestens eine Option.",
    "question.answer_all": "Beantworte zuerst jede Frage.",
    "question.hint_many": "Wähle eine oder mehrere Optionen und tippe dann auf Absenden.",
    "question.hint_one": "Tippe auf eine Option, um sie zu wählen.",
    "question.submitted": "Antwort abgesendet.",
    "question.cancelled": "Abgebrochen.",
    "question.selected": "Ausgewählt.",
    "question.unselected": "Entfernt.",
    "question.recorded": "Antwort gespeichert.",
    "question.unavailable": "Diese Frage ist nicht mehr verfügbar.",
    "question.newer": "Es gibt eine neuere Frage. Beantworte die neueste Karte.",
    "question.already_answered_keyboard": "Diese Frage wurde bereits beantwortet; die "
    "Antwort der Tastatur wurde nicht verwendet.",
    "question.already_answered_form": "Diese Frage wurde bereits beantwortet; die Antwort "
    "des Formulars wurde nicht verwendet.",
    "question.already_answered_card": "Diese Frage wurde bereits beantwortet; die Antwort "
    "der Karte wurde nicht verwendet.",
    "status.queued": "Wartend",
    "status.starting": "Startet jetzt",
    "status.running": "Läuft",
    "status.completed": "Abgeschlossen",
    "status.failed": "Fehlgeschlagen",
    "status.stopped": "Gestoppt",
    "status.cancelled": "Abgebrochen",
    "status.unavailable": "Nicht verfügbar",
    "status.interrupted": "Unterbrochen",
    "status.answer_sent_below": "(Die Antwort wurde unten als Nachricht gesendet.)",
    "operator.new_session": "Neues Gespräch begonnen: deine nächste Nachricht startet eine "
    "neue Agentensitzung.",
    "operator.new_busy": "In diesem Gespräch läuft oder wartet noch eine Anfrage: brich sie "
    "mit /cancel ab oder warte, bis sie fertig ist, und sende dann erneut /new.",
    "operator.new_unauthorized": "Nur berechtigte Mitglieder können in dieser geteilten "
    "Sitzung ein neues Gespräch beginnen.",
    "operator.status_own": "Dieses Gespräch",
    "operator.status_chat": "Dieser Chat",
    "operator.status": "{scope}: Läuft: {running}{details} · Wartend: {queued}",
    "operator.status_idle": "{scope}: nichts läuft und nichts wartet.",
    "operator.status_run": "vor {seconds} s von {who} gestartet",
    "operator.status_you": "dir",
    "operator.status_task": "eine {kind}-Aufgabe",
    "operator.status_more": "+{count} weitere",
    "operator.stop_all": "{stopped} laufende Anfrage(n) gestoppt und {dropped} wartende in "
    "diesem Chat verworfen.",
    "operator.stop_all_not_stopped": " {count} konnte(n) nicht gestoppt werden (die Antwort "
    "wird bereits zugestellt).",
    "operator.stop_all_nothing": "In diesem Chat läuft und wartet nichts.",
    "operator.stop_usage": "Sende /stop, um deine laufende Anfrage zu stoppen, oder /stop all "
    "(Admins), um jede Anfrage in diesem Chat zu stoppen.",
    "queue.dropped": "Vor dem Start gestoppt.",
    "telegram.help": "Schreib eine Nachricht, um mit dem Agenten zu sprechen.\n\n"
    "/cancel — Die laufende Anfrage abbrechen\n"
    "/approve [request-id] — Eine offene Berechtigungsanfrage erlauben\n"
    "/approve-always [request-id] — Eine offene Berechtigungsanfrage immer erlauben\n"
    "/deny [request-id] — Eine offene Berechtigungsanfrage ablehnen\n"
    "/new — Ein neues Gespräch beginnen\n"
    "/status — Was hier läuft und wartet\n"
    "/stop all — Alle Anfragen in diesem Chat stoppen (Admins)\n"
    "/help — Verfügbare Befehle anzeigen",
    "slack.working": "Arbeitet…",
    "slack.stopped": "_Gestoppt._",
    "slack.done": "Fertig.",
    "slack.finished_stopped": "Gestoppt.",
    "slack.failed": "Fehlgeschlagen.",
    "slack.thinking": "denkt nach...",
    "marker.cancelled": "[abgebrochen]",
    "marker.failed": "[fehlgeschlagen]",
    "marker.stopped": "[gestoppt]",
    "marker.truncated": "[Frühere Ausgabe gekürzt]",
    "marker.image_pending": "[Bild ausstehend]",
    "label.submitted": "✅ Abgesendet",
    "label.cancelled": "✖️ Abgebrochen",
    "label.expired": "⌛ Abgelaufen",
    "label.submitted_plain": "Abgesendet",
    "label.cancelled_plain": "Abgebrochen",
    "label.expired_plain": "Abgelaufen",
    "card.running": "Läuft...",
    "card.completed": "Abgeschlossen",
    "card.cancelled": "Abgebrochen",
    "card.failed": "Fehlgeschlagen, bitte erneut versuchen",
    "card.stopped": "Gestoppt",
    "card.stop": "Stopp",
    "card.title": "Assistent",
    "card.truncated": "Inhalt zu lang, gekürzt",
    "card.form_title": "Bitte beantworten",
    "card.submit": "Absenden",
    "card.cancel": "Abbrechen",
    "card.select": "Auswählen",
    "card.other": "Andere (optional)",
    "card.q_processing": "Wird verarbeitet...",
    "card.q_submitted": "Übermittelt",
    "card.q_cancelled": "Abgebrochen",
    "card.q_expired": "Abgelaufen",
    "card.toast_stale": "Diese Frage ist abgelaufen oder wurde bereits beantwortet.",
    "card.toast_already_answered": "Diese Frage wurde bereits beantwortet.",
    "card.already_answered": "Diese Frage wurde bereits beantwortet; die Antwort der Karte "
    "wurde nicht verwendet.",
    "card.toast_invalid": "Bitte wählen Sie für jede Frage eine gültige Antwort.",
    "card.toast_submitted": "Antwort erhalten, wird verarbeitet.",
    "card.toast_cancelled": "Wird abgebrochen.",
    "card.toast_stopped": "Gestoppt",
    "card.toast_not_owner": "Nur der Auftraggeber kann diese Karte bedienen.",
    "card.toast_stop_failed": "Stoppen fehlgeschlagen, bitte erneut versuchen",
    "card.delivery_failed": "Die Fragekarte konnte nicht zugestellt werden; die Anfrage wurde "
    "abgebrochen. Bitte erneut versuchen.",
    "approval.answered": "Beantwortet",
    "approval.answered_elsewhere": "✅ Anderswo beantwortet",
    "approval.title": "Berechtigung erforderlich",
    "approval.hint": "Tippe auf eine Schaltfläche, oder antworte mit /approve, "
    "/approve-always oder /deny.",
    "approval.not_owner": "Nur die Person, die diese Aufgabe gestartet hat, kann antworten.",
    "approval.stale": "Diese Anfrage ist nicht mehr aktiv.",
    "approval.busy": "Diese Anfrage wird bereits beantwortet.",
    "approval.sent": "Antwort gesendet.",
    "approval.unknown": "Diese Schaltfläche ist unbekannt.",
    "dingtalk.other_field": "{header}: Andere",
    "dingtalk.other_hint": "Eigene Antwort eingeben, wenn Andere gewählt ist",
    "dingtalk.q_submitted": "Gesendet.",
    "dingtalk.q_expired": "Diese Frage ist abgelaufen. Bitte erneut versuchen.",
    "dingtalk.q_resolved_outside": "Außerhalb dieser Karte beantwortet.",
    "dingtalk.delivery_failed": "Die interaktive Frage konnte nicht zugestellt werden, daher "
    "wurde diese Anfrage abgebrochen. Bitte erneut versuchen.",
    "slack.question": "Frage",
    "menu.start": "Kurzanleitung anzeigen",
    "menu.help": "Verfügbare Befehle anzeigen",
    "menu.cancel": "Laufende Anfrage abbrechen",
    "menu.approve": "Offene Berechtigungsanfrage genehmigen",
    "menu.deny": "Offene Berechtigungsanfrage ablehnen",
    "menu.last": "Deine letzte Antwort erneut senden",
    "menu.new": "Neue Unterhaltung beginnen",
    "menu.status": "Was hier läuft und wartet",
    "menu.stop": "Deine Anfrage stoppen (/stop all: alle Anfragen, Admins)",
    # -- attachments (issue 25) ---------------------------------------------------------
    "attachment.too_large": "{name} wurde nicht empfangen: die Datei ist größer als das "
    "Limit von {limit}.",
    "attachment.not_received": "{name} konnte nicht empfangen werden.",
    "attachment.not_sent": "Die Datei {name} des Agenten konnte hier nicht gesendet werden: "
    "{reason}.",
    "discord.stopped": "*Gestoppt.*",
    "discord.failed": "*Fehlgeschlagen.*",
    "question.other_typed": "Andere…",
    "question.choose": "Auswählen…",
    "question.your_answer": "Deine Antwort",
    "question.numbered": "Frage {number}",
}

#: locale -> key -> text. Every locale holds every key of ``en`` (tested).
CATALOG: Mapping[str, Mapping[str, str]] = {"en": _EN, "zh-CN": _ZH_CN, "de": _DE}
#: The locales the catalog holds, ``en`` first.
LOCALES: tuple[str, ...] = tuple(CATALOG)

#: language subtag -> the catalog locale that serves it
_BY_LANGUAGE = {"en": "en", "zh": "zh-CN", "de": "de"}
#: Chinese tags written in Traditional script are not served by ``zh-CN``.
_TRADITIONAL = ("zh-tw", "zh-hk", "zh-mo", "zh-hant")


def resolve_locale(tag: object) -> str | None:
    """The catalog locale serving the BCP 47 / POSIX language tag ``tag`` (``"zh-CN"``,
    ``"zh_cn"``, ``"zh-Hans"``, ``"de-AT"``, ``"en-US"``), or None when the catalog
    has no table for its language (or ``tag`` is no string)."""
    if not isinstance(tag, str):
        return None
    norm = tag.strip().replace("_", "-").lower()
    if not norm:
        return None
    for locale in LOCALES:
        if norm == locale.lower():
            return locale
    if norm.startswith(_TRADITIONAL):
        return None
    return _BY_LANGUAGE.get(norm.split("-", 1)[0])


def check_locale(value: object, path: str) -> str:
    """``value`` as a catalog locale, or `ConfigurationError` naming ``path`` (a
    configuration's ``locale`` must resolve: a typo never silently shows English)."""
    from channelkit.errors import ConfigurationError

    locale = resolve_locale(value)
    if locale is None:
        raise ConfigurationError(
            f"must be one of {', '.join(LOCALES)} (or a tag of their language), got {value!r}",
            path=path,
        )
    return locale


def placeholders(text: str) -> frozenset[str]:
    """The named placeholders of a catalog text (``{ahead}`` -> ``{"ahead"}``)."""
    return frozenset(
        name for _, name, _, _ in string.Formatter().parse(text) if name is not None and name
    )


class Message(str):
    """The English text of a catalog entry that also carries its ``key`` (and, once
    formatted, its ``params``).

    It is a plain ``str`` for everything that compares or sends it (the public
    ``MSG_*`` constants are `Message` values); ``MSG_X.format(name=...)`` gives a
    `Message` again, with the params; `Messages.text()` uses key and params to give the
    text in another locale."""

    key: str
    params: Mapping[str, object]

    def __new__(cls, key: str, params: Mapping[str, object] | None = None) -> Message:
        text = _EN[key].format(**params) if params else _EN[key]
        self = super().__new__(cls, text)
        self.key = key
        self.params = dict(params or {})
        return self

    def format(self, *args: object, **kwargs: object) -> str:
        """The English text with ``kwargs`` filled in, still carrying the key (a
        positional argument gives a plain ``str``: catalog placeholders are named)."""
        if args:
            return str.format(self, *args, **kwargs)
        return Message(self.key, {**self.params, **kwargs})

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (self.key, dict(self.params)))


def en(key: str) -> Message:
    """The English entry ``key`` as a `Message` (what ``MSG_*`` constants are made of);
    `KeyError` when the catalog has no such key."""
    return Message(key)


class Messages:
    """The texts of one locale; see the module docstring."""

    __slots__ = ("_table", "locale")

    def __init__(self, locale: str) -> None:
        self.locale = locale
        self._table = CATALOG[locale]

    def get(self, key: str, /, **params: object) -> str:
        """The locale's text for ``key``, formatted with ``params`` (each named
        placeholder needs one). `KeyError` for a key or placeholder the catalog lacks."""
        text = self._table[key]
        return text.format(**params) if params or "{" in text else text

    def text(self, value: str, /, **params: object) -> str:
        """``value`` in this locale when it is a `Message` (a ``MSG_*`` constant),
        formatted with ``params``; any other string is returned as it is."""
        if isinstance(value, Message):
            return self.get(value.key, **{**value.params, **params})
        return value.format(**params) if params else value

    def __repr__(self) -> str:
        return f"Messages({self.locale!r})"


_MESSAGES = {locale: Messages(locale) for locale in LOCALES}


def messages(locale: str | None = None) -> Messages:
    """The `Messages` of ``locale`` (any tag `resolve_locale()` understands); None or
    a tag the catalog cannot serve gives ``en``."""
    resolved = resolve_locale(locale) if locale is not None else None
    return _MESSAGES[resolved or DEFAULT_LOCALE]

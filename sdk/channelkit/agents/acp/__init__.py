"""A bridge to agents that speak the Agent Client Protocol (ACP) over stdio.

`AcpBridge` spawns an ACP agent (for example ``qwen --acp`` or
``gemini --experimental-acp``) and talks JSON-RPC 2.0 to it, one JSON object per line, on
the child's stdin/stdout. It implements `AgentBridge`:

* ``prompt(session_id, text, sink)`` lazily starts the process (``initialize``), lazily
  creates one ACP session per channelkit session id (``session/new``), sends
  ``session/prompt`` and blocks until the agent answers with a ``stopReason``. It returns
  the concatenation of the ``agent_message_chunk`` texts streamed during the turn.
  ``prompt_with_attachments(session_id, text, files, sink)`` does the same with a
  person's files as content blocks the agent advertised in ``promptCapabilities``
  (``image``, ``audio``, an embedded text ``resource``, else a ``resource_link``) or,
  failing those, a text line naming each file's local path; bounded by `ContentLimits`.
* ``session/update`` notifications become sink events: ``agent_message_chunk`` text ->
  ``text_chunk``, an ``image`` block or a ``file://`` ``resource_link`` (inside
  ``files_root``, at most ``max_file_size``) -> ``file`` (sent to the chat in order, as
  ``Turn.send_image`` / ``send_file`` do; one that cannot be sent is named in the
  text); ``tool_call`` / ``tool_call_update`` -> ``tool_call``; every other kind is
  ignored.
* ``session/request_permission`` (a request from the agent) becomes ``response_boundary``
  followed by ``permission_request``; the bridge generates the ``request_id`` and keeps
  the ACP ``toolCall`` verbatim (``_meta`` included). ``respond_to_permission`` sends
  the response (``outcome`` and, when present, ``answers``) as the JSON-RPC result. A
  permission nobody answers within ``permission_timeout`` is answered ``cancelled``.
* Requests the bridge does not implement (``fs/*``, ``terminal/*``, anything unknown) get
  a JSON-RPC error reply (``-32601``), never silence.
* When the process dies, a waiting ``prompt`` raises `AgentProcessError`, pending
  permissions settle ``cancelled`` (``permission_resolved``), and ``session_died`` is
  emitted for every session the process held. The next ``prompt`` starts a new process.

Threads: one reader thread per process (stdout: responses, notifications, agent
requests; it calls the sink, so sinks must return quickly), one stderr drain thread, and
the callers' threads (``prompt`` blocks on a condition with a timeout). Writes to stdin
go through one lock. The bridge owns no timer thread: permission expiry runs on an
injected scheduler (anything with ``call_later(delay, fn) -> handle.cancel()``, such as
``channelkit.runtime.Scheduler``), or, without one, is checked by the threads waiting in
``prompt``.

Modules: `bridge` (`AcpBridge`: turns, sessions, the
agent's requests), `content` (a person's files as prompt content blocks),
`process` (spawn, stop, reap),
`rpc` (framing, request/response correlation, timeouts),
`permissions` (permission requests and answers).

The ``agent-client-protocol`` package was evaluated and not used: it is asyncio-based
(and requires pydantic), which does not fit channelkit's synchronous threading model.
"""

from channelkit.agents.acp.bridge import ACP_PROTOCOL_VERSION, AcpBridge
from channelkit.agents.acp.content import ContentLimits, PromptCapabilities
from channelkit.agents.acp.rpc import INVALID_PARAMS as INVALID_PARAMS
from channelkit.agents.acp.rpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from channelkit.errors import AcpError, AcpRequestError, AcpTimeoutError, AgentProcessError

__all__ = [
    "ACP_PROTOCOL_VERSION",
    "AcpBridge",
    "AcpError",
    "AcpRequestError",
    "AcpTimeoutError",
    "AgentProcessError",
    "ContentLimits",
    "PromptCapabilities",
]

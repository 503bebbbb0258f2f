"""OpenAI Responses API items as parts: the ``input`` list of a Responses request body (read by
the ``openai`` reader) and the ``response_item`` records of Codex CLI session logs (``codex``).

An item is a ``message`` (``role``; ``content`` a string or parts: ``input_text``,
``output_text``, ``refusal``; images and files counted in ``skipped``), a tool call
(``function_call``, ``custom_tool_call``, ``local_shell_call``, ``shell_call``,
``apply_patch_call``, ``mcp_call`` with its own output, ...) or a call's output
(``function_call_output``, ``custom_tool_call_output``, ``local_shell_call_output``, ...),
linked by ``call_id``. ``reasoning`` items (a summary, encrypted content) are not resent as
text and are counted, as are items the log holds no text of (web and file searches,
generated images, ``item_reference``); an output without text (empty, or a computer-use
screenshot, counted as a non-text part) is a ``NO_TEXT`` item, so its call keeps its pair.

``Turns`` numbers the model's turns: the items from one model response (its messages and
calls) share a turn, so the calls of one response share a ``tool_group``.
"""

from __future__ import annotations

from cupel_np.io.importers.core import Bad, Part, blank, call_part, count, result_parts, role_part, text_of

#: call item type -> its output item's type
CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "tool_search_call": "tool_search_output",
}
OUTPUTS = frozenset(CALLS.values())
#: items of a model response the log holds no resendable text of
_NO_TEXT = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "item_reference",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
    }
)


#: calls whose own ``id`` links them when they have no ``call_id`` (Codex answers a local shell
#: call by its id; an MCP call holds its own output)
_ID_LINKED = frozenset({"local_shell_call", "mcp_call"})


class Turns:
    """The model turn each item belongs to: a new turn starts at the first model item (an
    assistant message or a call) after an input item (a user, system or developer message, or
    a call's output)."""

    def __init__(self, prefix: str = "t") -> None:
        self.prefix = prefix
        self.n = 0
        self.in_model = False

    def of(self, model: bool) -> str | None:
        if not model:
            self.in_model = False
            return None
        if not self.in_model:
            self.n += 1
            self.in_model = True
        return f"{self.prefix}{self.n}"


def _arguments(item: dict, w: str):
    """What a call passed: ``arguments`` (JSON text), ``input`` (a custom tool's free text) or
    a shell call's ``action`` (its command)."""
    for k in ("arguments", "input"):
        if k in item and item[k] is not None:
            return item[k]
    action = item.get("action")
    if isinstance(action, dict):
        cmd = action.get("command", action.get("commands"))
        if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
            return " ".join(cmd)
        return action
    operation = item.get("operation")
    if operation is not None:
        return operation
    raise Bad(f"{w}: a {item.get('type')} without arguments, input or action")


def _output_text(output, w: str, skipped: dict) -> tuple[str, bool | None]:
    """An output item's text and whether it reports a failure: a string, content parts, or
    Codex's ``{"content", "success"}`` (older logs); a JSON string ``{"output": ...,
    "metadata": {"exit_code"}}`` (Codex's shell tools) is kept as it is, the text the model
    was sent."""
    if isinstance(output, dict) and "content" not in output and "output" not in output and "type" in output:
        return text_of([output], f"{w}.output", skipped), None  # a part (a screenshot: counted)
    if isinstance(output, dict):
        ok = output.get("success")
        body = output.get("content", output.get("output"))
        text = body if isinstance(body, str) else text_of(body, f"{w}.output", skipped)
        return text, (not ok) if isinstance(ok, bool) else None
    if isinstance(output, list):
        return text_of(output, f"{w}.output", skipped), None
    if isinstance(output, str):
        return output, None
    if output is None:
        return "", None
    raise Bad(f"{w}.output: expected a string, content parts or an object, got {type(output).__name__}")


def _call_parts(item: dict, t: str, w: str, turn, ts, mid, tool_call_kind: str, skipped: dict) -> list[Part]:
    """A call item as a ``ToolCall`` part (an ``mcp_call``, which the API ran, with its output
    or error as a ``ToolOutput``)."""
    name = item.get("name")
    if not isinstance(name, str) or not name:
        name = {"local_shell_call": "local_shell", "shell_call": "shell", "apply_patch_call": "apply_patch"}.get(
            t, t.removesuffix("_call")
        )
    cid = item.get("call_id")
    if not (isinstance(cid, str) and cid) and t in _ID_LINKED:
        cid = item.get("id")
    cid = cid if isinstance(cid, str) and cid else None
    args = item.get("arguments", "") if t == "mcp_call" else _arguments(item, w)
    extra = {"item_type": t}
    if t == "mcp_call" and isinstance(item.get("server_label"), str):
        extra["server"] = item["server_label"]
    parts = [call_part(name, args, tool_call_kind, "assistant", ts, mid, cid, turn, extra)]
    if t != "mcp_call":
        return parts
    err, out = item.get("error"), item.get("output")
    ran: str = err if isinstance(err, str) and err else out if isinstance(out, str) else ""
    return parts + result_parts(ran, ts, mid, cid, bool(err), skipped)


def item_parts(item, w: str, turns: Turns, ts, tool_call_kind: str, skipped: dict, label: str) -> list[Part]:
    """The parts of one Responses item (``w`` names it in errors; ``label`` names the format in
    ``skipped``). An output's tool name is its call's (``core.link_results``)."""
    if not isinstance(item, dict):
        raise Bad(f"{w}: expected an item object, got {type(item).__name__}")
    t = item.get("type")
    if t is None and "role" in item:
        t = "message"  # (an "easy input" message has no type)
    if not isinstance(t, str):
        raise Bad(f"{w}: an item needs a 'type' (or a 'role'), got {item!r:.60}")
    mid = item.get("id") if isinstance(item.get("id"), str) else None
    if t == "message":
        kind, source, pinned, role = role_part(item.get("role"), f"{w}.role")
        turn = turns.of(role == "assistant")
        text = text_of(item.get("content"), f"{w}.content", skipped)
        if blank(text):
            count(skipped, "empty content")
            return []
        return [Part(text, kind, source, pinned, role, ts, mid, turn=turn)]
    if t in CALLS or t == "mcp_call":
        return _call_parts(item, t, w, turns.of(True), ts, mid, tool_call_kind, skipped)
    if t in OUTPUTS:
        turns.of(False)
        cid = item.get("call_id")  # (an output's own id is never its call's)
        cid = cid if isinstance(cid, str) and cid else None
        text, failed = _output_text(item.get("output"), w, skipped)
        return result_parts(text, ts, mid, cid, failed, skipped, extra={"item_type": t})
    if t in _NO_TEXT:
        if t != "item_reference":
            turns.of(True)
        count(skipped, f"{label} item '{t}'")
        return []
    count(skipped, f"{label} item '{t}' (unknown)")
    return []

"""The MCP page's state without Qt: the servers as configured and as the backend reports them,
the rows and the selected server they make, which controls take a click, what each changes,
and the add form's table and problems."""

from __future__ import annotations

from typing import Any

from desktop.state import mcp
from desktop.state.mcp_form import NewServer, form_table, key_hint, kind_words, problem_field
from shared import protocol as p
from shared.client import InvalidParams, RpcError
from shared.config import ConfigView, Mcp, McpServerConfig, McpToolConfig


def _config(**servers: McpServerConfig) -> ConfigView:
    return ConfigView(mcp=Mcp(servers=servers))


def _tool(name: str, *, enabled: bool = True, approval: p.McpApproval = "ask") -> p.McpToolInfo:
    return p.McpToolInfo(name=name, model_name=f"mcp__srv__{name}", description=f"Does  {name}\n.",
                         enabled=enabled, approval=approval)


def _status(name: str, state: p.McpState = "ready", tools: list[p.McpToolInfo] | None = None,
            **extra: Any) -> p.McpServerStatus:
    return p.McpServerStatus(name=name, transport="stdio", state=state, tools=tools, **extra)


TIME = McpServerConfig(command=["uvx", "mcp-server-time"])
WEB = McpServerConfig(url="https://h/mcp", header_secrets={"X-Key": "mcp-web", "Auth": "mcp-a"},
                      env_secrets={"B": "s2", "A": "s1"})


def _servers(**configs: McpServerConfig) -> mcp.McpServers:
    servers = mcp.McpServers()
    servers.set_config(_config(**configs))
    return servers


# --- what it knows ---------------------------------------------------------------------


def test_servers_are_listed_by_name_whatever_the_case() -> None:
    servers = _servers(gamma=TIME, Beta=TIME, alpha=TIME)
    assert servers.names() == ["alpha", "Beta", "gamma"]


def test_a_server_no_longer_configured_is_forgotten_with_its_status() -> None:
    servers = _servers(time=TIME, web=WEB)
    servers.listed([_status("time"), _status("web")])
    servers.set_config(_config(time=TIME))
    assert set(servers.statuses) == {"time"}


def test_a_status_without_tools_keeps_those_last_listed_while_it_runs() -> None:
    servers = _servers(time=TIME)
    servers.listed([_status("time", tools=[_tool("now")])])
    kept, _ask = servers.heard(_status("time", "starting"))
    assert [t.name for t in kept.tools or []] == ["now"]
    failed, _ask = servers.heard(_status("time", "failed", error="gone"))
    assert failed.tools is None, "a failed server lists nothing"
    assert servers.statuses["time"] is failed


def test_a_server_heard_of_but_not_configured_asks_for_the_config_once() -> None:
    servers = _servers(time=TIME)
    assert servers.heard(_status("time"))[1] is False
    assert servers.heard(_status("new"))[1] is True
    assert servers.heard(_status("new", "starting"))[1] is False, "asked already"
    servers.set_config(_config(time=TIME))  # the config came (still without it)
    assert servers.heard(_status("other"))[1] is True


def test_a_test_result_is_kept_only_for_a_configured_server() -> None:
    servers = _servers(time=TIME)
    result = p.McpTestResult(ok=True, latency_ms=5, server=_status("time", tools=[]))
    assert servers.tested(result)
    assert servers.statuses["time"] is result.server
    assert not servers.tested(p.McpTestResult(ok=True, latency_ms=5, server=_status("form")))
    assert "form" not in servers.statuses


def test_the_selection_stays_on_its_server_else_goes_to_the_first() -> None:
    servers = _servers(b=TIME, a=TIME)
    assert servers.kept() == "a"
    servers.current = "b"
    assert servers.kept() == "b"
    servers.current = "removed"
    assert servers.kept() == "a"
    assert _servers().kept() is None


# --- what the rows and the selected server say ----------------------------------------


def test_rows_say_each_state_in_words_and_tone_and_the_error_in_the_tooltip() -> None:
    servers = _servers(off=McpServerConfig(command=["x"], enabled=False), time=TIME, web=WEB,
                       zzz=TIME)
    servers.listed([_status("time", tools=[_tool("a"), _tool("b", enabled=False)]),
                    _status("web", "failed", error="401 Unauthorized"),
                    _status("zzz", "weird")])  # type: ignore[arg-type]
    rows = {r.name: r for r in servers.rows()}
    assert (rows["off"].state, rows["off"].tone, rows["off"].tools) == ("Disabled", "muted", "—")
    assert (rows["time"].state, rows["time"].tone, rows["time"].tools) == \
        ("Ready", "success", "1 tool (1 hidden)")
    assert rows["time"].what == "Runs: uvx mcp-server-time"
    assert (rows["web"].state, rows["web"].tone) == ("Failed", "danger")
    assert rows["web"].state_tip == "401 Unauthorized"
    assert rows["web"].what == "URL: https://h/mcp"
    assert (rows["zzz"].state, rows["zzz"].state_tip) == ("weird", "weird")


def test_no_details_while_nothing_or_something_unconfigured_is_selected() -> None:
    servers = _servers(time=TIME)
    assert servers.details() is None
    servers.current = "gone"
    assert servers.details() is None


def test_the_selected_servers_details() -> None:
    servers = _servers(web=WEB)
    servers.current = "web"
    servers.listed([p.McpServerStatus(name="web", transport="http", state="ready", restarts=2,
                                      tools=[_tool("fetch")])])
    details = servers.details()
    assert details is not None
    assert (details.name, details.state, details.what) == ("web", "ready", "URL: https://h/mcp")
    assert details.running == "restarted 2 times", "an HTTP server has no sandbox to speak of"
    assert details.error == ""
    assert [(k.kind, k.target, k.secret) for k in details.keys] == [
        ("header", "Auth", "mcp-a"), ("header", "X-Key", "mcp-web"),
        ("variable", "A", "s1"), ("variable", "B", "s2")]
    assert details.keys[0].words == "Key for the header Auth"
    assert [t.name for t in details.tools or []] == ["fetch"]
    assert details.tools_empty == ""


def test_a_stdio_server_says_whether_it_runs_in_the_sandbox() -> None:
    assert mcp.running_words(_status("t", sandboxed=True)) == "Runs in the command sandbox"
    assert mcp.running_words(_status("t", restarts=1)) == "Runs without a sandbox · restarted 1 time"
    assert mcp.running_words(_status("t", "stopped")) == ""


def test_tool_rows_say_how_each_is_approved() -> None:
    config = McpServerConfig(command=["x"], tools={"mine": McpToolConfig(approval="trusted"),
                                                   "off": McpToolConfig(enabled=False)})
    status = _status("s", tools=[_tool("mine", approval="trusted"), _tool("theirs"),
                                 _tool("off", enabled=False)])
    rows = {r.name: r for r in mcp.tool_rows(status, config) or ()}
    assert rows["mine"].approval == "trusted (this tool)"
    assert rows["theirs"].approval == "asks"
    assert (rows["off"].approval, rows["off"].hidden) == ("hidden", True)
    assert rows["off"].name_tip == "Hidden: not offered to the model"
    assert rows["theirs"].name_tip == "The model calls it mcp__srv__theirs"
    assert rows["theirs"].about == "Does theirs ."  # on one line
    assert mcp.tool_rows(_status("s"), config) is None
    assert mcp.tool_rows(None, config) is None


def test_where_no_tools_show_it_says_why_and_what_to_do() -> None:
    words = mcp.tools_empty_words
    assert words(_status("s", tools=[]), TIME) == "It lists no tools."
    assert words(_status("s", "failed"), TIME).startswith("None: it did not start.")
    assert words(None, McpServerConfig(command=["x"], enabled=False)).startswith("Disabled")
    assert words(_status("s", "starting"), TIME) == "Listed once it has started."
    assert words(None, TIME).startswith("Not listed yet: it starts when a turn needs its tools.")
    assert words(_status("s", tools=[_tool("a")]), TIME) == ""


def test_controls_take_a_click_only_for_a_selected_server_and_one_operation_at_a_time() -> None:
    def controls(remove: bool = False, test: bool = False, enabled: bool = False,
                 approval: bool = False, save_key: bool = True, add: bool = True,
                 form_test: bool = True) -> mcp.Controls:
        return mcp.Controls(remove, test, enabled, approval, save_key, add, form_test)

    servers = _servers(time=TIME)
    assert servers.controls(adding=False) == controls()
    servers.current = "time"
    every = controls(remove=True, test=True, enabled=True, approval=True)
    assert servers.controls(adding=False) == every
    assert servers.controls(adding=True) == controls(), "the add form shows: none is selected"
    servers.busy.add("save")
    assert servers.controls(adding=False) == controls(test=True, add=False)
    servers.busy = {"test", "key"}
    assert servers.controls(adding=False) == controls(remove=True, enabled=True, approval=True,
                                                      save_key=False, form_test=False)


def test_only_an_enabled_server_is_tested_at_once() -> None:
    servers = _servers(on=TIME, off=McpServerConfig(command=["x"], enabled=False))
    assert servers.may_test("on")
    assert not servers.may_test("off")
    assert not servers.may_test("unknown")


def test_a_failed_tests_transport_is_the_saved_servers_else_the_forms() -> None:
    servers = _servers(web=WEB)
    assert servers.transport("web", adding=False, form_kind="stdio") == "http"
    assert servers.transport("web", adding=True, form_kind="stdio") == "stdio"
    assert servers.transport("new", adding=False, form_kind="stdio") == "stdio"
    result = mcp.failed_test("new", "it broke", "http")
    assert (result.ok, result.error, result.server.state, result.server.transport) == \
        (False, "it broke", "failed", "http")


# --- what the controls change -----------------------------------------------------------


def test_each_control_changes_one_servers_table() -> None:
    on = mcp.enabling("time", True)
    assert on.patch == {"mcp": {"servers": {"time": {"enabled": True}}}}
    assert on.done.startswith("Enabled “time”")
    assert mcp.enabling("time", False).done.startswith("Disabled “time”: stopped")
    assert mcp.approving("time", "trusted") == mcp.Change(
        {"mcp": {"servers": {"time": {"approval": "trusted"}}}},
        "Saved: its calls run without asking.")
    assert mcp.removal("time").patch == {"mcp": {"servers": {"time": None}}}
    assert mcp.remove_question("time")[0] == "Remove the MCP server “time”?"


def test_a_tools_change_is_said_by_what_it_changes() -> None:
    change = mcp.tool_change("time", "now", {"approval": None})
    assert change.patch == {"mcp": {"servers": {"time": {"tools": {"now": {"approval": None}}}}}}
    assert change.done == "“now” follows the server's approval."
    assert mcp.tool_change("t", "now", {"enabled": False}).done == "“now” is hidden from the model."
    assert mcp.tool_change("t", "now", {"other": 1}).done == "Saved."


def test_a_tools_menu_checks_the_approval_in_force() -> None:
    menu = mcp.tool_menu(McpServerConfig(command=["x"], approval="trusted"), "now")
    assert [(c.words, c.checked) for c in menu] == [
        ("Ask before each call", False), ("Run without asking (trusted)", False),
        ("As the server says (trusted)", True), ("Hide it from the model", None)]
    assert menu[-1].change == {"enabled": False}
    own = McpServerConfig(command=["x"], tools={"now": McpToolConfig(approval="ask", enabled=False)})
    menu = mcp.tool_menu(own, "now")
    assert [c.checked for c in menu[:3]] == [True, False, False]
    assert (menu[-1].words, menu[-1].change) == ("Offer it to the model", {"enabled": None})
    hidden = McpServerConfig(command=["x"], tools={"now": McpToolConfig(enabled=False)})
    assert [c.checked for c in mcp.tool_menu(hidden, "now")[:3]] == [False, False, True]


# --- words ------------------------------------------------------------------------------


def test_a_refusal_names_the_field_and_the_server() -> None:
    def refused(field: str, message: str) -> RpcError:
        return RpcError.refused(-32602, message, {"field": field})

    assert isinstance(refused("x", "y"), InvalidParams)
    assert mcp.mcp_error_words(refused("patch.mcp.servers.my_server", "a server's name is bad.")) \
        == "Server “my_server”: a server's name is bad."
    assert mcp.mcp_error_words(refused("patch.mcp.servers.web.url", "must be a URL")) \
        .startswith("URL of server “web”: ")
    assert mcp.mcp_error_words(refused("server_config.command", "is empty")).startswith("Command: ")
    assert mcp.mcp_error_words(RpcError(-32003, "Only the owner may.")) == "Only the owner may."


def test_test_results_in_words() -> None:
    ok = p.McpTestResult(ok=True, latency_ms=12, server=_status("t", tools=[_tool("a"), _tool("b")]))
    assert mcp.test_words(ok) == ("OK: “t” started and listed 2 tools in 12 ms.", "success")
    assert mcp.form_test_words(ok)[0].endswith(" Tools: a, b.")
    failed = p.McpTestResult(ok=False, latency_ms=0, server=_status("t", "failed", error="no"))
    assert mcp.test_words(failed) == ("Failed: “t”: no", "danger")
    silent = p.McpTestResult(ok=False, latency_ms=0, server=_status("t", "failed"))
    assert mcp.test_words(silent)[0] == "Failed: “t”: it failed for an unknown reason"


def test_a_stored_key_says_where_and_warns() -> None:
    assert mcp.key_stored_words("mcp-web", p.SecretSetResult(stored="keyring")) == \
        ("Key stored in the system keyring as “mcp-web”.", "")
    assert mcp.key_stored_words("mcp-web", p.SecretSetResult(stored="file", warning="no keyring")) \
        == ("Key stored in a file as “mcp-web”. Warning: no keyring.", "warning")


# --- the add form -----------------------------------------------------------------------


def _typed(**fields: str) -> NewServer:
    values: dict[str, Any] = {"name": "srv", "kind": "stdio", "command": "npx srv", "url": "",
                              "key_to": "", "key": "", "approval": "ask", **fields}
    return NewServer(**values)


def test_the_form_needs_a_new_name() -> None:
    assert form_table(_typed(name="  "), []) == "Name: give the server a name."
    assert form_table(_typed(name="time"), ["time"]) == "Name: a server called “time” already exists."
    assert form_table(_typed(name=" time "), []) == ("time", {"command": ["npx", "srv"]})


def test_the_form_reads_the_field_of_its_kind_and_stores_the_key_under_the_name() -> None:
    http = _typed(kind="http", command="ignored", url="https://h", key_to="Authorization", key="k")
    assert form_table(http, []) == ("srv", {"url": "https://h",
                                            "header_secrets": {"Authorization": "mcp-srv"}})
    stdio = _typed(url="ignored", key_to="TOKEN", key="k", approval="trusted")
    assert form_table(stdio, []) == ("srv", {"command": ["npx", "srv"], "approval": "trusted",
                                             "env_secrets": {"TOKEN": "mcp-srv"}})
    assert form_table(_typed(key="   ", key_to="TOKEN"), []) == \
        "Key: paste the key for TOKEN, or clear the variable."


def test_a_problem_names_its_field() -> None:
    assert problem_field("Command: No closing quotation (check the quotes).") == "Command"
    assert problem_field("Header: name the header the key goes into, or clear the key.") == "Header"
    assert problem_field("Server “x”: bad") == ""
    assert problem_field("") == ""


def test_the_form_says_where_a_key_goes_for_its_kind() -> None:
    assert key_hint("  ", "stdio") == ("A key is stored in the system keyring as “mcp-NAME” "
                                      "(never in config.toml) and sent as that environment variable.")
    assert key_hint("web", "http").endswith("“mcp-web” (never in config.toml) and sent as that header.")
    assert kind_words("http").key_to == "Header"
    assert kind_words("stdio").key_to == "Variable"

"""The `turnkey` command line: chat, list sessions, store keys, test providers, manage MCP
tool servers and scheduled prompts, run the backend, list the backends on its store, copy its
sessions into PostgreSQL.

Start-up is on the clock here: a command that needs the backend starts it
(when none runs) before importing the client stack (asyncio, websockets,
msgspec, `desktop.commands`), so those load while the backend starts.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import math
import os
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop import startup_trace
from shared.launcher import BackendNotFound, running, spawn
from shared.lazy_imports import defer_startup_imports
from shared.paths import default_data_dir

if TYPE_CHECKING:  # parsed only when --remote is given: see the module's docstring
    from shared.remote import RemoteTarget
    from shared.uploads import Attached

# The commands --remote (or $TURNKEY_REMOTE) points at another computer's backend; None: the app.
REMOTE_COMMANDS = (None, "app", "chat", "sessions", "backends")


def read_attachments(paths: list[Path], text: str | None) -> list[Attached] | str:
    """`chat --attach`'s files, read and typed; or why one cannot go."""
    from shared.protocol import MAX_ATTACHMENTS
    from shared.uploads import read_attachment

    if text is None:
        return 'chat --attach needs the TEXT to send with the files (it may be "")'
    if len(paths) > MAX_ATTACHMENTS:
        return f"at most {MAX_ATTACHMENTS} files go with one prompt"
    try:
        return [read_attachment(path.expanduser()) for path in paths]
    except ValueError as exc:
        return str(exc)


def read_secret(name: str) -> str:
    """The key from stdin: asked for without echo on a terminal, else read whole (a pipe)."""
    if sys.stdin.isatty():
        try:
            return getpass.getpass(f"value for {name!r} (not shown): ")
        except EOFError:
            return ""
    return sys.stdin.read()


def main(argv: list[str] | None = None) -> int:
    startup_trace.mark("entry")  # (benchmarks only: see desktop/startup_trace.py)
    defer_startup_imports()
    parser = _parser()
    args = _parse(parser, sys.argv[1:] if argv is None else argv)
    data_dir = (args.data_dir or default_data_dir()).expanduser().resolve()
    try:
        if args.command in (None, "app"):
            remote = _remote(args)
            if isinstance(remote, str):
                print(f"turnkey: {remote}", file=sys.stderr)
                return 2
            from desktop.x11_libs import window_problem

            # Before Qt: a library its xcb plugin cannot load makes Qt abort with a core dump.
            problem = window_problem()
            if problem is not None and args.background:  # no window can open: the backend alone
                from desktop import commands

                return _run(commands.backend(data_dir, "start"))
            if problem is not None:
                print(f"turnkey: {problem}", file=sys.stderr)
                return 1
            from desktop.app import run  # Qt loads only for the app

            return run(data_dir, smoke=args.smoke, session_id=getattr(args, "session", ""),
                       remote=remote, background=args.background)
        if args.command == "backend":
            return _backend(parser, args, data_dir)
        if args.command == "store":
            return _store(args, data_dir)
        return _client_command(args, data_dir)
    except BackendNotFound as exc:
        print(f"turnkey: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`turnkey mcp add NAME [options] -- COMMAND ARGS...`: everything after the `--` is the
    server's command, its own options included (argparse alone would take `-y` of `npx -y` for
    one of ours, and cannot put options between NAME and the command)."""
    if "--" in argv:
        cut = argv.index("--")
        head, tail = argv[:cut], argv[cut + 1:]
        if any(head[i:i + 2] == ["mcp", "add"] for i in range(len(head))):
            args = parser.parse_args(head)
            args.argv = [*args.argv, *tail]
            return args
    return parser.parse_args(argv)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnkey", description="Turnkey, a desktop AI agent")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="data folder (default: $TURNKEY_HOME or the platform's data dir)")
    parser.add_argument("--remote", default=None, metavar="STRING",
                        help="the app, chat, sessions and backends: use the backend a connection "
                             "string names "
                             "(from `turnkey token create` on its computer) instead of this "
                             "computer's; default $TURNKEY_REMOTE")
    parser.add_argument("--smoke", action="store_true",
                        help="open the app, connect to (or start) the backend, close, and print "
                             "what happened as JSON; exits 0 when all of it worked")
    parser.add_argument("--background", action="store_true",
                        help="start without a window, in the system tray (what the login entry "
                             "runs: Settings ▸ Start in the background when I log in); without a "
                             "tray, start the backend alone and exit; nothing when the app runs")
    sub = parser.add_subparsers(dest="command")
    a = sub.add_parser("app", help="open the desktop app (what `turnkey` alone does); when it "
                                   "already runs, bring it forward")
    a.add_argument("--session", default="", help="also open this session id's window")
    c = sub.add_parser("chat", help="chat in the terminal (a REPL when no TEXT is given)")
    c.add_argument("--session", default=None, help="continue this session id")
    c.add_argument("--cwd", type=Path, default=None,
                   help="the new session's working folder, where its tools act (default: here)")
    c.add_argument("--steer", action="store_true",
                   help="with --session and TEXT: add TEXT to the turn running there, read at "
                        "its next step, instead of queueing it for after (an idle session "
                        "just runs it)")
    c.add_argument("--attach", action="append", type=Path, default=[], metavar="FILE",
                   help="send FILE with TEXT (repeatable): an image (PNG, JPEG, GIF, WebP), a "
                        "PDF or a text file")
    c.add_argument("text", nargs="?", default=None)
    s = sub.add_parser("sessions", help="list sessions, most recent first")
    s.add_argument("--limit", type=int, default=20)
    b = sub.add_parser("backend", help="start, stop or inspect the backend process, or run it "
                                       "in the foreground (serve)")
    b.add_argument("action", choices=["start", "stop", "status", "serve"])
    b.add_argument("serve_args", nargs=argparse.REMAINDER,
                   help="serve only: the backend's own options (--data-dir, --host, --port, "
                        "--listen HOST:PORT, --tls-cert F, --tls-key F)")
    bs = sub.add_parser("backends", help="the backend processes on the store (several share a "
                                         "PostgreSQL store): host, pid, state, heartbeat, "
                                         "sessions held; needs an admin token")
    bs.add_argument("--json", action="store_true", help="print backend.list's answer as JSON")
    bs.add_argument("--all", action="store_true",
                    help="also backends that stopped or died more than a day ago")
    k = sub.add_parser("secret", help="store an API key (in the keyring where one works)")
    k_sub = k.add_subparsers(dest="action", required=True)
    k_set = k_sub.add_parser("set", help="store NAME's value, read from stdin (asked for on a terminal)")
    k_set.add_argument("name", help="the name a provider's api_key_secret refers to, e.g. openai")
    pt = sub.add_parser("provider", help="check a configured model provider")
    pt_sub = pt.add_subparsers(dest="action", required=True)
    pt_test = pt_sub.add_parser("test", help="send one tiny request and report the answer time")
    pt_test.add_argument("name", nargs="?", default=None,
                         help="a [providers.NAME] of config.toml (default: the one turns use)")
    _mcp_parser(sub)
    _token_parser(sub)
    _schedule_parser(sub)
    _memory_parser(sub)
    _skill_parser(sub)
    _store_parser(sub)
    return parser


def _mcp_parser(sub: Any) -> None:
    m = sub.add_parser("mcp", help="MCP tool servers: list, add, remove, test")
    m_sub = m.add_subparsers(dest="action", required=True)
    m_list = m_sub.add_parser("list", help="each configured server: its state, transport and tools")
    m_list.add_argument("name", nargs="?", default=None, help="only this server")
    m_list.add_argument("--tools", action="store_true", help="list each server's tools too")
    m_add = m_sub.add_parser(
        "add", help="add a server: NAME -- COMMAND [ARGS...] (stdio) or NAME --url URL (HTTP)",
        usage="turnkey mcp add NAME [options] -- COMMAND [ARGS...]\n"
              "       turnkey mcp add NAME --url URL [options]")
    m_add.add_argument("name", help="1 to 32 letters, digits and '-'; its tools are called "
                                    "mcp__NAME__TOOL")
    m_add.add_argument("argv", nargs="*", metavar="COMMAND",
                       help="the program to run and its arguments (after --)")
    m_add.add_argument("--url", default=None, help="a streamable HTTP server's URL")
    m_add.add_argument("--header-secret", action="append", default=[], metavar="HEADER=SECRET",
                       help="send HEADER with the value of a stored secret (store it with "
                            "`turnkey secret set SECRET`); may be repeated")
    m_add.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                       help="an environment variable for a stdio server; may be repeated")
    m_add.add_argument("--approval", choices=["ask", "trusted"], default=None,
                       help="ask before each call (the default) or run its tools without asking")
    m_add.add_argument("--no-sandbox", action="store_true",
                       help="run a stdio server outside the command sandbox")
    m_remove = m_sub.add_parser("remove", help="stop a server and delete it from config.toml")
    m_remove.add_argument("name")
    m_test = m_sub.add_parser("test", help="start (or restart) a server and list its tools; "
                                           "exits 1 when it fails")
    m_test.add_argument("name")


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> int:
    """A lifetime as people write it: seconds (`90`) or a number and a unit (`30m`, `2h`,
    `7d`, `1.5h`), as whole seconds; an argparse type."""
    word = text.strip().lower()
    unit = DURATION_UNITS.get(word[-1:], 0)
    number = word[:-1] if unit else word
    unit = unit or 1
    try:
        seconds = float(number) * unit
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 1):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a lifetime: write seconds or a number with s, m, h or d "
            "(90, 30m, 2h, 7d), at least one second")
    return round(seconds)


def _token_parser(sub: Any) -> None:
    t = sub.add_parser("token", help="pair another computer: create, list, rescope or revoke "
                                     "its tokens")
    t_sub = t.add_subparsers(dest="action", required=True)
    create = t_sub.add_parser("create", help="mint a token and print its connection string "
                                             "(shown only once)")
    create.add_argument("--scopes", required=True,
                        help="comma-separated, from read, submit, approve, admin "
                             "(e.g. read,submit,approve)")
    create.add_argument("--label", required=True, help="a name for people, e.g. laptop")
    create.add_argument("--expires-in", type=duration_s, default=None, metavar="DURATION",
                        help="the token stops working after this long: seconds, or 30m, 2h, "
                             "7d (default: until revoked)")
    create.add_argument("--host", default=None,
                        help="the name or address the other computer reaches this one at "
                             "(default: where the backend listens)")
    create.add_argument("--port", type=int, default=None,
                        help="the port it reaches (default: the backend's own)")
    t_sub.add_parser("list", help="every token: its scopes, label, and whether it is revoked "
                                  "or expires")
    scopes = t_sub.add_parser("scopes", help="give a token other scopes; its connections close "
                                             "at once and reconnect with them")
    scopes.add_argument("token_id")
    scopes.add_argument("scopes", help="comma-separated, from read, submit, approve, admin")
    revoke = t_sub.add_parser("revoke", help="revoke a token; its connections close at once")
    revoke.add_argument("token_id")


def _schedule_parser(sub: Any) -> None:
    sc = sub.add_parser("schedule", help="prompts sent later, once or repeatedly: create, list, "
                                         "update, delete")
    sc_sub = sc.add_subparsers(dest="action", required=True)
    create = sc_sub.add_parser(
        "create", help="schedule TEXT in a session, or in a new session at each run",
        usage='turnkey schedule create (--session ID | --new [--cwd DIR]) '
              '(--cron "0 9 * * 1-5" | --at ISO) [--timezone ZONE] [--missed skip] TEXT')
    where = create.add_mutually_exclusive_group(required=True)
    where.add_argument("--session", default=None, help="run in this session id")
    where.add_argument("--new", action="store_true", help="start a new session at each run")
    create.add_argument("--cwd", type=Path, default=None,
                        help="with --new: the new session's folder (default: here)")
    create.add_argument("--title", default=None, help="with --new: the new session's title")
    create.add_argument("--model", default=None, help="with --new: the new session's model")
    _timing_options(create, required=True)
    create.add_argument("text", help="the prompt to send")
    sc_sub.add_parser("list", help="every schedule: when it runs next, and its last run")
    update = sc_sub.add_parser("update", help="change a schedule; left-out options stay")
    update.add_argument("schedule_id")
    on_off = update.add_mutually_exclusive_group()
    on_off.add_argument("--enable", dest="enabled", action="store_true", default=None)
    on_off.add_argument("--disable", dest="enabled", action="store_false")
    update.add_argument("--text", default=None, help="the new prompt")
    _timing_options(update, required=False)
    delete = sc_sub.add_parser("delete", help="delete a schedule (its past runs' sessions stay)")
    delete.add_argument("schedule_id")


def _timing_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    when = parser.add_mutually_exclusive_group(required=required)
    when.add_argument("--cron", default=None,
                      help='repeat: minute hour day month weekday, e.g. "0 9 * * 1-5"')
    when.add_argument("--at", default=None,
                      help="once, at an ISO 8601 time, e.g. 2026-12-24T18:00 (in --timezone)")
    parser.add_argument("--timezone", default=None,
                        help="an IANA zone, e.g. Europe/Paris (default: the computer's)")
    parser.add_argument("--missed", choices=["run_once", "skip"], default=None,
                        help="runs missed while the computer was off: run the latest once "
                             "(default) or skip them")
def _memory_parser(sub: Any) -> None:
    m = sub.add_parser("memory", help="what the agent remembers: show, set or clear its notes")
    m_sub = m.add_subparsers(dest="action", required=True)
    m_sub.add_parser("show", help="both notebooks (user, environment) with their usage")
    m_set = m_sub.add_parser("set", help="replace a notebook with a file's text (- reads stdin); "
                                         "one entry per line")
    m_set.add_argument("target", choices=["user", "environment"])
    m_set.add_argument("file", help="a text file, or - for stdin")
    m_clear = m_sub.add_parser("clear", help="empty a notebook")
    m_clear.add_argument("target", choices=["user", "environment"])


def _skill_parser(sub: Any) -> None:
    s = sub.add_parser("skill", help="the agent's skills: list, show or remove one")
    s_sub = s.add_subparsers(dest="action", required=True)
    listing = s_sub.add_parser("list", help="the skills found, enabled or not, and any problem")
    listing.add_argument("--session", default=None, metavar="ID",
                         help="also the skills of this session's folder (.agents/skills)")
    for action, words in (("show", "a skill's description, instructions and files"),
                          ("rm", "remove a skill's folder")):
        one = s_sub.add_parser(action, help=words)
        one.add_argument("name")
        one.add_argument("--session", default=None, metavar="ID",
                         help="with --project: the session whose folder holds it")
        one.add_argument("--project", action="store_true",
                         help="the project's skill (.agents/skills of --session's folder), "
                              "not the user's")


def _store_parser(sub: Any) -> None:
    st = sub.add_parser("store", help="where sessions are kept: copy them into PostgreSQL")
    st_sub = st.add_subparsers(dest="action", required=True)
    m = st_sub.add_parser(
        "migrate", help="copy this folder's sessions (state.db) into an empty PostgreSQL "
                        "database and check the copy; exits 0 only when every count matches")
    m.add_argument("--to", required=True, metavar="DSN",
                   help="postgresql://USER@HOST:PORT/DATABASE; keep a password out of it "
                        "(~/.pgpass or PGPASSWORD)")
    m.add_argument("--data-dir", dest="store_data_dir", type=Path, default=None, metavar="DIR",
                   help="the data folder to copy (default: turnkey's --data-dir)")
    m.add_argument("--switch", action="store_true",
                   help="then set store in config.toml to it (a copy of the old file is kept)")


def memory_text(args: argparse.Namespace) -> str | None:
    """`turnkey memory set`'s text from its file or stdin ("" for clear); None when the file
    cannot be read (said on stderr)."""
    if args.action != "set":
        return ""
    if args.file == "-":
        return sys.stdin.read()
    try:
        return Path(args.file).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"turnkey: cannot read {args.file}: {exc}", file=sys.stderr)
        return None


def mcp_table(args: argparse.Namespace) -> dict[str, Any] | str:
    """`turnkey mcp add`'s options as a `[mcp.servers.NAME]` table, or what is wrong with them."""
    if bool(args.argv) == bool(args.url):
        return "give either a command after -- (a stdio server) or --url URL (an HTTP server)"
    table: dict[str, Any] = {"url": args.url} if args.url else {"command": list(args.argv)}
    for option, key in (("header_secret", "header_secrets"), ("env", "env")):
        pairs: dict[str, str] = {}
        for item in getattr(args, option):
            name, eq, value = item.partition("=")
            if not eq or not name.strip() or not value:
                flag = "--" + option.replace("_", "-")
                return f"{flag} takes NAME=VALUE, not {item!r}"
            pairs[name.strip()] = value
        if pairs:
            table[key] = pairs
    if args.approval:
        table["approval"] = args.approval
    if args.no_sandbox:
        table["sandbox"] = False
    return table


def _remote(args: argparse.Namespace) -> RemoteTarget | str | None:
    """The --remote (or $TURNKEY_REMOTE) target, None for this computer's backend, or what
    is wrong with it.  The environment keeps the token out of `ps`."""
    text = args.remote if args.remote is not None else os.environ.get("TURNKEY_REMOTE", "")
    if not text:
        return None
    if args.command not in REMOTE_COMMANDS:
        return f"--remote works with the app, chat, sessions and backends, not {args.command}"
    from shared.remote import BadConnectionString, parse

    try:
        return parse(text)
    except BadConnectionString as exc:
        return f"--remote: {exc}"


def _remote_command(args: argparse.Namespace, data_dir: Path, remote: RemoteTarget,
                    files: list[Attached]) -> int:
    """chat, sessions and backends against a backend on another computer: nothing starts
    here, and a new session's folder is the remote backend's default unless --cwd names one
    there."""
    from desktop import commands

    route = commands.Route(data_dir, remote=remote)
    if args.command == "sessions":
        return _end(_run(commands.sessions(route, args.limit)))
    if args.command == "backends":
        from desktop import fleet_commands

        return _end(_run(fleet_commands.run(route, args)))
    return _end(_run(commands.chat(route, args.session, args.text, args.cwd, steer=args.steer,
                                   files=files)))


def _client_command(args: argparse.Namespace, data_dir: Path) -> int:
    """chat, sessions, backends, secret set, provider test, mcp, memory: each a client of the
    backend."""
    value = ""
    remote = _remote(args) if args.command in REMOTE_COMMANDS or args.remote else None
    if isinstance(remote, str):
        print(f"turnkey: {remote}", file=sys.stderr)
        return 2
    if args.command == "chat" and args.steer and (args.session is None or args.text is None):
        print("turnkey: chat --steer needs --session ID and the TEXT to add to the turn "
              "running there", file=sys.stderr)
        return 2
    files: list[Attached] = []
    if args.command == "chat" and args.attach:
        attached = read_attachments(args.attach, args.text)
        if isinstance(attached, str):
            print(f"turnkey: {attached}", file=sys.stderr)
            return 2
        files = attached
    if args.command == "secret":
        value = read_secret(args.name)
        if not value.strip():
            print("turnkey: no value given (nothing on stdin)", file=sys.stderr)
            return 2
    table: dict[str, Any] = {}
    if args.command == "mcp" and args.action == "add":
        made = mcp_table(args)
        if isinstance(made, str):
            print(f"turnkey: {made}", file=sys.stderr)
            return 2
        table = made
    if remote is not None:
        return _remote_command(args, data_dir, remote, files)
    memory = ""
    if args.command == "memory":
        read = memory_text(args)
        if read is None:
            return 2
        memory = read
    starting = _start_early(data_dir)
    from desktop import commands  # the client stack, loading while the backend starts

    route = commands.Route(data_dir, starting)
    if args.command == "memory":
        if args.action == "show":
            return _end(_run(commands.memory_show(route)))
        return _end(_run(commands.memory_set(route, args.target, memory)))

    if args.command == "chat":
        cwd = (args.cwd or Path.cwd()).expanduser().resolve()
        return _end(_run(commands.chat(route, args.session, args.text, cwd, steer=args.steer,
                                       files=files)))
    if args.command == "sessions":
        return _end(_run(commands.sessions(route, args.limit)))
    if args.command == "secret":
        return _end(_run(commands.secret_set(route, args.name, value)))
    if args.command == "mcp":
        if args.action == "list":
            return _end(_run(commands.mcp_list(route, args.name, args.tools)))
        if args.action == "add":
            return _end(_run(commands.mcp_add(route, args.name, table)))
        if args.action == "remove":
            return _end(_run(commands.mcp_remove(route, args.name)))
        return _end(_run(commands.mcp_test(route, args.name)))
    if args.command == "skill":
        from desktop import skill_commands

        return _end(_run(skill_commands.run(route, args)))
    if args.command == "token":
        from desktop import token_commands

        return _end(_run(token_commands.run(route, args)))
    if args.command == "schedule":
        from desktop import schedule_commands

        return _end(_run(schedule_commands.run(route, args)))
    if args.command == "backends":
        from desktop import fleet_commands

        return _end(_run(fleet_commands.run(route, args)))
    return _end(_run(commands.provider_test(route, args.name)))


def _end(status: int) -> int:
    """Ends the process now with `status`, its output flushed: the interpreter's teardown
    (freeing asyncio, websockets, msgspec and the rest) would add ~20 ms to every command on
    2 cores, and nothing of this process is left to close (the connection and the loop are
    closed; a backend it started is detached).  Returns only if stdout is a broken pipe,
    for the caller's handling of it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        return status
    os._exit(status)


def _start_early(data_dir: Path) -> subprocess.Popen[bytes] | None:
    """The folder's backend, started now when none runs (the command waits for its READY
    later).  None when backend.json names a live process: the command connects to it, and
    starts a backend only if that one does not answer."""
    return None if running(data_dir) is not None else spawn(data_dir)


def _backend(parser: argparse.ArgumentParser, args: argparse.Namespace, data_dir: Path) -> int:
    if args.action == "serve":
        # The backend process itself: the app starts it this way, and in the bundled app
        # this executable is the only Python there is.  A --data-dir after `serve` wins.
        from backend.__main__ import main as serve

        return serve(["serve", "--data-dir", str(data_dir), *args.serve_args])
    if args.serve_args:
        parser.error(f"backend {args.action} takes no options: {' '.join(args.serve_args)}")
    from desktop import commands

    return _run(commands.backend(data_dir, args.action))


def _store(args: argparse.Namespace, data_dir: Path) -> int:
    """`turnkey store migrate`: the backend's own command, run in this process (as `backend
    serve` is), with no backend running: it refuses while one runs on the folder."""
    if args.remote:
        print("turnkey: --remote works with the app, chat and sessions, not store",
              file=sys.stderr)
        return 2
    folder = (args.store_data_dir or data_dir).expanduser().resolve()
    from backend.__main__ import main as backend_main

    return backend_main(["store-migrate", "--data-dir", str(folder), "--to", args.to,
                         *(["--switch"] if args.switch else [])])


def _run(command: Coroutine[Any, Any, int]) -> int:
    import asyncio  # not at the top: see the module's docstring

    return asyncio.run(command)

if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())

"""What the backend builds after READY (`backend/app.py`, `Backend._build`): the sandbox's users,
the executor, compressor, MCP pool, runner, authority, schedules, doors and the services the
methods call.

Importing this module loads most of the backend (the turn, its tools, the providers' base,
PIL for attachments, the doors): about two thirds of the start-up's imports.  `app.py`
imports it in a thread after READY, so a client's connect and `initialize` are answered
meanwhile; every other call waits for the build (`backend/server/gate.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backend import wire
from backend.authority.attachments import Attachments
from backend.authority.branches import Branches
from backend.authority.compaction import Compaction
from backend.authority.delegate import ChildSessions
from backend.authority.fleet import Fleet
from backend.authority.questions import Questions
from backend.authority.queue import SessionAuthority
from backend.authority.reviews import Reviews
from backend.authority.schedule_book import ScheduleBook
from backend.authority.schedules import Scheduler
from backend.authority.sessions import SessionService
from backend.authority.takeover import INTERRUPT, Takeover, interrupt_anywhere
from backend.compress.compressor import Compressor
from backend.doors.manager import Doors
from backend.doors.service import DoorService
from backend.mcp.pool import McpPool
from backend.mcp.service import McpService
from backend.providers.service import ProviderService
from backend.server.auth import Authenticator
from backend.server.loopwatch import BackendStats
from backend.server.methods import Methods
from backend.server.services import Services
from backend.store.db import POSTGRESQL
from backend.store.signals import Signals
from backend.tools import registry, sandbox
from backend.tools.approvals import Approvals
from backend.tools.checkpoints import Checkpoints
from backend.tools.executor import Executor
from backend.tools.hooks import HookRunner
from backend.tools.notebooks import Notebooks
from backend.tools.procs import ProcessTable
from backend.tools.skillbook import Skillbook
from backend.turn.runner import TurnRunner, tool_env

if TYPE_CHECKING:
    from backend.app import Backend


def build(backend: Backend, box: sandbox.Sandbox, auth: Authenticator,
          signals: Signals | None) -> Methods:
    """Builds the parts a turn needs onto `backend` and returns the methods over them.  Starts
    nothing: `Backend._build` starts the drainers, the scheduler and the rest in order."""
    db, config = backend.db, backend.config
    approvals = Approvals(db, config, backend.epoch)
    checkpoints = Checkpoints(db, backend.data_dir)
    registry.use_sandbox(box)
    registry.MEMORY.changed = backend.memory_changed
    registry.SKILL_MANAGE.changed = backend.skills_changed
    procs = ProcessTable(backend.data_dir)
    procs.kill_orphans()  # before the drainers start: a crashed turn's commands stop here
    executor = Executor(db, approvals, checkpoints, backend.data_dir, procs)
    compressor = Compressor(db, config, backend.providers, backend.epoch)
    backend.mcp = McpPool(config, backend.secrets, box, backend.data_dir, backend.mcp_status)
    hooks = HookRunner(box, procs, lambda: tool_env(config))
    runner = TurnRunner(db, config, backend.providers, executor, compressor, backend.mcp,
                        hooks=hooks)
    backend.authority = authority = SessionAuthority(db, runner, backend.epoch)
    backend.attachments = Attachments(db, backend.data_dir / "attachments")
    backend.scheduler = Scheduler(db, authority, runner.default_model)
    children = ChildSessions(db, authority, executor, config)
    registry.use_delegator(children)
    backend.questions = questions = Questions(db, config, authority)
    registry.use_asker(questions)
    backend.doors = Doors(db, authority, approvals, questions, backend.secrets,
                          runner.default_model,
                          lambda sid: interrupt_anywhere(db, authority, sid),
                          backend.door_state, backend.attachments)
    # The store's reports of changed sessions and schedules become their broadcasts here.
    db.publisher = wire.announcing(_both(backend.hub.publish, children.observe,
                                         approvals.observe, questions.observe,
                                         backend.doors.observe))
    if db.dialect == POSTGRESQL:
        assert signals is not None
        backend.takeover = Takeover(db, authority, backend.epoch, lambda: config.config,
                                    backend.declared_dead, questions.poke)
        signals.on(INTERRUPT, backend.takeover.on_signal)  # another backend's interrupt
    services = _services(backend, authority, compressor, approvals, checkpoints, auth, procs, box,
                         runner.default_model)
    return Methods(services, backend.hub, backend.epoch, backend.request_stop_soon)


def _services(backend: Backend, authority: SessionAuthority, compressor: Compressor,
              approvals: Approvals, checkpoints: Checkpoints, auth: Authenticator,
              procs: ProcessTable, box: sandbox.Sandbox,
              default_model: Callable[[], str]) -> Services:
    """What the methods call, each service over the parts it owns."""
    assert backend.mcp is not None
    assert backend.scheduler is not None
    assert backend.attachments is not None
    assert backend.questions is not None
    db, config = backend.db, backend.config
    providers = ProviderService(config, backend.secrets, backend.providers)
    sessions = SessionService(db, authority, checkpoints, default_model,
                              lambda: providers.listing().providers)
    return Services(
        config=config, sessions=sessions,
        compaction=Compaction(sessions, compressor, backend.providers, config, backend.mcp),
        authority=authority, attachments=backend.attachments,
        branches=Branches(db, authority, checkpoints),
        approvals=approvals, questions=backend.questions,
        schedules=ScheduleBook(db, backend.scheduler.wake),
        providers=providers,
        mcp=McpService(backend.mcp, config),
        memory=Notebooks(config.path.parent),  # the data folder: config.toml's
        reviews=Reviews(db, config.path.parent, backend.memory_changed, backend.skills_changed),
        skills=Skillbook(db, config.path.parent, backend.skills_changed),
        secrets=backend.secrets, tokens=auth, doors=backend.doors,
        door_service=DoorService(config, backend.secrets, backend.doors), sandbox=box,
        procs=procs,
        stats=BackendStats(backend.loop_watch, backend.gc_watch, db.holds),
        fleet=Fleet(db, backend.epoch, lambda: config.config, backend.started_at),
    )


def _both(first: Callable[[Any], None], *then: Callable[[Any], None]) -> Callable[[Any], None]:
    """A publisher that hands each committed item to clients, then to the waiters (sub-agents,
    approvals answered through another backend)."""
    def publish(item: Any) -> None:
        first(item)
        for observe in then:
            observe(item)
    return publish


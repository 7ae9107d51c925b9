"""The services the methods call, built once at start-up (`backend/app.py`) and handed to
`Methods` together: each owns its package's rules and transactions."""

from __future__ import annotations

from dataclasses import dataclass

from backend.authority.attachments import Attachments
from backend.authority.branches import Branches
from backend.authority.compaction import Compaction
from backend.authority.fleet import Fleet
from backend.authority.questions import Questions
from backend.authority.queue import SessionAuthority
from backend.authority.reviews import Reviews
from backend.authority.schedule_book import ScheduleBook
from backend.authority.sessions import SessionService
from backend.config import ConfigFile
from backend.doors.manager import Doors
from backend.doors.service import DoorService
from backend.mcp.service import McpService
from backend.providers.service import ProviderService
from backend.secrets import Secrets
from backend.server.auth import Authenticator
from backend.server.loopwatch import BackendStats
from backend.tools.approvals import Approvals
from backend.tools.notebooks import Notebooks
from backend.tools.procs import ProcessTable
from backend.tools.sandbox import Sandbox
from backend.tools.skillbook import Skillbook


@dataclass(frozen=True)
class Services:
    config: ConfigFile
    sessions: SessionService  # sessions, transcripts, replay, receipts, pending approvals
    compaction: Compaction
    authority: SessionAuthority  # prompts in, cancels and resolves
    attachments: Attachments  # files sent with prompts: uploads, reads, garbage
    branches: Branches  # a prompt's answers shown, sessions forked at a prompt
    approvals: Approvals  # answers
    questions: Questions  # the clarify tool's questions: listed, answered
    schedules: ScheduleBook
    providers: ProviderService
    mcp: McpService
    memory: Notebooks
    reviews: Reviews  # review.undo
    skills: Skillbook  # skill.list, get, set_enabled, delete
    secrets: Secrets
    tokens: Authenticator
    doors: Doors | None
    door_service: DoorService  # door.test and door.set: a door's settings form
    sandbox: Sandbox  # what initialize reports of it
    procs: ProcessTable  # the tool calls' process groups, which may never loosen config
    stats: BackendStats
    fleet: Fleet  # the backends on the store

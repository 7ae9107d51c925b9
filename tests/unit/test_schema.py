"""The shipped schema and PROTOCOL.md's methods and events tables are generated from the typed
definitions, and the backend's handler table is METHODS itself; drift fails here."""

import inspect
import typing

import pytest

from backend.server.connection import Reply
from backend.server.methods import Methods, handler_name
from shared import schema
from shared.methods import METHODS
from shared.protocol import (
    CWD_MAX,
    EVENT_NAMES,
    EVENT_SPECS,
    EVENTS,
    ID_MAX,
    MODEL_MAX,
    TITLE_MAX,
    AdmissionEvent,
    Receipt,
    event_name,
)


def test_schema_file_matches_the_code() -> None:
    assert schema.SCHEMA_PATH.read_text() == schema.render(), (
        "shared/protocol.schema.json is stale: run python -m shared.schema"
    )


def test_protocol_md_methods_table_matches_the_code() -> None:
    doc = schema.PROTOCOL_MD.read_text()
    assert schema.with_methods_table(doc) == doc, (
        "the methods table in shared/PROTOCOL.md is stale: run python -m shared.schema"
    )
    for name in METHODS:
        assert f"| `{name}` |" in doc


def test_every_method_has_a_handler_taking_its_params() -> None:
    for name, spec in METHODS.items():
        handler = getattr(Methods, handler_name(name), None)
        assert handler is not None, f"{name}: no Methods.{handler_name(name)}"
        hints = typing.get_type_hints(handler)
        params = list(inspect.signature(handler).parameters)[2]  # self, conn, params
        assert issubclass(spec.params, hints[params]), (
            f"{name}: the handler takes {hints[params].__name__}, the request is {spec.params.__name__}"
        )
        # Reply: a result with work to do after it is sent (its type is checked by dispatch).
        assert hints["return"] in (spec.result, Reply), f"{name}: returns {hints['return']}"


def test_schema_lists_every_method_and_event() -> None:
    built = schema.build()
    assert set(built["methods"]) == set(METHODS)
    assert set(built["events"]) == set(EVENTS)
    submit = built["components"]["schemas"]["PromptSubmit"]
    assert set(submit["required"]) == {"session_id", "request_id", "text"}
    assert submit["additionalProperties"] is False, "unknown params must be refused"


def test_schema_carries_the_string_bounds() -> None:
    schemas = schema.build()["components"]["schemas"]

    def max_length(params: str, field: str) -> int:
        prop = schemas[params]["properties"][field]
        [string] = [t for t in prop.get("anyOf", [prop]) if t.get("type") == "string"]
        return int(string["maxLength"])

    assert max_length("SessionCreate", "title") == TITLE_MAX
    assert max_length("SessionUpdate", "title") == TITLE_MAX
    assert max_length("SessionCreate", "model") == MODEL_MAX
    assert max_length("SessionUpdate", "model") == MODEL_MAX
    assert max_length("SessionCreate", "cwd") == CWD_MAX
    assert max_length("SessionGet", "session_id") == ID_MAX


def test_every_method_but_initialize_needs_a_scope() -> None:
    unscoped = [name for name, spec in METHODS.items() if spec.scope is None]
    assert unscoped == ["initialize"], "a method without a scope is open to every token"
    owner_only = [name for name, spec in METHODS.items() if spec.owner_only]
    assert owner_only == ["token.create", "token.update"], "minting and widening tokens"
    built = schema.build()["methods"]
    assert built["token.create"]["owner_only"] is True
    assert built["token.update"]["owner_only"] is True
    assert "owner_only" not in built["token.revoke"]


def test_protocol_md_events_table_matches_the_code() -> None:
    doc = schema.PROTOCOL_MD.read_text()
    assert schema.with_tables(doc) == doc, (
        "the events table in shared/PROTOCOL.md is stale: run python -m shared.schema"
    )
    for name in EVENTS:
        assert f"| `{name}` |" in doc


def test_each_event_struct_has_one_name() -> None:
    """The backend names an event from its struct (`event_name`): a struct in two rows would
    make that ambiguous, so two events with the same fields get a subclass each."""
    structs = [spec.data for spec in EVENT_SPECS]
    shared = sorted({s.__name__ for s in structs if structs.count(s) > 1})
    assert not shared, f"structs bound to more than one event: {shared}"
    assert len(EVENTS) == len(EVENT_SPECS), "an event name is listed twice"
    assert all(EVENT_NAMES[EVENTS[name]] == name for name in EVENTS)


def test_a_shared_base_names_no_event() -> None:
    with pytest.raises(TypeError, match="AdmissionEvent"):
        event_name(AdmissionEvent(receipt=Receipt(
            admission_id="a", session_id="s", request_id="r", status="queued", duplicate=False,
            created_at="t")))

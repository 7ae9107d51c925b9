"""The shipped schema is generated from the typed definitions; drift fails here."""

from shared import schema
from shared.protocol import EVENTS, METHODS


def test_schema_file_matches_the_code() -> None:
    assert schema.SCHEMA_PATH.read_text() == schema.render(), (
        "shared/protocol.schema.json is stale: run python -m shared.schema"
    )


def test_schema_lists_every_method_and_event() -> None:
    built = schema.build()
    assert set(built["methods"]) == set(METHODS)
    assert set(built["events"]) == set(EVENTS)
    submit = built["components"]["schemas"]["PromptSubmitParams"]
    assert set(submit["required"]) == {"session_id", "request_id", "text"}
    assert submit["additionalProperties"] is False, "unknown params must be refused"


def test_every_method_but_initialize_needs_a_scope() -> None:
    unscoped = [name for name, spec in METHODS.items() if spec.scope is None]
    assert unscoped == ["initialize"], "a method without a scope is open to every token"
    owner_only = [name for name, spec in METHODS.items() if spec.owner_only]
    assert owner_only == ["token.create"]
    built = schema.build()["methods"]
    assert built["token.create"]["owner_only"] is True
    assert "owner_only" not in built["token.revoke"]

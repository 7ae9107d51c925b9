"""The shipped schema is generated from the typed definitions; drift fails here."""

from shared import schema
from shared.protocol import CWD_MAX, EVENTS, ID_MAX, METHODS, MODEL_MAX, TITLE_MAX


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


def test_schema_carries_the_string_bounds() -> None:
    schemas = schema.build()["components"]["schemas"]

    def max_length(params: str, field: str) -> int:
        prop = schemas[params]["properties"][field]
        [string] = [t for t in prop.get("anyOf", [prop]) if t.get("type") == "string"]
        return int(string["maxLength"])

    assert max_length("SessionCreateParams", "title") == TITLE_MAX
    assert max_length("SessionUpdateParams", "title") == TITLE_MAX
    assert max_length("SessionCreateParams", "model") == MODEL_MAX
    assert max_length("SessionUpdateParams", "model") == MODEL_MAX
    assert max_length("SessionCreateParams", "cwd") == CWD_MAX
    assert max_length("SessionIdParams", "session_id") == ID_MAX


def test_every_method_but_initialize_needs_a_scope() -> None:
    unscoped = [name for name, spec in METHODS.items() if spec.scope is None]
    assert unscoped == ["initialize"], "a method without a scope is open to every token"
    owner_only = [name for name, spec in METHODS.items() if spec.owner_only]
    assert owner_only == ["token.create"]
    built = schema.build()["methods"]
    assert built["token.create"]["owner_only"] is True
    assert "owner_only" not in built["token.revoke"]

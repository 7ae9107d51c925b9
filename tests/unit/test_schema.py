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

"""OpenAPI import: operations become HTTP-tool drafts; broken documents are explained."""

from __future__ import annotations

import copy
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml
from django.core.exceptions import ValidationError

from mcp_app.executors import get_executor
from mcp_app.models import Tool
from mcp_app.models.fields import validate_input_schema
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.openapi import (
    MAX_REF_DEPTH,
    OpenApiDocument,
    OpenApiError,
    openapi_base_url,
    openapi_fetch,
    openapi_parse_text,
    openapi_read,
    openapi_tool_drafts,
    openapi_tools_create,
    unique_name,
)
from tests.support.openapi_docs import as_text, petstore
from tests.support.upstream import run_upstream

BASE = "https://eu.pets.example.com/v1"


def read(document: dict[str, Any]) -> OpenApiDocument:
    return openapi_read(openapi_parse_text(as_text(document)))


def drafts_by_key(document: OpenApiDocument, taken: set[str] | None = None) -> dict[str, Any]:
    keys = [operation.key for operation in document.operations]
    drafts = openapi_tool_drafts(
        document, keys=keys, base_url=openapi_base_url(document), taken_names=taken or set()
    )
    return dict(zip(keys, drafts, strict=True))


def test_petstore_lists_every_operation_with_server_variables_filled_in() -> None:
    document = read(petstore())

    assert document.title == "Petstore"
    assert document.servers == (BASE,)
    assert [operation.key for operation in document.operations] == [
        "GET /pets",
        "POST /pets",
        "GET /pets/{petId}",
        "PUT /pets/{petId}",
        "DELETE /pets/{petId}",
        "PATCH /pets/{petId}/tree",
    ]


def test_query_and_header_parameters_become_arguments_and_mappings() -> None:
    draft = drafts_by_key(read(petstore()))["GET /pets"]

    assert draft.name == "listPets"
    assert draft.title == "List all pets"
    assert draft.description == "List all pets"
    assert draft.read_only_hint is True
    # A $ref'd parameter is inlined; Accept (a request header) and the cookie are left out.
    assert draft.input_schema == {
        "type": "object",
        "properties": {
            "limit": {
                "type": "integer",
                "maximum": 100,
                "default": 20,
                "description": "How many items to return.",
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "X-Request-Id": {"type": "string", "description": "Correlates logs."},
        },
    }
    assert draft.config == {
        "method": "GET",
        "url": f"{BASE}/pets",
        "query": {"limit": "{limit}", "tags": "{tags}"},
        "headers": {"X-Request-Id": "{X-Request-Id}"},
    }


def test_a_body_alone_becomes_the_arguments_with_3_0_keywords_rewritten() -> None:
    draft = drafts_by_key(read(petstore()))["POST /pets"]

    assert draft.input_schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "weight": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["name"],
    }
    assert draft.config == {"method": "POST", "url": f"{BASE}/pets", "body": "arguments"}


def test_a_body_beside_parameters_is_one_argument_with_its_components_in_defs() -> None:
    draft = drafts_by_key(read(petstore()))["PUT /pets/{petId}"]

    new_pet = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "weight": {"type": "number", "exclusiveMinimum": 0},
        },
    }
    assert draft.input_schema == {
        "type": "object",
        "properties": {
            "petId": {"type": "integer", "minimum": 1},
            "dryRun": {"type": "boolean"},
            "body": {"$ref": "#/$defs/Pet"},
        },
        "required": ["petId", "body"],
        "$defs": {
            "Pet": {
                "allOf": [
                    {"$ref": "#/$defs/NewPet"},
                    {"type": "object", "properties": {"id": {"type": "integer"}}},
                ]
            },
            "NewPet": new_pet,
        },
    }
    assert draft.config == {
        "method": "PUT",
        "url": BASE + "/pets/{petId}",
        "query": {"dryRun": "{dryRun}"},
        "body": "json",
        "body_template": "{body}",
    }
    assert draft.idempotent_hint is True


def test_a_recursive_schema_stays_a_reference_and_keeps_its_media_type() -> None:
    draft = drafts_by_key(read(petstore()))["PATCH /pets/{petId}/tree"]

    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        },
    }
    assert draft.input_schema == {
        "type": "object",
        "properties": {"petId": {}, **tree["properties"]},
        "required": ["petId"],
        "$defs": {"Tree": tree},
    }
    assert draft.config == {
        "method": "PATCH",
        "url": BASE + "/pets/{petId}/tree",
        "headers": {"Content-Type": "application/merge-patch+json"},
        "body": "json",
        "body_template": {"name": "{name}", "children": "{children}"},
    }


def test_names_are_deduplicated_and_missing_operation_ids_come_from_method_and_path() -> None:
    drafts = drafts_by_key(read(petstore()), taken={"listPets"})

    assert {key: draft.name for key, draft in drafts.items()} == {
        "GET /pets": "listPets_2",
        "POST /pets": "createPet",
        "GET /pets/{petId}": "showPetById",
        "PUT /pets/{petId}": "updatePet",
        "DELETE /pets/{petId}": "delete_pets_petId",
        "PATCH /pets/{petId}/tree": "showPetById_2",
    }
    assert drafts["DELETE /pets/{petId}"].description == "DELETE /pets/{petId}"
    assert drafts["GET /pets/{petId}"].description == "Info for a specific pet."


def test_every_draft_is_a_valid_http_tool() -> None:
    for draft in drafts_by_key(read(petstore())).values():
        validate_input_schema(dict(draft.input_schema))
        get_executor("http").validate_config(draft.config)


def test_names_are_sanitised_and_stay_within_128_characters() -> None:
    document = petstore()
    document["paths"]["/pets"]["get"]["operationId"] = "list pets/by tag!" + "x" * 200

    name = drafts_by_key(read(document), taken={"list_pets_by_tag_" + "x" * 111})["GET /pets"].name

    assert name == "list_pets_by_tag_" + "x" * 109 + "_2"
    assert unique_name("a", {"a", "a_2"}) == "a_3"


def test_parameters_sharing_a_name_across_locations_get_distinct_arguments() -> None:
    document = petstore()
    document["paths"]["/pets/{petId}"]["get"]["parameters"] = [
        {"name": "petId", "in": "query", "schema": {"type": "string"}}
    ]

    draft = drafts_by_key(read(document))["GET /pets/{petId}"]

    assert list(draft.input_schema["properties"]) == ["petId", "query_petId"]
    assert draft.config["query"] == {"petId": "{query_petId}"}
    assert draft.config["url"] == BASE + "/pets/{petId}"


def test_an_operator_base_url_replaces_the_documents_server() -> None:
    document = read(petstore())

    assert openapi_base_url(document, "http://127.0.0.1:8080/api/") == "http://127.0.0.1:8080/api"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "Invalid JSON at line 1 column 2: Expecting property name enclosed in double"),
        ("openapi: [3.0.0\n", "Invalid YAML at line 2 column 1: expected ',' or ']'"),
        ("[1, 2]", "The document must be an object with an openapi field."),
        ("- 1\n- 2\n", "The document must be an object with an openapi field."),
        ("!!python/object/apply:os.system ['true']", "Invalid YAML at line 1 column 1"),
        ('{"openapi": NaN}', "Invalid JSON: NaN is not valid JSON."),
        ("  ", "The document is empty."),
    ],
)
def test_text_that_is_not_an_object_is_refused(text: str, message: str) -> None:
    with pytest.raises(OpenApiError) as caught:
        openapi_parse_text(text)

    assert caught.value.message.startswith(message)


def mutated(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(petstore())
    change(document)
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"swagger": "2.0", "paths": {}},
            "This is a Swagger 2.0 document; only OpenAPI 3.x can be imported",
        ),
        ({"openapi": "4.0.0"}, "Not an OpenAPI 3.x document"),
        ({"openapi": "3.1.0", "paths": {}}, "The document has no operations to import."),
        ({"openapi": "3.1.0"}, "The document has no operations to import."),
        (
            mutated(lambda d: d["components"]["parameters"].clear()),
            "GET /pets: $ref '#/components/parameters/limit' points to nothing in the document.",
        ),
        (
            mutated(
                lambda d: d["paths"]["/pets"]["get"]["parameters"].append(
                    {"$ref": "https://example.com/params.json#/limit"}
                )
            ),
            "GET /pets: $ref 'https://example.com/params.json#/limit' points outside the document",
        ),
        (
            mutated(
                lambda d: d["components"]["parameters"].update(
                    {"limit": {"$ref": "#/components/parameters/limit"}}
                )
            ),
            "GET /pets: $ref '#/components/parameters/limit' refers to itself.",
        ),
        (
            mutated(lambda d: d["components"]["schemas"]["Pet"]["allOf"].append({"type": 7})),
            "PUT /pets/{petId}: the input schema built from it is not valid JSON Schema "
            "2020-12 at /$defs/Pet/allOf/2/type: 7 is not valid under any of the given schemas",
        ),
    ],
    ids=[
        "swagger-2",
        "openapi-4",
        "no-paths",
        "paths-missing",
        "dangling-ref",
        "remote-ref",
        "self-ref",
        "bad-schema",
    ],  # fmt: skip
)
def test_invalid_documents_are_refused_with_a_clear_message(
    document: dict[str, Any], message: str
) -> None:
    with pytest.raises(OpenApiError) as caught:
        read(document)

    assert caught.value.message.startswith(message), caught.value.message


def test_a_long_chain_of_refs_is_cut_at_the_depth_bound() -> None:
    document = petstore()
    parameters = document["components"]["parameters"]
    for index in range(MAX_REF_DEPTH + 1):
        parameters[f"p{index}"] = {"$ref": f"#/components/parameters/p{index + 1}"}
    parameters[f"p{MAX_REF_DEPTH + 1}"] = parameters["limit"]
    document["paths"]["/pets"]["get"]["parameters"][0] = {"$ref": "#/components/parameters/p0"}

    with pytest.raises(OpenApiError) as caught:
        read(document)

    assert caught.value.message == (
        f"GET /pets: $refs are nested more than {MAX_REF_DEPTH} deep at parameters."
    )


@pytest.mark.parametrize(
    ("servers", "override", "message"),
    [
        (
            [{"url": "ftp://files.example.com"}],
            "",
            "The server URL 'ftp://files.example.com' is not",
        ),
        ([{"url": "/v1"}], "", "The server URL '/v1' is not an http(s) URL with a host"),
        ([], "", "The document names no server: enter the base URL of the API."),
        (
            [{"url": "https://{tenant}.example.com"}],
            "",
            "The server URL 'https://{tenant}.example.com' has a variable without a default",
        ),
        ([], "javascript:alert(1)", "The server URL 'javascript:alert(1)' is not"),
    ],
)
def test_a_base_url_that_is_not_http_is_refused(
    servers: list[Any], override: str, message: str
) -> None:
    document = petstore()
    document["servers"] = servers

    with pytest.raises(OpenApiError) as caught:
        openapi_base_url(read(document), override)

    assert caught.value.message.startswith(message)


@pytest.mark.django_db
def test_import_creates_disabled_tools_named_around_the_endpoints_tools() -> None:
    endpoint = endpoint_create(slug="pets")
    tool_create(
        name="listPets",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "hi"},
        description="Already here.",
        endpoints=[endpoint],
    )

    tools = openapi_tools_create(
        document=read(petstore()),
        keys=["GET /pets", "GET /pets/{petId}"],
        endpoints=[endpoint],
        credential=None,
        allow_networks=["10.0.0.0/8"],
    )

    assert [(tool.name, tool.kind, tool.enabled) for tool in tools] == [
        ("listPets_2", "http", False),
        ("showPetById", "http", False),
    ]
    assert tools[1].config == {
        "method": "GET",
        "url": BASE + "/pets/{petId}",
        "allow_networks": ["10.0.0.0/8"],
    }
    assert set(endpoint.tools.values_list("name", flat=True)) == {
        "listPets",
        "listPets_2",
        "showPetById",
    }


@pytest.mark.django_db
def test_import_with_an_invalid_allow_list_creates_nothing() -> None:
    endpoint = endpoint_create(slug="pets")

    with pytest.raises(ValidationError) as caught:
        openapi_tools_create(
            document=read(petstore()),
            keys=["GET /pets", "GET /pets/{petId}"],
            endpoints=[endpoint],
            base_url="https://api.example.com",
            allow_networks=["everything"],
        )

    assert caught.value.message_dict["config"][0].startswith("allow_networks: ")

    assert not Tool.objects.exists()


def test_a_yaml_document_reads_as_its_json_does() -> None:
    assert openapi_read(openapi_parse_text(yaml.safe_dump(petstore()))) == read(petstore())


OPENAPI_3_1_YAML = """\
openapi: 3.1.0
info: {title: Events, version: 2024-05-01}
servers: [{url: 'https://events.example.com'}]
paths:
  /events:
    post:
      operationId: createEvent
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Event'}
components:
  schemas:
    Event:
      type: object
      required: [name]
      properties:
        name: {type: string, examples: [launch]}
        seats: {type: integer, exclusiveMinimum: 0}
        note: {type: [string, 'null']}
        kind: {const: public}
        starts: {type: string, format: date, default: 2024-05-01}
"""


def test_an_openapi_3_1_yaml_document_keeps_its_2020_12_keywords() -> None:
    document = openapi_read(openapi_parse_text(OPENAPI_3_1_YAML))

    (operation,) = document.operations
    assert document.openapi_version == "3.1.0"
    properties = operation.input_schema["properties"]
    assert properties["seats"] == {"type": "integer", "exclusiveMinimum": 0}
    assert properties["note"] == {"type": ["string", "null"]}
    assert properties["kind"] == {"const": "public"}
    # YAML reads an unquoted date as a date: it arrives as the JSON text it was.
    assert properties["starts"]["default"] == "2024-05-01"
    validate_input_schema(operation.input_schema)


def test_a_yaml_alias_bomb_is_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        previous = chr(ord("a") + level - 1)
        name = chr(ord("a") + level)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    with pytest.raises(OpenApiError) as caught:
        openapi_parse_text("\n".join(lines))

    assert caught.value.message == "The YAML document expands to more than 500,000 values."


def serve_once(body: bytes) -> Any:
    """A loopback server answering every GET with ``body``; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/yaml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def test_a_url_is_fetched_through_the_ssrf_guard(settings: Any) -> None:
    server = serve_once(OPENAPI_3_1_YAML.encode())
    url = f"http://127.0.0.1:{server.server_address[1]}/openapi.yaml"
    try:
        with pytest.raises(OpenApiError) as refused:
            openapi_fetch(url)
        settings.MCP_HTTP_ALLOWED_NETWORKS = "127.0.0.0/8"
        fetched = openapi_fetch(url)
    finally:
        server.shutdown()
        server.server_close()

    assert "127.0.0.1 are not allowed: it is not a public address" in refused.value.message
    assert openapi_read(openapi_parse_text(fetched)).operations[0].key == "POST /events"


def test_a_fetched_document_is_size_capped(settings: Any) -> None:
    settings.MCP_HTTP_ALLOWED_NETWORKS = "127.0.0.0/8"
    with run_upstream() as upstream, pytest.raises(OpenApiError) as caught:
        openapi_fetch(upstream.url("/large-chunked?bytes=3000000"))

    assert caught.value.message == "The document is larger than 2,000,000 bytes."


@pytest.mark.parametrize("url", ["ftp://example.com/a.yaml", "file:///etc/passwd", "no url"])
def test_only_http_urls_are_fetched(url: str) -> None:
    with pytest.raises(OpenApiError, match="Enter an http:// or https:// URL."):
        openapi_fetch(url)

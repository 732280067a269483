"""OpenAPI documents for the import tests: a petstore with $refs, and one aimed at the local
upstream (tests/support/upstream.py)."""

from __future__ import annotations

import json
from typing import Any


def petstore() -> dict[str, Any]:
    """A petstore-like OpenAPI 3.0 document.

    It has $refs to component schemas (one recursive), parameters and request bodies; path,
    query and header parameters; two operations sharing an operationId, one without any, and
    OpenAPI 3.0 keywords (nullable, boolean exclusiveMinimum) that 2020-12 spells otherwise.
    """
    return {
        "openapi": "3.0.3",
        "info": {"title": "Petstore", "version": "1.0.0"},
        "servers": [
            {
                "url": "https://{region}.pets.example.com/v1",
                "variables": {"region": {"default": "eu"}},
            }
        ],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List all pets",
                    "parameters": [
                        {"$ref": "#/components/parameters/limit"},
                        {
                            "name": "tags",
                            "in": "query",
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                        {
                            "name": "X-Request-Id",
                            "in": "header",
                            "description": "Correlates logs.",
                            "schema": {"type": "string"},
                        },
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "A list of pets."}},
                },
                "post": {
                    "operationId": "createPet",
                    "summary": "Create a pet",
                    "requestBody": {"$ref": "#/components/requestBodies/NewPet"},
                    "responses": {"201": {"description": "Created."}},
                },
            },
            "/pets/{petId}": {
                "parameters": [
                    {
                        "name": "petId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer", "minimum": 1},
                    }
                ],
                "get": {
                    "operationId": "showPetById",
                    "description": "Info for a specific pet.",
                    "responses": {"200": {"description": "The pet."}},
                },
                "put": {
                    "operationId": "updatePet",
                    "summary": "Replace a pet",
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "boolean"}}
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    },
                    "responses": {"200": {"description": "Replaced."}},
                },
                "delete": {"responses": {"204": {"description": "Deleted."}}},
            },
            "/pets/{petId}/tree": {
                "patch": {
                    "operationId": "showPetById",
                    "summary": "Graft a family tree",
                    "parameters": [
                        {"name": "petId", "in": "path", "required": True, "schema": {}},
                    ],
                    "requestBody": {
                        "content": {
                            "application/merge-patch+json": {
                                "schema": {"$ref": "#/components/schemas/Tree"}
                            }
                        }
                    },
                    "responses": {"200": {"description": "Grafted."}},
                },
            },
        },
        "components": {
            "parameters": {
                "limit": {
                    "name": "limit",
                    "in": "query",
                    "description": "How many items to return.",
                    "schema": {"type": "integer", "maximum": 100, "default": 20},
                }
            },
            "requestBodies": {
                "NewPet": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                    },
                }
            },
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "tag": {"type": "string", "nullable": True},
                        "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                    },
                },
                "Pet": {
                    "allOf": [
                        {"$ref": "#/components/schemas/NewPet"},
                        {"type": "object", "properties": {"id": {"type": "integer"}}},
                    ]
                },
                "Tree": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Tree"},
                        },
                    },
                },
            },
        },
    }


def upstream_api(base_url: str) -> dict[str, Any]:
    """An OpenAPI 3.1 document describing three paths of the local upstream server."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Local upstream", "version": "1"},
        "servers": [{"url": base_url}],
        "paths": {
            "/echo/items/{item}": {
                "get": {
                    "operationId": "getItem",
                    "summary": "Fetch an item",
                    "parameters": [
                        {
                            "name": "item",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {"name": "q", "in": "query", "schema": {"type": "string"}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "The echo."}},
                },
                "put": {
                    "operationId": "putItem",
                    "summary": "Store an item",
                    "parameters": [
                        {
                            "name": "item",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Item"}}
                        },
                    },
                    "responses": {"200": {"description": "The echo."}},
                },
            },
            "/echo/notes": {
                "post": {
                    "operationId": "createNote",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Note"}}
                        },
                    },
                    "responses": {"200": {"description": "The echo."}},
                }
            },
        },
        "components": {
            "schemas": {
                "Item": {
                    "type": "object",
                    "required": ["label"],
                    "properties": {"label": {"type": "string"}, "count": {"type": "integer"}},
                },
                "Note": {
                    "type": "object",
                    "required": ["text"],
                    "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}},
                },
            }
        },
    }


def as_text(document: Any) -> str:
    return json.dumps(document, indent=2)

"""Validates the running server's /openapi.json as OpenAPI 3.1 (openapi-spec-validator),
then checks what the validator cannot know: every operation has a summary, a tag, a
security requirement and an `x-engage-pattern`; every API-key operation names its
permission; the operator routes are tagged as such.

Usage: OPENAPI_URL=http://127.0.0.1:PORT/openapi.json python check.py
"""
import json
import os
import sys
import urllib.request

from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def main():
    url = os.environ["OPENAPI_URL"]
    with urllib.request.urlopen(url, timeout=30) as resp:
        if resp.status != 200:
            sys.exit(f"{url}: status {resp.status}")
        ctype = resp.headers.get("Content-Type", "")
        if not ctype.startswith("application/json"):
            sys.exit(f"{url}: Content-Type {ctype!r}")
        doc = json.load(resp)
    if not str(doc.get("openapi", "")).startswith("3.1."):
        sys.exit(f"not OpenAPI 3.1: openapi = {doc.get('openapi')!r}")
    validate(doc, cls=OpenAPIV31SpecValidator)

    problems = []
    operations = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            operations += 1
            name = f"{method.upper()} {path}"
            for field in ("summary", "operationId", "tags", "x-engage-pattern"):
                if not op.get(field):
                    problems.append(f"{name}: no {field}")
            if "security" not in op:
                problems.append(f"{name}: no security requirement")
            for req in op.get("security", []):
                if "apiKey" in req and (not req["apiKey"] or req["apiKey"] != [op.get("x-engage-permission")]):
                    problems.append(f"{name}: API key without its permission")
            if path.startswith("/_engage/") and op.get("tags") not in (["Engage operator"], ["Engage test kit"]):
                problems.append(f"{name}: an operator route not tagged 'Engage operator' or 'Engage test kit'")
    if problems:
        sys.exit("\n".join(problems))
    print(f"{url}: valid OpenAPI {doc['openapi']}, {len(doc['paths'])} paths, {operations} operations")


if __name__ == "__main__":
    main()

"""Schemathesis hooks for tests/openapi/fuzz.sh (SCHEMATHESIS_HOOKS=hooks).

Warehouse integrations are fuzzed like every operator route, but their source is
always a loopback one: just before a request is sent, in every phase, a `source`
the schema allows (`sqlite:/...`, `postgres://...`) is replaced by a PostgreSQL URL on
127.0.0.1's discard port. A scheduled or requested job then tries that address and
fails as a configuration error: nothing outside this machine is reached, and no
generated `sqlite:` path is opened. A source the schema does not allow (another
type, another scheme) is sent as generated, for the checks that it is refused.
"""
import schemathesis

LOOPBACK = "postgres://engage@127.0.0.1:9/warehouse"
INTEGRATIONS = {("POST", "/_engage/cdi/integrations"), ("PATCH", "/_engage/cdi/integrations/{id}")}
SCHEMES = ("sqlite:/", "postgres://", "postgresql://")


@schemathesis.hook
def before_call(ctx, case, kwargs):
    operation = case.operation
    if (operation.method.upper(), operation.path) not in INTEGRATIONS or not isinstance(case.body, dict):
        return
    source = case.body.get("source")
    if isinstance(source, str) and source.startswith(SCHEMES):
        case.body = dict(case.body, source=LOOPBACK)

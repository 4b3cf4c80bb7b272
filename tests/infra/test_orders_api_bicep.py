"""The Azure side of the public orders API (issue 33): the `requests` container, the app's right
to send to the orders queue, and that no HTTP function of the app takes a write without a key.

What each asserts is what an operator would check in the portal after `azd up`: the container's
partition key, ttl and indexing policy, the role assignment's scope, the app setting the code
reads, the functions' authorization levels.
"""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from shared.edge.requests import CONTAINER_NAME, NEVER_EXPIRES, PARTITION_KEY_PATH
from tests.infra.infra_support import INFRA, REPO, accessor, body, doc, int_literal

CONTAINER_TYPE = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"
ROLE_ASSIGNMENT_TYPE = "Microsoft.Authorization/roleAssignments"
# Azure Service Bus Data Sender (learn.microsoft.com/azure/role-based-access-control/built-in-roles/
# integration#azure-service-bus-data-sender).
SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"

# ---- the requests container --------------------------------------------------------------------


def test_the_requests_container_is_partitioned_by_order_with_item_ttl_and_no_index() -> None:
    """Partition key /orderId (each order's head and its Idempotency-Key records in one
    partition, for the edge's transactional batch), defaultTtl -1 (the records' own ttl counts,
    the heads never expire) and an indexing policy that indexes only the request completer's
    three fields: the edge itself only point-reads, and every indexed path costs RU on each
    write. Fails before issue 33's Bicep
    (no such container)."""
    containers = {
        name: resource
        for name, resource in doc("cosmos")["resources"].items()
        if resource["type"] == CONTAINER_TYPE
    }
    requests = body(containers["requestsContainer"])
    assert requests["parent"] == "database"  # the database the app's data role is assigned on
    resource = requests["properties"]["resource"]
    assert resource["id"] == requests["name"] == "requestsContainerName"
    assert resource["partitionKey"]["paths"] == [PARTITION_KEY_PATH] == ["/orderId"]
    assert resource["partitionKey"]["kind"] == "Hash"
    assert int_literal(resource["defaultTtl"]) == NEVER_EXPIRES == -1
    # The policy is the checked-in file (the same way the orders container loads its own).
    loaded = resource["indexingPolicy"]["function"]
    assert loaded["type"] == "load_json_content"
    assert loaded["parameters"]["file_path"] == "../requests-indexing.json"
    policy = json.loads((INFRA / "requests-indexing.json").read_text(encoding="utf-8"))
    assert policy["indexingMode"] == "consistent"
    assert policy["excludedPaths"] == [{"path": "/*"}]
    # Only what the request completer's query needs (tests/infra/test_completer_bicep.py).
    assert {p["path"] for p in policy["includedPaths"]} == {
        "/type/?",
        "/sent/?",
        "/startedAt/?",
    }
    # Throughput as the other containers: ordersOptions (autoscale when not serverless).
    assert requests["properties"]["options"] == "ordersOptions"
    assert body(containers["paymentsContainer"])["properties"]["options"] == "ordersOptions"


def test_the_app_reads_the_requests_container_name_from_the_deployed_container() -> None:
    """REQUESTS_CONTAINER, the setting the edge reads, carries the container cosmos.bicep
    deploys, named as the code names it. Fails before issue 33's Bicep (no setting)."""
    settings = body(doc("function")["resources"]["appSettings"])["properties"]["function"]
    assert settings["parameters"]["arg_1"]["REQUESTS_CONTAINER"] == "requestsContainerName"
    main = doc("main")["modules"]
    assert body(main["cosmos"])["params"]["requestsContainerName"] == CONTAINER_NAME
    assert accessor(body(main["functionApp"])["params"]["requestsContainerName"]) == (
        "cosmos",
        "outputs",
        "requestsContainerName",
    )
    outputs = doc("cosmos")["outputs"]
    assert accessor(outputs["requestsContainerName"]["value"]) == ("requestsContainer", "name")


# ---- sending to the orders queue ----------------------------------------------------------------


def _app_sender_scopes() -> dict[str, str]:
    """Each Data Sender assignment of the app's identity -> the type of the resource it is on."""
    rbac = doc("rbac")
    resources = rbac["resources"]
    scopes = {}
    for name, resource in resources.items():
        if resource["type"] != ROLE_ASSIGNMENT_TYPE:
            continue
        assignment = body(resource)
        if assignment["properties"]["principalId"] != "managedIdentityPrincipalId":
            continue
        role = assignment["properties"]["roleDefinitionId"]["function"]["parameters"]
        if rbac["variables"][role["resource_name_1"]]["value"] == SERVICE_BUS_DATA_SENDER:
            scopes[name] = resources[assignment["scope"]]["type"]
    return scopes


def test_the_app_may_send_to_the_orders_queue_and_the_topic_only() -> None:
    """The API hands each accepted request to the orders queue: Azure Service Bus Data Sender
    for the app's identity on that queue, not on the namespace (which would let it send to every
    entity). Fails before issue 33's Bicep (the app could only receive from the queue)."""
    assert _app_sender_scopes() == {
        "appQueueSender": "Microsoft.ServiceBus/namespaces/queues",
        "appTopicSender": "Microsoft.ServiceBus/namespaces/topics",
    }
    rbac = doc("rbac")
    sender = body(rbac["resources"]["appQueueSender"])
    assert sender["scope"] == "queue"
    assert body(rbac["resources"]["queue"]) == {"parent": "namespace", "name": "queueName"}
    assert "condition" not in rbac["resources"]["appQueueSender"]["config"]  # always granted


# ---- no anonymous write -------------------------------------------------------------------------

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ALL_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})
# The Python v2 model (azure-functions 2.3.0, azure/functions/decorators/function_app.py):
# FunctionApp(http_auth_level=AuthLevel.FUNCTION) is the default of every route() that names no
# auth_level; a Blueprint has none of its own (its routes take the level of the app that
# registers them, which this parse does not follow: such a route must name its level); route()
# without methods binds no method list, and the HTTP trigger then "responds to all HTTP methods"
# (Learn: Azure Functions HTTP trigger, configuration, methods).
DEFAULT_AUTH_LEVEL = "FUNCTION"


def _level(node: ast.expr) -> str:
    """``func.AuthLevel.ANONYMOUS``, ``AuthLevel.ANONYMOUS`` or ``"anonymous"`` -> ``ANONYMOUS``;
    anything else (a variable) -> ``UNKNOWN``, which the test refuses."""
    if isinstance(node, ast.Attribute):
        return node.attr.upper()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.upper()
    return "UNKNOWN"


def _methods(node: ast.expr | None) -> frozenset[str]:
    if node is None:
        return ALL_METHODS
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        found = set()
        for item in node.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.add(item.value.upper())
            elif isinstance(item, ast.Attribute):  # func.HttpMethod.POST
                found.add(item.attr.upper())
            else:
                return ALL_METHODS  # not a literal: assume the worst
        return frozenset(found)
    return ALL_METHODS


def http_routes(source: str) -> list[tuple[str, str, frozenset[str]]]:
    """Every ``@<app>.route(...)`` of a module: (route, auth level, methods), with the app's
    ``http_auth_level`` default applied where the decorator names none."""
    tree = ast.parse(source)
    app_default: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = node.value.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name == "FunctionApp":
                level = next(
                    (k.value for k in node.value.keywords if k.arg == "http_auth_level"), None
                )
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        app_default[target.id] = (
                            _level(level) if level is not None else DEFAULT_AUTH_LEVEL
                        )
    routes: list[tuple[str, str, frozenset[str]]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if not (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Attribute)
                and decorator.func.attr == "route"
            ):
                continue
            owner = decorator.func.value
            default = (
                app_default.get(owner.id, "UNKNOWN") if isinstance(owner, ast.Name) else "UNKNOWN"
            )
            keywords = {k.arg: k.value for k in decorator.keywords}
            route_node = keywords.get("route") or (decorator.args[0] if decorator.args else None)
            route = (
                route_node.value
                if isinstance(route_node, ast.Constant) and isinstance(route_node.value, str)
                else node.name
            )
            auth_level = _level(keywords["auth_level"]) if "auth_level" in keywords else default
            routes.append((route, auth_level, _methods(keywords.get("methods"))))
    return routes


def anonymous_writes(source: str) -> list[str]:
    """The routes of a module that take a mutating method with no key (or with an auth level
    the parse cannot tell)."""
    return [
        f"{route} {sorted(methods & MUTATING_METHODS)} auth_level={level}"
        for route, level, methods in http_routes(source)
        if methods & MUTATING_METHODS and level not in ("FUNCTION", "ADMIN")
    ]


def test_no_http_function_of_the_app_takes_a_write_anonymously() -> None:
    """The issue's rule, "no anonymous write": every HTTP function of function_app.py (and of
    any blueprint under shared/) that takes POST, PUT, PATCH or DELETE requires a function key
    (auth level FUNCTION or ADMIN). With App Service authentication off (no API_AUTH_CLIENT_ID),
    the key is the API's only protection; with it on, the key stays the second layer."""
    offenders = []
    for path in [REPO / "function_app.py", *sorted((REPO / "shared").rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        if ".route(" in text:
            offenders += [f"{path.relative_to(REPO)}: {o}" for o in anonymous_writes(text)]
    assert not offenders, offenders


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # the orders API as the issue declares it: keys on every route
            "app = func.FunctionApp()\n"
            "@app.route(route='orders', methods=['POST'], auth_level=func.AuthLevel.FUNCTION)\n"
            "async def place(req): ...\n"
            "@app.route(route='orders/{orderId}', methods=['GET'])\n"
            "async def read(req): ...\n",
            [],
        ),
        (  # an anonymous POST
            "app = func.FunctionApp()\n"
            "@app.route(route='orders', methods=['POST'], auth_level=func.AuthLevel.ANONYMOUS)\n"
            "async def place(req): ...\n",
            ["orders ['POST'] auth_level=ANONYMOUS"],
        ),
        (  # anonymous by the app's default, methods as HttpMethod members
            "app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)\n"
            "@app.route(route='orders/{orderId}/cancellations', methods=[func.HttpMethod.POST])\n"
            "async def cancel(req): ...\n",
            ["orders/{orderId}/cancellations ['POST'] auth_level=ANONYMOUS"],
        ),
        (  # no methods: every method, so a write
            "app = func.FunctionApp()\n"
            "@app.route(route='orders/{orderId}/amendments', auth_level='anonymous')\n"
            "async def amend(req): ...\n",
            ["orders/{orderId}/amendments ['DELETE', 'PATCH', 'POST', 'PUT'] auth_level=ANONYMOUS"],
        ),
        (  # an auth level the parse cannot read is refused, not assumed safe
            "app = func.FunctionApp()\n"
            "@app.route(route='orders', methods=['PUT'], auth_level=LEVEL)\n"
            "async def put(req): ...\n",
            ["orders ['PUT'] auth_level=UNKNOWN"],
        ),
        (  # a blueprint's route without its own level: the registering app decides, refused
            "bp = func.Blueprint()\n"
            "@bp.route(route='orders', methods=['POST'])\n"
            "async def place(req): ...\n",
            ["orders ['POST'] auth_level=UNKNOWN"],
        ),
        (  # an anonymous read is not a write (the rule is about writes)
            "app = func.FunctionApp()\n"
            "@app.route(route='openapi.json', methods=['GET'], auth_level='anonymous')\n"
            "async def spec(req): ...\n",
            [],
        ),
    ],
)
def test_the_anonymous_write_check_reads_the_decorators(source: str, expected: list[str]) -> None:
    """The check above finds nothing in today's function_app.py only if it would find an
    anonymous write: each way one can be declared in the Python v2 model is caught."""
    assert anonymous_writes(source) == expected


def test_the_route_parse_sees_the_routes_a_module_declares() -> None:
    """A parse that found no route at all would pass the check vacuously: it finds each."""
    source = (
        "app = func.FunctionApp()\n"
        "@app.function_name('place_order')\n"
        "@app.route(route='orders', methods=['POST'], auth_level=func.AuthLevel.FUNCTION)\n"
        "async def place(req): ...\n"
        "@app.route('orders/{orderId}', methods=['GET'])\n"
        "async def read(req): ...\n"
    )
    routes: list[Any] = http_routes(source)
    assert routes == [
        ("orders", "FUNCTION", frozenset({"POST"})),
        ("orders/{orderId}", "FUNCTION", frozenset({"GET"})),
    ]

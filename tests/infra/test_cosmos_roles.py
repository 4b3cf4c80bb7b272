"""The Cosmos DB data-plane roles of the app (issue 36, finding 10): custom roles with the data
actions the code uses, read from the code itself, not the built-in Data Contributor (item
deletes, stored procedures, conflicts); deletes only in the leases container, whose lease store
needs them.

The actions and what each allows: Learn, "Azure Cosmos DB for NoSQL data plane actions reference"
(learn.microsoft.com/azure/cosmos-db/nosql/security/reference-data-plane-actions). The relay
trigger's lease operations: azure-cosmos-dotnet-v3, Microsoft.Azure.Cosmos/src/ChangeFeedProcessor/
LeaseManagement (DocumentServiceLeaseStoreCosmos.cs: create, read, delete of its lock;
DocumentServiceLeaseUpdaterCosmos.cs: replace with If-Match; DocumentServiceLeaseContainerCosmos.cs:
a query over the leases; DocumentServiceLeaseManagerCosmos.cs DeleteAsync).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import azure.cosmos
import azure.cosmos.aio

from tests.infra.infra_support import REPO, accessor, body, doc

ROLE_DEFINITION = "Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions"
ROLE_ASSIGNMENT = "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"
# The built-in data-plane roles: Data Reader and Data Contributor (Learn: data plane roles).
BUILT_IN_ROLE_IDS = {
    "00000000-0000-0000-0000-000000000001",
    "00000000-0000-0000-0000-000000000002",
}

_ACCOUNT = "Microsoft.DocumentDB/databaseAccounts"
_CONTAINERS = f"{_ACCOUNT}/sqlDatabases/containers"
READ_METADATA = f"{_ACCOUNT}/readMetadata"
CREATE = f"{_CONTAINERS}/items/create"
READ = f"{_CONTAINERS}/items/read"
REPLACE = f"{_CONTAINERS}/items/replace"
UPSERT = f"{_CONTAINERS}/items/upsert"
DELETE = f"{_CONTAINERS}/items/delete"
EXECUTE_QUERY = f"{_CONTAINERS}/executeQuery"
READ_CHANGE_FEED = f"{_CONTAINERS}/readChangeFeed"
EXECUTE_STORED_PROCEDURE = f"{_CONTAINERS}/executeStoredProcedure"
MANAGE_CONFLICTS = f"{_CONTAINERS}/manageConflicts"
# Every data action the Learn page lists (no wildcard is ever granted).
DOCUMENTED_ACTIONS = {
    READ_METADATA,
    CREATE,
    READ,
    REPLACE,
    UPSERT,
    DELETE,
    EXECUTE_QUERY,
    READ_CHANGE_FEED,
    EXECUTE_STORED_PROCEDURE,
    MANAGE_CONFLICTS,
}
# Not a data action at all: throughput is managed through Azure Resource Manager only ("You
# cannot manage throughput with the readMetadata data action", same page).
CONTROL_PLANE = "control plane (Azure Resource Manager only)"
NOT_DOCUMENTED = "no data action documented for it"

# What each ContainerProxy method needs. A query needs readChangeFeed too ("To perform NoSQL
# queries using the SDKs, you must have both ...", same page); read_items and read_all_items are
# queries (azure/cosmos/aio/_read_items_helper_async.py: QueryItems). A patch: the page names no
# action for it; the role grants replace and upsert (rbac.bicep says why), so a patch needs
# replace here and upsert is checked in the role.
CONTAINER_METHOD_ACTIONS: dict[str, set[str]] = {
    "create_item": {CREATE},
    "read_item": {READ},
    "replace_item": {REPLACE},
    "upsert_item": {UPSERT},
    "patch_item": {REPLACE},
    "delete_item": {DELETE},
    "delete_all_items_by_partition_key": {DELETE},
    "query_items": {EXECUTE_QUERY, READ_CHANGE_FEED},
    "read_items": {EXECUTE_QUERY, READ_CHANGE_FEED},
    "read_all_items": {EXECUTE_QUERY, READ_CHANGE_FEED},
    "query_items_change_feed": {READ_CHANGE_FEED},
    "execute_item_batch": set(),  # each operation's own action: BATCH_OPERATION_ACTIONS
    "read": {READ_METADATA},
    "read_feed_ranges": {READ_METADATA},
    "feed_range_from_partition_key": set(),  # computed in the client
    "is_feed_range_subset": set(),
    "get_latest_session_token": set(),
    "is_system_key": set(),
    "scripts": {EXECUTE_STORED_PROCEDURE},
    "get_conflict": {MANAGE_CONFLICTS},
    "list_conflicts": {MANAGE_CONFLICTS},
    "query_conflicts": {MANAGE_CONFLICTS},
    "delete_conflict": {MANAGE_CONFLICTS},
    "get_throughput": {CONTROL_PLANE},
    "read_offer": {CONTROL_PLANE},
    "replace_throughput": {CONTROL_PLANE},
    "semantic_rerank": {NOT_DOCUMENTED},
}
BATCH_OPERATION_ACTIONS = {
    "create": CREATE,
    "read": READ,
    "replace": REPLACE,
    "upsert": UPSERT,
    "delete": DELETE,
    "patch": REPLACE,
}

# The code that talks to Cosmos DB with the app's identity (the function app) or an operator's
# (`python -m ops`). ops/init_cosmos.py creates databases and containers for the emulators and
# the local server (a management operation Entra ID refuses on the data plane: Learn, Diagnose
# and troubleshoot forbidden exceptions, "Non-data operations are not allowed"); Bicep creates
# them in Azure.
CODE = [
    REPO / "function_app.py",
    *sorted((REPO / "shared").rglob("*.py")),
    # the kit's distribution, which the app installs (requirements.txt: ./kit)
    *sorted((REPO / "kit" / "src").rglob("*.py")),
    *sorted(path for path in (REPO / "ops").rglob("*.py") if path.name != "init_cosmos.py"),
]
_CALL = re.compile(r"\.(\w+)\(")
_BATCH_OPERATION = re.compile(r"\(\s*\"(create|read|replace|upsert|delete|patch)\"\s*,\s*\(")


def _role_definitions() -> dict[str, dict[str, Any]]:
    resources = doc("rbac")["resources"]
    return {name: body(res) for name, res in resources.items() if res["type"] == ROLE_DEFINITION}


def _assignments() -> dict[str, dict[str, Any]]:
    resources = doc("rbac")["resources"]
    return {name: res for name, res in resources.items() if res["type"] == ROLE_ASSIGNMENT}


def _actions(role: dict[str, Any]) -> set[str]:
    (permission,) = role["properties"]["permissions"]
    variable = permission["dataActions"]
    actions = doc("rbac")["variables"][variable]["value"]
    assert isinstance(actions, list), variable
    return set(actions)


def _variable(name: str) -> Any:
    return doc("rbac")["variables"][name]["value"]


def code_actions() -> dict[str, set[str]]:
    """The data actions the code's Cosmos DB calls need, each with the places that need it."""
    container_methods = {
        name
        for cls in (azure.cosmos.ContainerProxy, azure.cosmos.aio.ContainerProxy)
        for name, _ in inspect.getmembers(cls)
        if not name.startswith("_")
    }
    needed: dict[str, set[str]] = {}
    for path in CODE:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPO))
        for method in set(_CALL.findall(text)) & container_methods:
            for action in CONTAINER_METHOD_ACTIONS[method]:
                needed.setdefault(action, set()).add(f"{where} {method}")
        for operation in set(_BATCH_OPERATION.findall(text)):
            needed.setdefault(BATCH_OPERATION_ACTIONS[operation], set()).add(f"{where} batch")
    return needed


def test_every_container_method_of_the_sdk_is_mapped_to_its_data_action() -> None:
    """A new method of the SDK's ContainerProxy must be mapped before the code may call it."""
    for cls in (azure.cosmos.ContainerProxy, azure.cosmos.aio.ContainerProxy):
        methods = {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}
        assert methods <= set(CONTAINER_METHOD_ACTIONS), methods - set(CONTAINER_METHOD_ACTIONS)
    assert set().union(*CONTAINER_METHOD_ACTIONS.values()) - {CONTROL_PLANE, NOT_DOCUMENTED} <= (
        DOCUMENTED_ACTIONS
    )


def test_no_cosmos_role_of_the_deployment_is_a_built_in_one() -> None:
    """Fails on the Bicep before issue 36: the app and the developer were Cosmos DB Built-in Data
    Contributor (items/* and containers/*: deletes and stored procedures anywhere in the
    database)."""
    text = (REPO / "infra" / "app" / "rbac.bicep").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    for role_id in BUILT_IN_ROLE_IDS:
        assert role_id not in code, role_id
    definitions = _role_definitions()
    assert set(definitions) == {"cosmosAppDataRole", "cosmosLeaseDeleteRole"}
    for name, role in definitions.items():
        assert role["parent"] == "cosmosAccount", name
        assert role["properties"]["type"] == "CustomRole", name
        assert role["name"]["function"]["type"] == "guid", name  # a role definition's name
        assert _actions(role) <= DOCUMENTED_ACTIONS, name  # no wildcard, nothing undocumented
    for name, resource in _assignments().items():
        role_id = body(resource)["properties"]["roleDefinitionId"]
        assert accessor(role_id)[0] in definitions and accessor(role_id)[1:] == ("id",), name


def test_the_app_role_grants_what_the_code_uses_and_no_delete() -> None:
    """Every Cosmos DB call of the function app and of `python -m ops` (their SDK methods and
    batch operations, read from the code) is allowed by the app's data role, plus the relay
    trigger's change feed and lease operations; nothing the code does not use: no delete, no
    stored procedure, no conflict feed. Fails on the Bicep before issue 36 (no such role)."""
    app_role = _actions(_role_definitions()["cosmosAppDataRole"])
    used = code_actions()
    assert not set(used) - app_role, {action: used[action] for action in set(used) - app_role}
    # What the code does use, so that the scan above cannot pass by finding nothing.
    assert {CREATE, READ, REPLACE, EXECUTE_QUERY, READ_CHANGE_FEED} <= set(used)
    assert "shared/adapters/cosmos_outbox.py patch_item" in used[REPLACE]
    assert "kit/src/idempotent_consumer/cosmos/_store.py batch" in used[REPLACE]
    # The relay trigger (a change feed processor) on the orders container and its leases.
    function_app = (REPO / "function_app.py").read_text(encoding="utf-8")
    assert "@app.cosmos_db_trigger(" in function_app
    lease_store = {CREATE, READ, REPLACE, EXECUTE_QUERY, READ_CHANGE_FEED}
    assert lease_store <= app_role
    # Every action the code needs, and the SDK's metadata reads and a patch's upsert: the whole
    # role, no more.
    assert app_role == set(used) | {READ_METADATA, UPSERT}
    assert not app_role & {DELETE, EXECUTE_STORED_PROCEDURE, MANAGE_CONFLICTS}


def test_deletes_are_granted_on_the_leases_container_only() -> None:
    """The relay trigger's lease store deletes (its initialization lock, a split partition's
    lease): a role with items/delete alone, assignable and assigned on the leases container only,
    so the app can delete nothing in orders, inventory or payments. Fails on the Bicep before
    issue 36 (Data Contributor on the database: deletes everywhere)."""
    definitions = _role_definitions()
    assert _actions(definitions["cosmosLeaseDeleteRole"]) == {DELETE}
    assert _variable("cosmosDatabaseScope") == "${cosmosAccount.id}/dbs/${cosmosDatabaseName}"
    assert (
        _variable("cosmosLeasesScope")
        == "${cosmosDatabaseScope}/colls/${cosmosLeasesContainerName}"
    )
    assert definitions["cosmosLeaseDeleteRole"]["properties"]["assignableScopes"] == [
        "cosmosLeasesScope"
    ]
    assert definitions["cosmosAppDataRole"]["properties"]["assignableScopes"] == [
        "cosmosDatabaseScope"
    ]
    params = body(doc("main")["modules"]["rbac"])["params"]
    assert accessor(params["cosmosLeasesContainerName"]) == (
        "cosmos",
        "outputs",
        "leasesContainerName",
    )
    assert accessor(params["cosmosDatabaseName"]) == ("cosmos", "outputs", "databaseName")
    function_app = (REPO / "function_app.py").read_text(encoding="utf-8")
    assert 'lease_container_name="leases"' in function_app
    assert body(doc("main")["modules"]["cosmos"])["params"]["leasesContainerName"] == "leases"


def test_the_app_and_the_developer_get_the_two_roles_at_their_scopes() -> None:
    """The app's identity: the data role on the database (the change feed processor reads the
    database's metadata: rbac.bicep), the delete role on the leases container. The developer
    (grantDeveloperAccess) runs the same consumer and `python -m ops`: the same two, only when a
    principal is given."""
    expected = {
        "appCosmosData": ("cosmosAppDataRole", "cosmosDatabaseScope", "managedIdentityPrincipalId"),
        "appCosmosLeaseDelete": (
            "cosmosLeaseDeleteRole",
            "cosmosLeasesScope",
            "managedIdentityPrincipalId",
        ),
        "devCosmosData": ("cosmosAppDataRole", "cosmosDatabaseScope", "principalId"),
        "devCosmosLeaseDelete": ("cosmosLeaseDeleteRole", "cosmosLeasesScope", "principalId"),
    }
    assignments = _assignments()
    assert set(assignments) == set(expected)
    for name, (role, scope, principal) in expected.items():
        resource = assignments[name]
        assignment = body(resource)
        assert assignment["parent"] == "cosmosAccount", name
        properties = assignment["properties"]
        assert accessor(properties["roleDefinitionId"]) == (role, "id"), name
        assert properties["scope"] == scope, name
        assert properties["principalId"] == principal, name
        guid = assignment["name"]["function"]["parameters"]
        assert (guid["base_string"], guid["extra_string_1"]) == (scope, principal), name
        condition = resource["config"].get("condition")
        if principal == "principalId":
            operand = condition["operator"]["operands"]["bool_value"]["function"]
            assert operand["type"] == "empty" and operand["parameters"]["item_to_test"] == principal
        else:
            assert condition is None, name


def test_the_docs_name_the_roles_and_what_the_operator_needs() -> None:
    """docs/infrastructure.md's least-privilege table lists the custom roles, not Data
    Contributor, and says which role an operator running `python -m ops` needs."""
    text = (REPO / "docs" / "infrastructure.md").read_text(encoding="utf-8")
    table = text[text.index("## Least privilege") :].split("\n## ", 1)[0]
    assert "Built-in Data Contributor" not in table
    assert "orders app data" in table and "orders lease delete" in table
    assert "python -m ops" in table

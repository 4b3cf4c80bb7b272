"""The orders API's App Service authentication (issue 33): Entra ID in front of the function keys
when the deployment names the API's app registration, nothing when it does not.

The resource is ``Microsoft.Web/sites/config`` ``authsettingsV2`` (Learn: "Configure your App
Service or Azure Functions app to use Microsoft Entra sign-in"; its properties are checked
against azure-mgmt-web's SiteAuthSettingsV2 of 2024-04-01 by test_arm_schema.py).
"""

from __future__ import annotations

from typing import Any

from tests.infra.infra_support import (
    REPO,
    accessor,
    body,
    doc,
    load_yaml,
    main_parameter_mapping,
)


def _auth() -> tuple[dict[str, Any], dict[str, Any]]:
    resource = doc("function")["resources"]["apiAuthentication"]
    assert resource["type"] == "Microsoft.Web/sites/config"
    return resource, body(resource)


def test_a_request_without_a_token_is_answered_401_before_any_function() -> None:
    """requireAuthentication with Return401 (an API: no redirect to a sign-in page), on the
    function app itself, over https only, and no path left open. Fails before issue 33's Bicep
    (no authentication resource)."""
    _, auth = _auth()
    assert auth["parent"] == "functionApp"
    assert auth["name"] == "authsettingsV2"
    properties = auth["properties"]
    assert properties["platform"] == {"enabled": True}
    validation = properties["globalValidation"]
    assert validation["requireAuthentication"] is True
    assert validation["unauthenticatedClientAction"] == "Return401"
    assert validation["excludedPaths"] == []  # nothing anonymous, the OpenAPI document included
    assert properties["httpSettings"]["requireHttps"] is True
    # Bearer tokens only: no sign-in flow, so no client secret setting and no token store.
    registration = properties["identityProviders"]["azureActiveDirectory"]["registration"]
    assert "clientSecretSettingName" not in registration
    assert properties["login"]["tokenStore"]["enabled"] is False
    assert set(properties["identityProviders"]) == {"azureActiveDirectory"}


def test_the_entra_provider_takes_the_app_registration_and_tenant_from_the_parameters() -> None:
    """The client id and tenant reach the provider from main.bicep's parameters (azd variables
    API_AUTH_CLIENT_ID and API_AUTH_TENANT_ID, carried into pipelines); the issuer is the
    tenant's v2.0 endpoint in the deployment's cloud, the tenant of the deployment when none is
    given; the audience is the registration's. Fails before issue 33's Bicep."""
    _, auth = _auth()
    provider = auth["properties"]["identityProviders"]["azureActiveDirectory"]
    assert provider["enabled"] is True
    assert provider["registration"]["clientId"] == "apiAuthClientId"
    assert provider["registration"]["openIdIssuer"] == (
        "${environment().authentication.loginEndpoint}${apiAuthTenant}/v2.0"
    )
    assert provider["validation"]["allowedAudiences"] == [
        "api://${apiAuthClientId}",
        "apiAuthClientId",
    ]
    tenant = doc("function")["variables"]["apiAuthTenant"]["value"]["operator"]
    assert tenant["type"] == "conditional"
    operands = tenant["operands"]
    assert operands["condition"]["function"]["parameters"]["item_to_test"] == "apiAuthTenantId"
    tenant_of_deployment = operands["true_value"]["operator"]["operands"]
    assert tenant_of_deployment == {
        "operand_1": {"function": {"type": "tenant"}},
        "operand_2": "tenantId",
    }
    assert operands["false_value"] == "apiAuthTenantId"
    params = body(doc("main")["modules"]["functionApp"])["params"]
    assert params["apiAuthClientId"] == "apiAuthClientId"
    assert params["apiAuthTenantId"] == "apiAuthTenantId"
    mapping = main_parameter_mapping()
    assert mapping["apiAuthClientId"] == ("API_AUTH_CLIENT_ID", "")
    assert mapping["apiAuthTenantId"] == ("API_AUTH_TENANT_ID", "")
    pipeline = load_yaml(REPO / "azure.yaml")["pipeline"]["variables"]
    assert {"API_AUTH_CLIENT_ID", "API_AUTH_TENANT_ID"} <= set(pipeline)


def test_without_a_client_id_authentication_stays_off_and_the_deployment_says_so() -> None:
    """No template can create an app registration: the parameter is optional, empty by default,
    and then no authentication resource is deployed (the function keys alone protect the API);
    the API_AUTHENTICATION output names the mode, and the docs warn of it. Fails before issue
    33's Bicep."""
    resource, _ = _auth()
    assert resource["config"]["condition"] == "apiAuthEnabled"
    enabled = doc("function")["variables"]["apiAuthEnabled"]["value"]["operator"]
    assert enabled["type"] == "not"
    emptiness = enabled["operands"]["bool_value"]["function"]
    assert emptiness == {"type": "empty", "parameters": {"item_to_test": "apiAuthClientId"}}
    assert doc("function")["parameters"]["apiAuthClientId"]["default"] == ""
    assert doc("main")["parameters"]["apiAuthClientId"]["default"] == ""
    output = doc("function")["outputs"]["apiAuthentication"]["value"]["operator"]["operands"]
    assert output == {
        "condition": "apiAuthEnabled",
        "true_value": "entra-id-and-function-keys",
        "false_value": "function-keys-only",
    }
    assert accessor(doc("main")["outputs"]["API_AUTHENTICATION"]["value"]) == (
        "functionApp",
        "outputs",
        "apiAuthentication",
    )
    docs = (REPO / "docs" / "infrastructure.md").read_text(encoding="utf-8")
    section = docs[docs.index("## The orders API") :].split("\n## ", 1)[0]
    assert "function-keys-only" in section
    assert "az ad app create" in section
    assert "az functionapp keys list" in section

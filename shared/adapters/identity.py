"""The Entra ID credential of each client the app builds: one rule, the Functions host's own.

The host authenticates an identity-based connection ``<NAME>`` with a managed identity when
``<NAME>__credential`` is ``managedidentity``, the user-assigned one whose client id is
``<NAME>__clientId`` (the system-assigned one without it), and with the developer's identity
otherwise: "When hosted in the Azure Functions service, identity-based connections use a managed
identity. The system-assigned identity is used by default, although a user-assigned identity can
be specified with the credential and clientID properties. When run in other contexts, such as
local development, your developer identity is used instead"
(learn.microsoft.com/azure/azure-functions/functions-reference, "Configure an identity-based
connection"). The app's own clients follow the same rule, from the settings of the host's
connection to the same resource, so that the host and the app cannot authenticate as two
different identities:

- the app's Cosmos DB client (consumer, relay marks, watchdog): ``CosmosDBConnection__credential``
  and ``CosmosDBConnection__clientId``, the relay trigger's connection to the same account;
- the relay's Service Bus client (the topic sender): ``ServiceBusConnection__credential`` and
  ``ServiceBusConnection__clientId``, the queue trigger's connection to the same namespace;
- the Azure Monitor exporter: ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING``
  (``ClientId=...;Authorization=AAD``), the host's own, always a managed identity
  (``shared.telemetry.consumer``).

So a deployment gets ``ManagedIdentityCredential`` with the user-assigned client id, the
credential Microsoft recommends in production ("replace DefaultAzureCredential with a specific
TokenCredential implementation, such as ManagedIdentityCredential": "Use deterministic
credentials in production environments", learn.microsoft.com/dotnet/azure/sdk/authentication/
best-practices; the same section for JavaScript and Python), and never walks the default chain:
no Azure CLI login or environment service principal on an instance can silently take over. The
default chain (``DefaultAzureCredential``: environment, workload identity, managed identity,
Azure CLI, azd, ...) is what a developer's machine gets, where no ``__credential`` is set. The
values are validated in ``shared.config`` (``IdentitySettings``); this module only builds. Each
credential is the caller's to close.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.config import IdentitySettings

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential


def credential(identity: IdentitySettings) -> AsyncTokenCredential:
    """The credential ``identity`` names; constructing it opens no connection."""
    if identity.managed:
        from azure.identity.aio import ManagedIdentityCredential  # only where it is used

        if identity.client_id:
            return ManagedIdentityCredential(client_id=identity.client_id)
        return ManagedIdentityCredential()
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential()

"""The duplicate-detection window the tool waits out before resubmitting: the deployed queue's
own, when the identity may read the queue's properties; else the one infra/messaging.json says
the Bicep deploys (which its ``duplicateDetectionHistoryTimeWindowOverride`` parameter can
change: the tool says which it used); or the operator's ``--window``, which wins.

Reading a queue's properties goes through the namespace's management endpoint
(``ServiceBusAdministrationClient.get_queue``, azure/servicebus/management/
_management_client.py:260): a management operation, which a SAS policy allows with its Manage
right and Entra ID with *Azure Service Bus Data Owner* (the only built-in role beyond send and
receive: https://learn.microsoft.com/azure/service-bus-messaging/authenticate-application).
The tool's own roles (Data Receiver, Data Sender) do not: the fallback is the usual case.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from azure.core.exceptions import AzureError
from azure.servicebus.management import ServiceBusAdministrationClient

from ops.messaging import MESSAGING_FILE, read_messaging


@dataclass(frozen=True)
class Window:
    value: timedelta
    source: str  # where it came from, for the operator


def configured_window(path: Path = MESSAGING_FILE) -> timedelta:
    """``duplicateDetectionHistoryTimeWindow`` of infra/messaging.json."""
    return read_messaging(path).duplicate_detection_window


def deployed_window(
    admin: ServiceBusAdministrationClient,
    queue_name: str,
    path: Path = MESSAGING_FILE,
    *,
    topic: bool = False,
) -> Window:
    """The queue's own window (``topic``: the topic's, which is its subscriptions': a
    subscription has no duplicate detection of its own), or the file's with the reason it could
    not be read."""
    kind = "topic" if topic else "queue"
    try:
        properties = admin.get_topic(queue_name) if topic else admin.get_queue(queue_name)
    except AzureError as error:
        first_line = (str(error).strip().splitlines() or [""])[0]
        return Window(
            configured_window(path),
            f"infra/messaging.json: the {kind}'s properties could not be read "
            f"({type(error).__name__}: {first_line}; "
            "reading them needs Manage or Azure Service Bus Data Owner). A Bicep override "
            "of the window would not be seen: pass --window if it was set",
        )
    if not properties.requires_duplicate_detection:
        return Window(timedelta(0), f"the {kind} {queue_name!r}: duplicate detection is off")
    window = properties.duplicate_detection_history_time_window
    if not isinstance(window, timedelta):  # the SDK parses the ISO duration; never a string
        return Window(configured_window(path), f"infra/messaging.json: {window!r} unreadable")
    return Window(window, f"the properties of {kind} {queue_name!r} (administration client)")


def admin_client(
    *, namespace: str | None, connection_string: str | None
) -> ServiceBusAdministrationClient:
    if connection_string:
        return ServiceBusAdministrationClient.from_connection_string(connection_string)
    if namespace:
        from azure.identity import DefaultAzureCredential

        return ServiceBusAdministrationClient(namespace, DefaultAzureCredential())
    raise ValueError("give --namespace (Entra ID) or --connection-string (emulator)")

"""Payments: an effect no database transaction can hold, carried out by an outside provider.

- ``provider``: the port of the payment provider (``PaymentProvider``): the request, its result,
  the lookup by the merchant's reference, and the provider's errors classified by what a retry
  can fix. The HTTP adapter is ``shared.adapters.payment_provider``; the local stand-in, the
  referee of the tests, ``local.standins.payment_provider``.

Imports ``shared.kit`` only; never an adapter, aiohttp, Azure or telemetry (``make lint``).
"""

"""The stock reservation consumer: the order events' downstream side that reserves stock per SKU,
built on the kit (``shared.kit``): its contract (``contract``), its stored shapes
(``inventory``), its effects (``effects``) and its definition (``consumer``). No Azure imports."""

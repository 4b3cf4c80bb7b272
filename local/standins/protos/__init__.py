"""The host-worker protocol messages: ``function_rpc_pb2`` is generated from
``function_rpc.proto`` by ``make install`` (git-ignored); ``local.standins.worker.load_protos``
loads it."""

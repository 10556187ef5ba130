"""tritium.proto: the protocol schemas of tritium and their generated Python modules.

Sources (wire-compatible with Triton Inference Server 2.51):

- ``model_config.proto``: ``inference.ModelConfig``, the ``config.pbtxt`` schema
  -> ``model_config_pb2``
- ``grpc_service.proto``: ``inference.GRPCInferenceService`` and its messages
  -> ``grpc_service_pb2``, ``grpc_service_pb2_grpc``
- ``health.proto``: ``grpc.health.v1.Health`` (Check) -> ``health_pb2``, ``health_pb2_grpc``

The ``*_pb2*.py`` and ``*.pyi`` files are generated; never edit them by hand. After
changing a ``.proto`` file run ``python proto/codegen.py`` and commit the result
(``python proto/codegen.py --check`` tells whether they are stale; a unit test runs it).

Usage::

    from google.protobuf import text_format
    from tritium.proto import model_config_pb2

    config = text_format.Parse(pbtxt, model_config_pb2.ModelConfig())

Pitfall: one process, one copy of the ``inference`` package. protobuf registers every
generated module in its default descriptor pool, keyed by file name
(``model_config.proto``) and by full message name (``inference.ModelConfig``). tritonclient
ships its own generated modules for the same schema (``tritonclient.grpc.model_config_pb2``,
``tritonclient.grpc.service_pb2``), so importing both them and these modules in the same
process fails (``TypeError: Couldn't build proto file into descriptor pool: duplicate
file name`` / duplicate symbol). Keep ``tritonclient.grpc`` out of the server process, and
in tests that use both, run one side in a subprocess. The same holds for
``grpcio-health-checking`` and ``health_pb2`` (both define ``grpc.health.v1``).

This ``__init__`` imports nothing, so ``import tritium.proto`` alone never registers a schema.
"""

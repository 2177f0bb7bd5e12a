"""Generated gRPC stubs for the ``cuzk.v1`` proving protocol.

``pb`` holds the messages and enums, ``pb_grpc`` the ``ProvingEngine`` stub,
servicer base class and registration helper.
"""

from pytest_cuzk.proto.cuzk.v1 import proving_pb2 as pb
from pytest_cuzk.proto.cuzk.v1 import proving_pb2_grpc as pb_grpc

SERVICE_NAME = "cuzk.v1.ProvingEngine"

__all__ = ["SERVICE_NAME", "pb", "pb_grpc"]

#pragma once
// The runtime's side of platform::Communicator: the parent communicator every group is
// created from, a private copy of MPI_COMM_WORLD so that group creation never shares tags
// with the MPI transport's point-to-point traffic on MPI_COMM_WORLD.

namespace prism::internal {

/// At Init, on every rank in the same order (collective over MPI_COMM_WORLD).
void OpenCommunicatorService();
/// At Shutdown, before MPI_Finalize: later Creates throw.
void CloseCommunicatorService();

}  // namespace prism::internal

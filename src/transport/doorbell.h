#pragma once
// The doorbell: a UDP datagram that wakes a napping progress thread on another rank.
//
// MPI has no way to wait for a message without polling (Open MPI's blocking receives
// busy-poll), so an idle rank's progress thread naps between looks, longer the longer it
// has been idle (up to 20 ms). Without the doorbell the first message after a pause waited
// out that nap: a task sent to a rank idle for a second took 22 ms instead of 30 us. With
// it, a sender that has heard nothing from the destination lately (so it may be napping)
// rings it after the MPI send, and the destination, which naps in ppoll on its doorbell's
// socket, wakes at once and looks.
//
// Only an accelerator: a ring that is lost (UDP), dropped by a firewall or sent to an
// address that does not reach the peer costs nothing but the nap it would have saved,
// and the messages themselves always go over MPI.
//
// Each rank binds one socket (Open) to the address its peers reach it at (Address: the
// `network` setting's interface, else the host name's address, else loopback) and learns
// every peer's (SetPeers, from an all-gather at Init). Thread-safety: Ring and Drain from
// the thread that drives the transport; fd() is fixed.

#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

namespace prism::internal {

class Doorbell {
 public:
  /// A bound socket for `network` (an interface name, "shm" for loopback, "any"), or nullptr
  /// with `*why` set when none can be opened (the transport then only naps).
  static std::unique_ptr<Doorbell> Open(const std::string& network, std::string* why);
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  /// "a.b.c.d:port", for the all-gather.
  std::string Address() const;
  /// Every rank's Address(), by rank. An entry that does not parse is never rung.
  void SetPeers(const std::vector<std::string>& addresses);
  /// Sends one datagram to `rank` (non-blocking; a failure is ignored).
  void Ring(int rank);
  /// Reads every datagram waiting; returns how many.
  int Drain();
  int fd() const { return fd_; }

  /// "a.b.c.d:port" -> sockaddr; false if it does not parse. (For tests.)
  static bool Parse(const std::string& text, sockaddr_in* out);

 private:
  Doorbell(int fd, sockaddr_in self) : fd_(fd), self_(self) {}
  int fd_;
  sockaddr_in self_;
  std::vector<sockaddr_in> peers_;
  std::vector<bool> valid_;
};

}  // namespace prism::internal

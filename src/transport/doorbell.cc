#include "transport/doorbell.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace prism::internal {
namespace {

bool IsLoopback(in_addr a) { return (ntohl(a.s_addr) >> 24) == 127; }

/// The IPv4 address of interface `name` (any address of any up interface but loopback if
/// name is empty); false if there is none.
bool InterfaceAddress(const std::string& name, in_addr* out) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool found = false;
  for (ifaddrs* i = all; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (name.empty() ? IsLoopback(a) : name != i->ifa_name) continue;
    *out = a;
    found = true;
  }
  freeifaddrs(all);
  return found;
}

/// The host name's IPv4 address unless it is a loopback one (Debian maps it to 127.0.1.1).
bool HostNameAddress(in_addr* out) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return false;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &res) != 0) return false;
  bool found = false;
  for (addrinfo* r = res; r != nullptr && !found; r = r->ai_next) {
    in_addr a = reinterpret_cast<sockaddr_in*>(r->ai_addr)->sin_addr;
    if (IsLoopback(a)) continue;
    *out = a;
    found = true;
  }
  freeaddrinfo(res);
  return found;
}

/// Where peers reach this rank: the `network` setting's interface, or for "any" the host
/// name's address, else an up interface's; loopback for "shm" or when there is none.
in_addr ChooseAddress(const std::string& network) {
  in_addr a{};
  a.s_addr = htonl(INADDR_LOOPBACK);
  if (network == "shm") return a;
  if (network != "any" && !network.empty() && InterfaceAddress(network, &a)) return a;
  if (HostNameAddress(&a) || InterfaceAddress("", &a)) return a;
  a.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

std::unique_ptr<Doorbell> Doorbell::Open(const std::string& network, std::string* why) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_addr = ChooseAddress(network);
  self.sin_port = 0;  // the kernel picks
  socklen_t len = sizeof self;
  if (bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &self.sin_addr, text, sizeof text);
    *why = std::string("bind to ") + text + ": " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<Doorbell>(new Doorbell(fd, self));
}

Doorbell::~Doorbell() { close(fd_); }

std::string Doorbell::Address() const {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &self_.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(self_.sin_port));
}

bool Doorbell::Parse(const std::string& text, sockaddr_in* out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 >= text.size()) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a.sin_addr) != 1) return false;
  unsigned long port = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    port = port * 10 + static_cast<unsigned long>(text[i] - '0');
    if (port > 65535) return false;
  }
  if (port == 0) return false;
  a.sin_port = htons(static_cast<uint16_t>(port));
  *out = a;
  return true;
}

void Doorbell::SetPeers(const std::vector<std::string>& addresses) {
  peers_.assign(addresses.size(), sockaddr_in{});
  valid_.assign(addresses.size(), false);
  for (size_t r = 0; r < addresses.size(); ++r) valid_[r] = Parse(addresses[r], &peers_[r]);
}

void Doorbell::Ring(int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= peers_.size() || !valid_[rank]) return;
  const char byte = 1;
  // A full socket buffer (EAGAIN) means the peer has rings waiting: it wakes anyway.
  (void)sendto(fd_, &byte, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&peers_[rank]),
               sizeof(sockaddr_in));
}

int Doorbell::Drain() {
  int n = 0;
  char buf[64];
  while (recv(fd_, buf, sizeof buf, MSG_DONTWAIT) >= 0) ++n;
  return n;
}

}  // namespace prism::internal

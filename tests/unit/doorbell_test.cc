// The transport's doorbell (transport/doorbell.h): addresses parse, a ring reaches the
// peer's socket, bad peers are never rung.
#include <gtest/gtest.h>
#include <poll.h>

#include "transport/doorbell.h"

namespace prism::internal {
namespace {

bool Readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

TEST(Doorbell, AddressesParseOnlyWhenWhole) {
  sockaddr_in a{};
  EXPECT_TRUE(Doorbell::Parse("127.0.0.1:5000", &a));
  EXPECT_EQ(ntohs(a.sin_port), 5000);
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "host:80", "127.0.0.1:0", "127.0.0.1:70000",
                          "127.0.0.1:8x", "1.2.3:80"}) {
    EXPECT_FALSE(Doorbell::Parse(bad, &a)) << bad;
  }
}

TEST(Doorbell, ARingReachesThePeerAndDrainEmptiesIt) {
  std::string why;
  auto a = Doorbell::Open("shm", &why), b = Doorbell::Open("shm", &why);
  ASSERT_NE(a, nullptr) << why;
  ASSERT_NE(b, nullptr) << why;
  EXPECT_EQ(a->Address().rfind("127.0.0.1:", 0), 0u) << a->Address();
  a->SetPeers({a->Address(), b->Address(), "not an address"});
  EXPECT_FALSE(Readable(b->fd(), 0));
  a->Ring(1);
  a->Ring(1);
  ASSERT_TRUE(Readable(b->fd(), 5000)) << "no ring arrived";
  EXPECT_EQ(b->Drain(), 2);
  EXPECT_FALSE(Readable(b->fd(), 0));
  a->Ring(2);   // does not parse: never rung
  a->Ring(3);   // beyond the peers
  a->Ring(-1);
  EXPECT_FALSE(Readable(b->fd(), 50));
  EXPECT_EQ(b->Drain(), 0);
}

TEST(Doorbell, AnUnknownInterfaceFallsBackToAnAddressOfThisHost) {
  std::string why;
  auto d = Doorbell::Open("no-such-interface0", &why);
  ASSERT_NE(d, nullptr) << why;
  sockaddr_in a{};
  EXPECT_TRUE(Doorbell::Parse(d->Address(), &a)) << d->Address();
}

}  // namespace
}  // namespace prism::internal

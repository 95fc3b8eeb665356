// The machine's floor for a round trip after a pause, with no Prism and no MPI: two
// processes, each blocked in ppoll on a UDP socket on loopback, exchange one datagram and
// its answer after the pair was idle for --idle-ms, and back to back (a busy stream). The
// same two wake-ups a remote task after an idle second needs (the worker rank's thread
// wakes for the task, the driver's for the result), so Prism's
// single_client_task_after_idle can be read against it (issue 43, item 4).
//
//   prism_wake_floor_benchmark [--reps=N] [--idle-ms=MS] [--json=PATH]
//
// Prints each side's figures in microseconds: the one-way time (the sender's send to the
// receiver's return from ppoll, one clock: CLOCK_MONOTONIC is system-wide) and the round
// trip, median and worst of --reps after a pause, and median of 2,000 busy round trips.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int BoundSocket(sockaddr_in* addr) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    std::perror("socket");
    std::exit(1);
  }
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr->sin_port = 0;
  socklen_t len = sizeof *addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof *addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

// Blocks (no spin) until a datagram arrives; returns its 8-byte payload.
int64_t Receive(int fd) {
  pollfd p{fd, POLLIN, 0};
  while (ppoll(&p, 1, nullptr, nullptr) < 0 && errno == EINTR) {
  }
  int64_t v = 0;
  if (recv(fd, &v, sizeof v, 0) != sizeof v) {
    std::perror("recv");
    std::exit(1);
  }
  return v;
}

void SendTo(int fd, const sockaddr_in& to, int64_t v) {
  if (sendto(fd, &v, sizeof v, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) != sizeof v) {
    std::perror("sendto");
    std::exit(1);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 10;
  int idle_ms = 1000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      reps = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--idle-ms=", 0) == 0) {
      idle_ms = std::atoi(a.c_str() + 10);
    } else if (a.rfind("--json=", 0) == 0) {
      json = a.substr(7);
    } else {
      std::fprintf(stderr, "usage: %s [--reps=N] [--idle-ms=MS] [--json=PATH]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || idle_ms < 0) {
    std::fprintf(stderr, "--reps must be >= 1 and --idle-ms >= 0\n");
    return 2;
  }
  constexpr int kBusy = 2000;
  sockaddr_in a_addr{}, b_addr{};
  int a = BoundSocket(&a_addr);
  int b = BoundSocket(&b_addr);
  int one_way_pipe[2];
  if (pipe(one_way_pipe) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {  // the echo side: answers each datagram, reports its arrival time
    close(one_way_pipe[0]);
    for (int i = 0; i < reps + kBusy; ++i) {
      const int64_t sent = Receive(b);
      const int64_t arrived = NowNs() - sent;
      if (write(one_way_pipe[1], &arrived, sizeof arrived) != sizeof arrived) _exit(1);
      SendTo(b, a_addr, sent);
    }
    _exit(0);
  }
  std::vector<double> one_way, round_trip, busy;
  // One round trip: its time in us into `times`, the echo side's one-way time into
  // `one_way_times` (if given). False if the echo side's report is missing.
  auto exchange = [&](std::vector<double>& times, std::vector<double>* one_way_times) {
    const int64_t t0 = NowNs();
    SendTo(a, b_addr, t0);
    Receive(a);
    times.push_back((NowNs() - t0) / 1e3);
    int64_t arrived;
    if (read(one_way_pipe[0], &arrived, sizeof arrived) != sizeof arrived) return false;
    if (one_way_times != nullptr) one_way_times->push_back(arrived / 1e3);
    return true;
  };
  for (int i = 0; i < reps; ++i) {
    timespec pause{idle_ms / 1000, (idle_ms % 1000) * 1'000'000L};
    nanosleep(&pause, nullptr);
    if (!exchange(round_trip, &one_way)) return 1;
  }
  for (int i = 0; i < kBusy; ++i) {
    if (!exchange(busy, nullptr)) return 1;
  }
  waitpid(child, nullptr, 0);
  const double worst_rt = *std::max_element(round_trip.begin(), round_trip.end());
  const double worst_ow = *std::max_element(one_way.begin(), one_way.end());
  std::printf("after %d ms idle (%d reps): one way median %.1f us (worst %.1f), round trip median %.1f us (worst %.1f)\n",
              idle_ms, reps, Median(one_way), worst_ow, Median(round_trip), worst_rt);
  std::printf("busy stream (%d round trips): round trip median %.1f us\n", kBusy, Median(busy));
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (f == nullptr) {
      std::perror(json.c_str());
      return 1;
    }
    std::fprintf(f,
                 "{\"idle_ms\": %d, \"reps\": %d, \"one_way_us\": {\"median\": %.2f, \"max\": %.2f}, "
                 "\"round_trip_us\": {\"median\": %.2f, \"max\": %.2f}, \"busy_round_trip_us\": %.2f}\n",
                 idle_ms, reps, Median(one_way), worst_ow, Median(round_trip), worst_rt, Median(busy));
    std::fclose(f);
  }
  return 0;
}

// A 3-rank program for log_to_driver (tests/mpi/log_to_driver.sh checks its output): a
// task on each worker rank prints a marker to stdout and to stderr, one prints a long
// partial line without a newline, one floods; then the driver shuts down at once, so the
// markers must be flushed through Shutdown.
#include <prism/api.h>

#include <cstdio>
#include <iostream>
#include <string>

int PrintMarker(int rank) {
  std::printf("marker-out-%d\n", rank);
  std::fprintf(stderr, "marker-err-%d\n", rank);
  std::cout << "marker-cout-" << rank << " no newline at the end";  // flushed at Shutdown
  return rank;
}

int Flood(int lines) {
  std::cout << std::endl;  // ends PrintMarker's unterminated line on this rank
  std::string row(200, 'x');
  for (int i = 0; i < lines; ++i) std::printf("flood %d %s\n", i, row.c_str());
  std::printf("flood-done\n");
  return lines;
}
PRISM_REMOTE(PrintMarker, Flood);

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const bool flood = argc > 1 && std::string(argv[1]) == "flood";
  for (int r = 1; r < world; ++r) {
    prism::Task(PrintMarker).SetResource("rank:" + std::to_string(r), 0.01).Remote(r).Get();
  }
  if (flood) prism::Task(Flood).SetResource("rank:1", 0.01).Remote(200000).Get();
  std::printf("driver-done\n");
  prism::Shutdown();
}

#include <prism/api.h>

#include <iostream>

int Twice(int x) { return 2 * x; }
PRISM_REMOTE(Twice);

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  int v = *prism::Task(Twice).Remote(21).Get();
  prism::Shutdown();
  std::cout << "consumer got " << v << "\n";
  return v == 42 ? 0 : 1;
}

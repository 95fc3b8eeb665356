#include <prism/api.h>
#include <prism/collective.h>

#include <iostream>

int Twice(int x) { return 2 * x; }
PRISM_REMOTE(Twice);

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  int v = *prism::Task(Twice).Remote(21).Get();
  // prism::collective links; without mpirun a group cannot be made, and says so.
  bool clear_error = false;
  try {
    prism::collective::Group::Create("consumer", {0});
  } catch (const prism::Error&) {
    clear_error = true;
  }
  prism::Shutdown();
  std::cout << "consumer got " << v << (clear_error ? "" : " but no error from Group::Create")
            << "\n";
  return v == 42 && clear_error ? 0 : 1;
}

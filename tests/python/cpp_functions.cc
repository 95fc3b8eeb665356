// C++ functions that the Python tests call by name (prism.cpp_function). Built as a shared
// library without the core: its PRISM_REMOTE registrations bind, at load, to the registry
// of the prism._prism module the tests imported first (prism.load_library).
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "prism/api.h"

namespace {

int AddInts(int a, int b) { return a + b; }
double Scale(double x, double by) { return x * by; }
std::string Greet(std::string name) { return "hello, " + name; }
double SumVector(std::vector<double> v) { return std::accumulate(v.begin(), v.end(), 0.0); }
std::vector<double> Ramp(int n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}
int Fail(int x) { throw std::out_of_range("Fail(" + std::to_string(x) + ") was asked to fail"); }

/// A C++ actor: a running sum, with a name and a history.
class Accumulator {
 public:
  static Accumulator* FactoryCreate(std::string name, double start) { return new Accumulator(name, start); }
  double Add(double x) {
    total_ += x;
    history_.push_back(total_);
    return total_;
  }
  std::vector<double> History() { return history_; }
  std::string Name() { return name_; }

 private:
  Accumulator(std::string name, double start) : name_(std::move(name)), total_(start) {}
  std::string name_;
  double total_;
  std::vector<double> history_;
};

}  // namespace

PRISM_REMOTE(AddInts, Scale, Greet, SumVector, Ramp, Fail);
PRISM_REMOTE(Accumulator::FactoryCreate, &Accumulator::Add, &Accumulator::History, &Accumulator::Name);

// prism-train-script: runs an existing training script on a group of Prism workers, one
// process per worker, with torchrun's environment (--backend=torch) or TF_CONFIG
// (--backend=tensorflow) (prism::train::ScriptTrainer; README, "Training existing Python
// scripts"):
//
//   mpirun -n 3 prism-train-script --num-workers=2 --backend=torch -- python3 train.py --epochs=4
//
// Exit status: 0 when every script finished, 75 when SIGUSR1/SIGTERM stopped the run after
// a checkpoint (a job script requeues on it; the same --name resumes), 1 when training
// failed, 2 for bad flags.
#include <iostream>

#include "common/driver.h"
#include "prism/api.h"
#include "prism/train/script_trainer.h"

namespace train = prism::train;

namespace {

struct Flags {
  train::ScriptTrainerOptions options;
  std::vector<std::string> env;
  std::string resume_from;
  bool quiet = false;
  std::vector<std::string> command;
};

/// Declares the flags on `app`, bound to `flags`.
void AddFlags(CLI::App& app, Flags& flags, double& cpus) {
  auto& o = flags.options;
  o.scaling_config.num_workers = 1;
  app.add_option("--num-workers", o.scaling_config.num_workers, "workers, one per rank (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--backend", o.backend, "torch (torchrun's variables) or tensorflow (TF_CONFIG)")
      ->check(CLI::IsMember({"torch", "tensorflow"}));
  app.add_option("--name", o.run_config.name,
                 "the run's name; an existing run resumes from its latest checkpoint (default "
                 "ScriptTrainer_<Slurm job id or time>)");
  app.add_option("--storage-path", o.run_config.storage_path,
                 "where runs live (default $PRISM_STORAGE_PATH, else ~/prism_results)");
  app.add_option("--max-failures", o.run_config.failure_config.max_failures,
                 "restarts from the latest checkpoint after a worker fails; -1: unlimited (default 0)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_option("--report-timeout", o.report_timeout_s,
                 "seconds a script may go without prism_train.report() before it is killed; 0: no "
                 "limit (default 3600)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cpus-per-worker", cpus, "CPUs each worker holds (and OMP_NUM_THREADS; default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--placement-strategy", o.scaling_config.placement_strategy,
                 "PACK (default), SPREAD, STRICT_PACK or STRICT_SPREAD")
      ->check(CLI::IsMember({"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}));
  app.add_option("--num-to-keep", o.run_config.checkpoint_config.num_to_keep,
                 "checkpoints to keep (0: all; default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-score-attribute", o.run_config.checkpoint_config.checkpoint_score_attribute,
                 "a reported metric to keep the best checkpoints by (default: the newest)");
  app.add_option("--checkpoint-score-order", o.run_config.checkpoint_config.checkpoint_score_order,
                 "max (default) or min")
      ->check(CLI::IsMember({"max", "min"}));
  app.add_option("--resume-from", flags.resume_from, "start from this checkpoint directory");
  app.add_option("--env", flags.env, "KEY=VALUE for every script (repeatable)");
  app.add_option("--working-dir", o.working_dir, "the scripts' working directory (default: the ranks')")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--quiet", flags.quiet, "do not print each report on the driver's console");
  app.add_option("command", flags.command, "the program and its arguments (after --)")->required();
  app.positionals_at_end();

}

/// Completes the options from the parsed flags. Returns false, with the reason on stderr,
/// for a bad --env or --resume-from.
bool Complete(Flags& flags, double cpus) {
  auto& o = flags.options;
  o.scaling_config.resources_per_worker["CPU"] = cpus;
  o.run_config.verbose = !flags.quiet;
  for (const auto& kv : flags.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "prism-train-script: --env " << kv << ": expected KEY=VALUE\n";
      return false;
    }
    o.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!flags.resume_from.empty()) {
    try {
      o.resume_from_checkpoint = prism::Checkpoint::FromDirectory(flags.resume_from);
    } catch (const std::exception& e) {
      std::cerr << "prism-train-script: --resume-from: " << e.what() << "\n";
      return false;
    }
  }
  return true;
}

/// Runs the script on the workers: the exit status.
int Run(Flags& flags) {
  try {
    train::Result result = train::ScriptTrainer(flags.command, flags.options).Fit();
    std::cout << "finished: " << result.metrics_history.size() << " report(s) in " << result.path;
    if (result.checkpoint) std::cout << ", latest checkpoint " << result.checkpoint->path();
    std::cout << "\n";
    return 0;
  } catch (const train::TrainingPreemptedError& e) {
    std::cerr << "preempted: " << e.what() << "\n";
    return prism::kExitPreempted;  // the job script requeues on this status
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a training script on a group of Prism workers, one process per worker:\n"
               "  mpirun -n 3 prism-train-script --num-workers=2 --backend=torch -- python3 train.py ARGS\n"
               "Exit status: 0 finished, 75 preempted after a checkpoint (requeue; the same --name "
               "resumes), 1 training failed, 2 bad flags.",
               "prism-train-script"};
  Flags flags;
  double cpus = 1;
  AddFlags(app, flags, cpus);
  return prism_apps::RunDriver(app, argc, argv, [&] {
    return Complete(flags, cpus) ? Run(flags) : prism::cli::kExitBadFlags;
  });
}

// VectorEnv: N copies of an environment with Gymnasium's next-step autoreset
// (gymnasium/vector/sync_vector_env.py, AutoresetMode.NEXT_STEP: the step after an episode
// ends resets that copy and ignores its action, returning the first observation with reward
// 0 and both flags false). It runs on an EnvBatch: the built-in's struct-of-arrays form
// where there is one (CartPole-v1), else GenericBatch, which steps MakeEnv's copies in turn.

#include "prism/errors.h"
#include "rl/env/internal.h"

namespace prism::rl {
namespace internal {
namespace {

class GenericBatch : public EnvBatch {
 public:
  GenericBatch(const std::string& name, int num_envs, const EnvConfig& config)
      : name_(name), needs_reset_(num_envs, 0) {
    for (int i = 0; i < num_envs; ++i) envs_.push_back(MakeEnv(name, config));
    obs_size_ = envs_.front()->observation_space().size();
  }

  int num_envs() const override { return static_cast<int>(envs_.size()); }
  const Space& observation_space() const override { return envs_.front()->observation_space(); }
  const Space& action_space() const override { return envs_.front()->action_space(); }

  void Reset(uint64_t seed, float* obs) override {
    for (size_t i = 0; i < envs_.size(); ++i) {
      Write(i, envs_[i]->Reset(seed + i), obs);
      needs_reset_[i] = 0;
    }
  }

  void Step(const Action* actions, float* obs, double* rewards, uint8_t* terminated,
            uint8_t* truncated) override {
    for (size_t i = 0; i < envs_.size(); ++i)
      envs_[i]->action_space().CheckAction(actions[i], name_);
    for (size_t i = 0; i < envs_.size(); ++i) {
      if (needs_reset_[i]) {
        Write(i, envs_[i]->Reset(), obs);
        rewards[i] = 0;
        terminated[i] = truncated[i] = 0;
        needs_reset_[i] = 0;
        continue;
      }
      StepResult r = envs_[i]->Step(actions[i]);
      Write(i, r.observation, obs);
      rewards[i] = r.reward;
      terminated[i] = r.terminated;
      truncated[i] = r.truncated;
      needs_reset_[i] = r.terminated || r.truncated;
    }
  }

  void StepDiscrete(const int64_t* actions, float* obs, double* rewards, uint8_t* terminated,
                    uint8_t* truncated) override {
    actions_.resize(envs_.size());
    for (size_t i = 0; i < envs_.size(); ++i) actions_[i] = Action::Discrete(actions[i]);
    Step(actions_.data(), obs, rewards, terminated, truncated);
  }

 private:
  void Write(size_t i, const std::vector<float>& o, float* obs) const {
    if (static_cast<int64_t>(o.size()) != obs_size_)
      throw Error(name_ + ": an observation has " + std::to_string(o.size()) +
                  " values but the observation space " + observation_space().ToString() +
                  " holds " + std::to_string(obs_size_) + "; the environment must return one " +
                  "value per element of its observation space");
    std::copy(o.begin(), o.end(), obs + i * obs_size_);
  }

  std::string name_;
  std::vector<std::unique_ptr<Env>> envs_;
  std::vector<uint8_t> needs_reset_;
  std::vector<Action> actions_;
  int64_t obs_size_ = 0;
};

}  // namespace

std::unique_ptr<EnvBatch> MakeGenericBatch(const std::string& name, int num_envs,
                                           const EnvConfig& config) {
  return std::make_unique<GenericBatch>(name, num_envs, config);
}

}  // namespace internal

struct VectorEnv::Impl {
  std::string name;
  uint64_t seed = 0;
  std::unique_ptr<internal::EnvBatch> batch;
  std::vector<float> observations;
  bool reset_called = false;

  void CheckStep(size_t num_actions) const {
    if (!reset_called)
      throw Error("prism::rl::VectorEnv(" + name + "): StepAll before Reset; call Reset() first");
    if (num_actions != static_cast<size_t>(batch->num_envs()))
      throw Error("prism::rl::VectorEnv(" + name + "): StepAll got " + std::to_string(num_actions) +
                  " actions for " + std::to_string(batch->num_envs()) + " environments; pass one per copy");
  }
  void Size(Step& out) const {
    const size_t n = batch->num_envs();
    out.observations = &observations;
    out.rewards.resize(n);
    out.terminated.resize(n);
    out.truncated.resize(n);
  }
};

VectorEnv::VectorEnv(const std::string& name, int num_envs, const EnvConfig& config, uint64_t seed)
    : impl_(std::make_shared<Impl>()) {
  if (num_envs < 1)
    throw Error("prism::rl::VectorEnv(" + name + "): num_envs is " + std::to_string(num_envs) +
                "; it must be >= 1");
  impl_->name = name;
  impl_->seed = seed;
  internal::EnvBatchFactory batched = internal::FindBatchFactory(name);  // throws if unknown
  impl_->batch = batched ? batched(num_envs, config) : internal::MakeGenericBatch(name, num_envs, config);
  impl_->observations.resize(static_cast<size_t>(num_envs) * observation_space().size());
}

int VectorEnv::num_envs() const { return impl_->batch->num_envs(); }
const Space& VectorEnv::observation_space() const { return impl_->batch->observation_space(); }
const Space& VectorEnv::action_space() const { return impl_->batch->action_space(); }

const std::vector<float>& VectorEnv::Reset() {
  impl_->batch->Reset(impl_->seed, impl_->observations.data());
  impl_->reset_called = true;
  return impl_->observations;
}

VectorEnv::Step VectorEnv::StepAll(const std::vector<Action>& actions) {
  impl_->CheckStep(actions.size());
  Step out;
  impl_->Size(out);
  impl_->batch->Step(actions.data(), impl_->observations.data(), out.rewards.data(),
                     out.terminated.data(), out.truncated.data());
  return out;
}

void VectorEnv::StepAll(const std::vector<int64_t>& actions, Step& out) {
  impl_->CheckStep(actions.size());
  if (action_space().kind != Space::Kind::kDiscrete)
    throw Error("prism::rl::VectorEnv(" + impl_->name + "): StepAll with indices needs a Discrete "
                "action space, not " + action_space().ToString() + "; pass Actions instead");
  impl_->Size(out);
  impl_->batch->StepDiscrete(actions.data(), impl_->observations.data(), out.rewards.data(),
                             out.terminated.data(), out.truncated.data());
}

}  // namespace prism::rl

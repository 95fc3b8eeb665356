"""RLlibCallback (ray.rllib.callbacks.callbacks): hooks into an Algorithm's life, for what runs on
the driver: on_algorithm_init, on_train_result (which may add keys to the result) and
on_checkpoint_loaded. prism::rl's env runners are C++, so the per-episode and per-sample hooks
(on_episode_start/step/end, on_sample_end, on_environment_created, ...) are not called;
config.callbacks() refuses a class that overrides them, naming them."""

# The env-runner hooks prism::rl does not call.
ENV_RUNNER_HOOKS = ("on_environment_created", "on_episode_created", "on_episode_start", "on_episode_step",
                    "on_episode_end", "on_sample_end", "on_postprocess_trajectory", "on_create_policy",
                    "on_sub_environment_created", "on_evaluate_start", "on_evaluate_end", "on_learn_on_batch")


class RLlibCallback:
    def on_algorithm_init(self, *, algorithm, metrics_logger=None, **kwargs):
        pass

    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs):
        pass

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        pass


DefaultCallbacks = RLlibCallback  # RLlib's older name

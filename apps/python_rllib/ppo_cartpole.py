#!/usr/bin/env python3
"""PPO on CartPole-v1 with prism.rllib, as an RLlib user writes it (RLlib's getting-started
example with `ray` changed to `prism`): build the algorithm from a PPOConfig, train() until the
mean return reaches --stop-return, save, restore with Algorithm.from_checkpoint, and run the
restored greedy policy on a Python CartPole.

    mpirun --oversubscribe -n 3 python3 apps/python_rllib/ppo_cartpole.py     # 2 env runners, ranks 1-2
    python3 apps/python_rllib/ppo_cartpole.py --num-env-runners=0             # one process
    mpirun --oversubscribe -n 3 python3 apps/python_rllib/ppo_cartpole.py --python-env

--python-env trains on the Python CartPole of cartpole_env.py instead of prism::rl's C++ one:
its reset and step run inside the C++ env runners on the worker ranks. Exit status 0 if the
stop return was reached, 3 if not.
"""

import argparse
import os
import sys
import time

import prism
from prism.rllib.algorithms.algorithm import Algorithm  # every rank imports prism.rllib before init
from prism.rllib.algorithms.ppo import PPOConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cartpole_env import CartPole  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-env-runners", type=int, default=2)
    ap.add_argument("--num-envs-per-env-runner", type=int, default=1)
    ap.add_argument("--num-learners", type=int, default=0)
    ap.add_argument("--stop-return", type=float, default=450.0)
    ap.add_argument("--max-iterations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--python-env", action="store_true", help="train on cartpole_env.CartPole (Python)")
    ap.add_argument("--checkpoint-dir", default="/tmp/prism_rllib_ppo_cartpole")
    ap.add_argument("--eval-episodes", type=int, default=5)
    args = ap.parse_args()

    prism.init()  # worker ranks serve env runners from here until the driver's shutdown

    config = (
        PPOConfig()
        .environment(CartPole if args.python_env else "CartPole-v1")
        .env_runners(num_env_runners=args.num_env_runners, num_envs_per_env_runner=args.num_envs_per_env_runner)
        .learners(num_learners=args.num_learners)
        .training(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01)  # RLlib's tuned CartPole settings
        .debugging(seed=args.seed)
    )
    algo = config.build_algo()

    start = time.monotonic()
    reached = False
    for _ in range(args.max_iterations):
        result = algo.train()
        ret = result["env_runners"]["episode_return_mean"]
        steps = result["num_env_steps_sampled_lifetime"]
        print(f"iter {result['training_iteration']:3d}  return {ret:6.1f}  env steps {steps:7d}  "
              f"{result['env_runners']['num_env_steps_sampled'] / result['time_this_iter_s']:6.0f} steps/s  "
              f"total_loss {result['learners']['default_policy']['total_loss']:.3f}", flush=True)
        if ret >= args.stop_return:
            reached = True
            break
    seconds = time.monotonic() - start
    print(f"{'reached' if reached else 'did not reach'} return {ret:.1f} after {result['training_iteration']} "
          f"iterations, {steps} env steps, {seconds:.1f} s")

    checkpoint = algo.save(args.checkpoint_dir).checkpoint
    algo.stop()
    restored = Algorithm.from_checkpoint(checkpoint.path)
    print(f"saved to {checkpoint.path} and restored (iteration {restored.iteration})")

    env = CartPole()
    total = 0.0
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=1_000_000 + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(restored.compute_single_action(obs))
            total += reward
            done = terminated or truncated
    if args.eval_episodes:
        print(f"greedy evaluation of the restored policy: mean return {total / args.eval_episodes:.1f} over "
              f"{args.eval_episodes} episodes")
    restored.stop()
    prism.shutdown()
    return 0 if reached else 3


if __name__ == "__main__":
    sys.exit(main())

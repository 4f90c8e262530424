"""CPU seconds to trace the phase-gated policy and to run its first call, by the policies compiled into it.

    .venv/bin/python research/policy_trace_cost.py [--config smoke] [--reps 3]

Builds the config's agent (state observations, Pendulum's sizes) with all four policies and with the config's own
(`agent.run_policies`), and prints for each the median CPU seconds of the trace, of the first call and the number
of graph nodes (the function and its library). docs/testing.md quotes it ("Built next").
"""

from __future__ import annotations

import argparse
import statistics
import time

from planet_sac.startup import make_tensorflow_deterministic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="smoke")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    make_tensorflow_deterministic()  # as runs and tests compile
    import tensorflow as tf

    from planet_sac.agent import Agent, run_policies
    from planet_sac.config import POLICIES
    from planet_sac.config_loading import load_config

    config = load_config(args.config)
    for policies in (POLICIES, run_policies(config)):
        traces, calls, nodes = [], [], 0
        for _ in range(args.reps):
            policy = Agent.build(config, "state", (3,), 1, policies).policy
            start = time.process_time()
            graph = policy.compiled.get_concrete_function().graph
            traced = time.process_time()
            policy.act(tf.zeros([1, 3]), policy.initial_state(1), "train")
            traces.append(traced - start)
            calls.append(time.process_time() - traced)
            definition = graph.as_graph_def()
            nodes = len(definition.node) + sum(len(function.node_def) for function in definition.library.function)
        print(f"{', '.join(policy.policies):35s} trace {statistics.median(traces):.2f} s, first call "
              f"{statistics.median(calls):.2f} s, {nodes} nodes")


if __name__ == "__main__":
    main()

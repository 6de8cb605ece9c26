"""Self-play on a Ray cluster of this machine against self-play in this process (docs/cluster.md).

    python docs/tools/cluster_bench.py                       # model=small, instant network, 1 and 2 nodes
    python docs/tools/cluster_bench.py --window 2 --repeats 1 --nodes 1 model=tiny   # a smoke run

Measures, in one process, windows of self-play (moves per second, after a warm-up window) of the
in-process driver and of the cluster driver with 1 node (and with each --nodes count), alternated
`--repeats` times; prints each one's median and the ratio to the in-process driver. The network
is azshogi-bench's instant one (bench.network=instant): what is measured is everything around
it, the part a cluster adds to. Then what crosses the network: the bytes of the finished games a
node sends (pickled as Ray sends them: numpy arrays out of band) per training position, and the
bytes of one weights version (the state dict, pickled) for model=small, medium and large; and
how soon a node killed mid-phase is dropped (with the largest --nodes count).
Extra arguments are Hydra overrides (e.g. model=tiny). Needs Ray (pip install -e ".[cluster]");
starts a local Ray instance on 127.0.0.1 and stops it.
"""
import argparse
import os
import pickle
import signal
import statistics
import sys
import time
from pathlib import Path

BASE = ["model=small", "device=cpu", "selfplay.num_workers=0", "selfplay.num_actors=128",
        "search.num_simulations=32", "search.max_num_considered_actions=16", "run=cluster-bench"]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=8.0, help="seconds per measured window")
    parser.add_argument("--repeats", type=int, default=3, help="windows of each driver, alternated")
    parser.add_argument("--nodes", default="1,2", help="node counts to measure, comma-separated")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model=tiny")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from conftest import compose_config  # the tests' Hydra composition

    from azshogi.config import to_config
    from azshogi.train.loop import build_components

    node_counts = [int(n) for n in args.nodes.split(",")]

    def config(*extra):
        return to_config(compose_config(BASE + list(args.overrides) + list(extra)))

    drivers = {"in process": build_components(config(), stand_in=0.0).selfplay}
    for n in node_counts:
        # one local Ray instance for all (the first driver starts it): a CPU for every node
        drivers[f"{n} node{'s' if n > 1 else ''}"] = build_components(
            config("+cluster=ray", "cluster.address=local", f"cluster.nodes={n}",
                   f"cluster.local_cpus={sum(node_counts)}"), stand_in=0.0).selfplay
    try:
        measure(drivers, args.window, args.repeats, node_counts)
    finally:
        for driver in reversed(list(drivers.values())):  # the one that started Ray last
            driver.close()
    weights(compose_config, to_config)


def measure(drivers: dict, window: float, repeats: int, node_counts: list[int]) -> None:
    from azshogi.train.bench import selfplay_window

    rates: dict[str, list[float]] = {name: [] for name in drivers}
    for driver in drivers.values():  # warm-up: start the nodes, fill the games of every age
        selfplay_window(driver, window)
    for _ in range(repeats):
        for name, driver in drivers.items():
            rates[name].append(selfplay_window(driver, window)["positions_per_s"])
    base = statistics.median(rates["in process"])
    print(f"self-play moves/s, median of {repeats} windows of {window:g} s (instant network):")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:>10}: {median:8.1f}  ({median / base:.3f} of in process)  windows "
              + " ".join(f"{v:.1f}" for v in values))
    if max(node_counts) > 1:  # a node killed mid-phase: how soon it is dropped, what is lost
        lose_a_node(drivers[f"{max(node_counts)} nodes"])
    # what a node sends: finished games, pickled as Ray pickles them
    games: list = []
    for game in drivers["in process"].play(until=lambda: len(games) >= 64):
        games.append(game)
    positions = sum(len(g.positions) for g in games)
    sent = len(pickle.dumps(games, protocol=5))
    print(f"finished games: {len(games)} games, {positions} positions, {sent:,} bytes pickled: "
          f"{sent / positions:,.0f} bytes per training position, {sent / len(games):,.0f} per game")


def lose_a_node(driver) -> None:
    victim, killed, dropped = driver.alive[0], [0.0], [0.0]

    def until() -> bool:
        now = time.monotonic()
        if not killed[0]:
            os.kill(victim.info["pid"], signal.SIGKILL)
            killed[0] = now
        if not victim.alive and not dropped[0]:
            dropped[0] = now
        return bool(dropped[0]) and now - dropped[0] > 2

    for _ in driver.play(until=until):
        pass
    print(f"a node killed mid-phase ({victim.name}): dropped {dropped[0] - killed[0]:.2f} s later (checked "
          f"between moves); games lost {driver.games_lost} (its games in progress: {victim.info['games']}); "
          f"nodes alive {len(driver.alive)}")


def weights(compose_config, to_config) -> None:
    from azshogi.nn.network import from_config

    for size in ("small", "medium", "large"):
        model_cfg = to_config(compose_config([f"model={size}"])).model
        state = {k: v.cpu() for k, v in from_config(model_cfg).state_dict().items()}
        raw = sum(v.numel() * v.element_size() for v in state.values())
        print(f"weights version, model={size} ({model_cfg.blocks}x{model_cfg.channels}): {raw:,} bytes of "
              f"tensors, {len(pickle.dumps(state, protocol=5)):,} pickled")


if __name__ == "__main__":
    main()

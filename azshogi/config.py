"""Typed configuration: the dataclasses Hydra validates, and the range checks made at start-up.

Hydra checks types and enum values while it merges overrides; `validate` checks ranges and
relations between keys, and names the offending key in its message. Code past the command line
receives these dataclasses (via `to_config`), never a raw DictConfig.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

# the longest exhaustive mate search (cshogi's mate_move) a setting may ask for: its time grows
# many times every two plies (an arena match at 15 plies: 13 s for two games; at 99 it never ended)
MAX_MATE_PLIES = 11


class ConfigError(ValueError):
    """A setting is out of range or contradicts another; the message names the key."""


class SearchKind(str, Enum):
    gumbel = "gumbel"
    puct = "puct"


class Optimizer(str, Enum):
    sgd = "sgd"
    adamw = "adamw"


class LrSchedule(str, Enum):
    constant = "constant"
    cosine = "cosine"
    step = "step"


class ValueLoss(str, Enum):
    bce = "bce"
    mse = "mse"


class ReplayWindow(str, Enum):
    """Where training batches are assembled (train/device_replay.py)."""

    auto = "auto"  # device on CUDA when the window takes at most a quarter of its memory, else host
    host = "host"  # on the CPU from the replay buffer, each batch's planes decoded from the positions
    device = "device"  # the window kept on the training device, batches sampled and expanded there


class Dtype(str, Enum):
    auto = "auto"  # bf16 on CUDA that has it (else fp16) and on CPUs with native bf16 (AVX512_BF16, AMX), else fp32
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


@dataclass
class ModelConfig:
    """Residual policy-value network (dlshogi's input and output layout)."""

    blocks: int = 5  # residual blocks
    channels: int = 64  # convolution channels
    value_hidden: int = 256  # width of the value head's hidden layer
    # a second policy head trained on the opponent's reply (KataGo's auxiliary target; weighed by
    # train.opponent_policy_weight): part of the network's shape, unused in play
    opponent_policy: bool = False


@dataclass
class SearchConfig:
    kind: SearchKind = SearchKind.gumbel
    num_simulations: int = 32  # network evaluations per move, after the root's
    # Gumbel AlphaZero (Danihelka et al. 2022)
    max_num_considered_actions: int = 16  # m: root actions sampled by Gumbel-top-k
    c_visit: float = 50.0
    c_scale: float = 0.1
    rescale_values: bool = True  # min-max rescale completed Q before sigma (as mctx)
    # PUCT (Silver et al. 2018)
    c_base: float = 19652.0
    c_init: float = 1.25
    dirichlet_alpha: float = 0.15
    dirichlet_weight: float = 0.25
    leaves_per_step: int = 1  # leaves collected per tree per forward pass (virtual loss)
    virtual_loss: float = 1.0
    # both
    sampling_plies: int = 0  # self-play samples its moves (Gumbel: improved policy; PUCT: visits) for the first plies
    leaf_mate_search: bool = True  # a leaf whose side to move mates in one is a win


@dataclass
class RulesConfig:
    max_plies: int = 320  # a game reaching this many plies is a draw (dlshogi's self-play value)
    impasse_rule: int = 27  # 24 or 27: the point rule of the impasse declaration
    # 0 = off; odd N: in self-play, a side to move with a mate in N (cshogi's mate search at the
    # root) wins at once, as dlshogi's self-play ends games by its root mate search. Without it an
    # untrained network's search misses most mates in one and self-play drifts into ply-limit draws.
    mate_adjudication_plies: int = 5


@dataclass
class InferenceConfig:
    """How the network is run for search (self-play, engine, matches)."""

    # autocast dtype; auto = bf16 on a GPU that has it and a CPU with native bf16 (nn/cpu_bf16.py), else fp16 / fp32
    dtype: Dtype = Dtype.auto
    channels_last: bool = True
    fold_batchnorm: bool = True  # evaluate a batch-norm-folded form, refreshed when weights change
    # on a CPU, each folded convolution with its bias, residual add and ReLU as one oneDNN call
    fuse: bool = True
    compile: bool = False  # torch.compile on padded batch shapes (slow first start, faster after)
    # with compile on CUDA: replay each batch bucket's forward pass as a captured CUDA graph
    # (torch.compile's reduce-overhead mode): no per-op launch cost on the host
    cuda_graphs: bool = False
    compile_cache: str = "~/.cache/azshogi/inductor"  # persistent compile cache


@dataclass
class SelfPlayConfig:
    # Games in flight, searched together with batched forward passes. 0 = auto: 128 on the CPU;
    # on CUDA 128 per worker (at least 512, at most 4096), so the server's batches fill the GPU.
    num_actors: int = 0
    search_threads: int = 1  # actor groups searched in parallel threads (2: search overlaps inference)
    write_hcpe3: bool = True  # also write finished games as dlshogi hcpe3 under logs/<run>/hcpe3/
    # Worker processes that share the actors' tree search; the main process keeps the one model
    # and serves their evaluations in batches (workers.py). 0 = search in the main process.
    # -1 = auto: 0 on the CPU; on CUDA one per core but one (the server's).
    num_workers: int = -1
    server_max_batch: int = 0  # largest forward pass of the inference server; 0 = all actors' leaves
    server_wait_ms: float = 2.0  # how long a partial batch waits for more requests from searching workers
    # Groups of games each worker process keeps, searched in turn by threads: one group searches
    # while another's leaves are on the device, so neither the worker nor the device waits for
    # the other (1: the worker's games in lockstep with the forward passes). At most a worker's games.
    worker_groups: int = 2
    # Playout-cap randomization (KataGo): each move, with this probability (drawn from the game's
    # own random stream), gets a cheap search of `cheap_simulations` and is played but recorded
    # as no training position; the other moves get the full search and are recorded. 0 = off.
    cheap_search_prob: float = 0.0
    cheap_simulations: int = 4
    # Resignation (AlphaZero): a side whose full searches' root win rate stays below
    # `resign_threshold` for `resign_moves` consecutive own moves resigns, except in a share
    # `resign_playout_share` of games (drawn from each game's own stream), played out to count
    # false resignations (selfplay/false_resign_rate; selfplay/resign_threshold_suggested: the
    # threshold those games support, 5% false, AlphaZero's rule). 0 = off.
    resign_threshold: float = 0.0
    resign_moves: int = 3
    resign_playout_share: float = 0.1
    # The automatic threshold (AlphaZero's rule, applied): > 0 (AlphaZero: 0.05), at each checkpoint
    # the run sets the threshold to the highest one at which no more than this share of the last
    # `resign_window` checkpoints' played-out would-be resignations were false, starting from
    # resign_threshold (0: none until played-out games support one; selfplay/resignation.py). 0 = the
    # threshold stays resign_threshold.
    resign_target: float = 0.0
    resign_window: int = 10
    # Opening diversity: each game starts with 0..opening_random_plies uniformly random legal
    # plies (the count and the moves drawn from the game's own stream), in its record but no
    # training positions. 0 = off.
    opening_random_plies: int = 0


@dataclass
class ReplayConfig:
    capacity: int = 500_000  # positions kept (the most recent)
    min_policy_prob: float = 1e-4  # policy-target entries below this are dropped, the rest renormalised
    # .hcpe / .hcpe3 files whose positions fill the buffer when it has never held any (a new
    # run, or one started from an azshogi-pretrain checkpoint)
    seed_files: List[str] = field(default_factory=list)
    # a resume whose window needs a damaged or missing segment (and no older checkpoint does
    # without it) starts with the window's positions after that segment instead of refusing
    skip_damaged: bool = False


@dataclass
class TrainConfig:
    batch_size: int = 256
    optimizer: Optimizer = Optimizer.sgd
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    lr_schedule: LrSchedule = LrSchedule.constant
    decay_steps: int = 100_000  # cosine: steps to reach min_lr_ratio; step: steps per x0.1
    min_lr_ratio: float = 0.01
    grad_clip: float = 10.0  # max gradient norm; 0 = off
    value_loss: ValueLoss = ValueLoss.bce
    value_loss_weight: float = 1.0
    value_target_root_weight: float = 0.0  # 0 = game result only; 1 = search root value only
    # the opponent-policy head's loss weight (model.opponent_policy; KataGo's 0.15)
    opponent_policy_weight: float = 0.15
    # surprise-weighted sampling (KataGo's policy surprise weighting; train/surprise.py): this
    # share of each batch is drawn in proportion to a position's surprise (how far its policy
    # target is from the policy of the network that played it), the rest uniformly; 0 = uniform
    surprise_weight: float = 0.0
    # the network that plays (checkpoints' network for the engine, arena, exports and the in-loop
    # rating) is an average of the trained one over checkpoints: at each, average <- d x average
    # + (1 - d) x network (train/averaging.py); 0 = off, the trained network plays
    average_decay: float = 0.0
    # each sampled position is trained on as its mirror image (files reflected) with probability
    # 1/2: the rules are symmetric, so every position teaches its mirror image too
    mirror: bool = False
    amp: bool = True  # mixed precision on CUDA (fp16 with loss scaling)
    cpu_bf16: bool = False  # bf16 autocast for training on a CPU with native bf16 (elsewhere fp32, and the log says so)
    max_consecutive_skips: int = 20  # non-finite steps in a row before the run stops
    log_every: int = 10  # training steps between TensorBoard points (and losses read back from the device)
    # where batches are assembled: auto, host, device (train/device_replay.py)
    replay_window: ReplayWindow = ReplayWindow.auto


@dataclass
class LoopConfig:
    positions_per_checkpoint: int = 20_000  # new positions (finished games) before training
    steps_per_checkpoint: int = 100  # optimizer steps per training phase
    max_checkpoints: int = 0  # stop after this many checkpoints; 0 = until stopped
    keep_checkpoints: int = 5  # checkpoint files kept per run (the newest)
    selfplay_games_saved: int = 2  # finished games per checkpoint written as KIF under logs/<run>/games


@dataclass
class EvalConfig:
    """Matches inside the loop (azshogi/evaluation.py); games against each opponent."""

    every: int = 5  # evaluate every this many checkpoints; 0 = never
    games: int = 20  # games per opponent, colours alternating, all in flight at once
    num_simulations: int = 0  # the evaluated model's simulations per move; 0 = search.num_simulations
    opening_plies: int = 4  # uniformly random plies opening each pair of games, for variety
    max_plies: int = 0  # a game reaching this ply is a draw; 0 = rules.max_plies
    # fixed opponents: rungs of the ladder (play/ladder.py): random, greedy, Fairy-Stockfish rungs
    anchors: List[str] = field(default_factory=lambda: ["random", "greedy"])
    # also play the N rungs of the ladder nearest to the last rating (0 = off): the run keeps
    # meeting opponents of its strength as it climbs (Fairy-Stockfish rungs need it installed)
    ladder: int = 0
    previous: bool = True  # also play the last evaluated checkpoint (for the rating curve)
    usi_engine: Optional[str] = None  # an external USI engine command as a further anchor
    usi_options: Dict[str, str] = field(default_factory=dict)  # its setoption values
    usi_go: str = "byoyomi 100"  # its go arguments
    records_saved: int = 2  # games per match saved as CSA under logs/<run>/eval/


class ClusterBackend(str, Enum):
    none = "none"  # self-play on this machine (selfplay.num_workers)
    ray = "ray"  # self-play on the nodes of a Ray cluster (selfplay/cluster.py; pip install -e ".[cluster]")


@dataclass
class ClusterConfig:
    """Self-play on a Ray cluster (`+cluster=ray`, docs/cluster.md): `nodes` Ray actors, each
    running this machine's self-play (the selfplay settings, per node) on its own device, feed
    the one learner in the main process."""

    backend: ClusterBackend = ClusterBackend.none
    # local: a Ray instance started on this machine, on 127.0.0.1 only (to try it, and the tests);
    # auto: the cluster this machine joined with `ray start`; HOST:PORT: that cluster's head
    address: str = "local"
    nodes: int = 1  # self-play nodes (Ray actors)
    node_cpus: float = 1.0  # CPUs each node reserves (Ray's scheduling; its worker processes share them)
    node_gpus: float = 0.0  # GPUs each node reserves: 1 puts each node on a machine of its own GPU
    node_device: str = "auto"  # the node's device for its network: auto (its CUDA when it has one), cpu, cuda
    local_cpus: int = 0  # address=local: CPUs the local Ray instance offers (0 = nodes x node_cpus)
    call_timeout_s: float = 300.0  # a node silent this long in one call (a move of its games) is dropped
    start_timeout_s: float = 300.0  # a node not ready this long after it was asked for is given up


class BenchNetwork(str, Enum):
    real = "real"
    instant = "instant"  # answers without the network: what everything around it costs
    delay = "delay"  # answers after bench.delay_ms without holding the GIL: a GPU as a CPU can imitate it


@dataclass
class BenchConfig:
    """azshogi-bench: how long to measure, and what (train/bench.py)."""

    seconds: float = 10.0  # length of each measured window (network alone, then self-play)
    warmup_seconds: float = 5.0  # self-play before the first window
    repeats: int = 3  # windows of each kind, alternated; medians are reported
    network: BenchNetwork = BenchNetwork.real
    fake_clients: int = 0  # > 0: the inference server alone, fed by this many clients (no search)
    plies: List[int] = field(default_factory=list)  # per-move cost at these game lengths (in process)
    delay_ms: float = 5.0  # bench.network=delay: the stand-in's time per forward pass, whatever the batch
    train: bool = False  # the training step instead of self-play (train/train_bench.py)
    train_positions: int = 10_000  # bench.train: positions of random games in the replay window


@dataclass
class PretrainConfig:
    """Supervised training from dlshogi's .hcpe / .hcpe3 files (azshogi-pretrain)."""

    train_files: List[str] = field(default_factory=list)
    test_files: List[str] = field(default_factory=list)  # held out: test/ figures in TensorBoard
    steps: int = 1000  # optimizer steps (batches of train.batch_size, sampled uniformly)
    eval_every: int = 200  # steps between evaluations on the test files
    test_positions: int = 10_000  # test positions evaluated (a fixed random subset)


@dataclass(frozen=True)
class StageConfig:
    """One stage of a run's schedule (train/stages.py): once `from_checkpoint` checkpoints are
    written (and with `when_flat`, once the in-loop rating has then stopped rising), the settings
    in `set` replace the run's (those of the stages before it included), until `until_checkpoint`
    checkpoints are written, if it has one. In the config, `stages` maps each stage's name to these
    keys (a plain mapping, so that a command line can add one: +stages.NAME={from_checkpoint:N,
    set:{...}}); `stages_in_order` reads them."""

    from_checkpoint: int
    # settings as in the config, nested ({search: {num_simulations: 64}}) or dotted
    # ({search.num_simulations: 64}); the keys a stage may set are STAGE_KEYS
    set: Dict[str, Any]
    # > 0: from from_checkpoint on, the stage waits until the last `when_flat` in-loop ratings are
    # none above the best one before them by more than its own 95% margin (train/stages.rating_flat)
    when_flat: int = 0
    # > from_checkpoint: the stage ends once this many checkpoints are written, and what it set is
    # again what the run and the other stages in force say (0 = it lasts the run); not with
    # when_flat (its start is not known in advance) nor model.* (a network does not shrink)
    until_checkpoint: int = 0

    def ended(self, checkpoints: int) -> bool:
        """Whether the stage has ended once `checkpoints` checkpoints are written."""
        return 0 < self.until_checkpoint <= checkpoints


@dataclass
class Config:
    run: str = "default"  # run name: checkpoints/<run>/ and logs/<run>/; an existing run resumes
    seed: int = 0
    device: str = "auto"  # auto (CUDA when available), cpu, cuda, cuda:N
    resume: Optional[str] = None  # a checkpoint file to start from
    checkpoint_root: str = "checkpoints"
    log_root: str = "logs"
    model: ModelConfig = field(default_factory=ModelConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    # the run's schedule: named stages, each from a checkpoint on (train/stages.py, docs/settings.md)
    stages: Dict[str, Any] = field(default_factory=dict)  # name -> {from_checkpoint: N, set: {...}}


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=Config)


def _check(ok: bool, key: str, message: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r}: {message}")


_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def validate(cfg: Config) -> Config:
    """Checks ranges and relations; raises ConfigError naming the first bad key."""
    _check(bool(_RUN.match(cfg.run)), "run", "use letters, digits, '.', '_' and '-'", cfg.run)
    _check(bool(_DEVICE.match(cfg.device)), "device", "allowed: auto, cpu, cuda, cuda:N", cfg.device)
    m, s, r, sp, rp, t, lp = (cfg.model, cfg.search, cfg.rules, cfg.selfplay, cfg.replay,
                              cfg.train, cfg.loop)
    _check(0 <= cfg.seed < 2**63, "seed", "must be in [0, 2**63)", cfg.seed)
    # the largest shogi networks trained anywhere are some 40 blocks of 512 channels: far past it is a typo
    _check(1 <= m.blocks <= 256, "model.blocks", "must be in [1, 256]", m.blocks)
    _check(1 <= m.channels <= 4096, "model.channels", "must be in [1, 4096]", m.channels)
    _check(m.value_hidden >= 1, "model.value_hidden", "must be >= 1", m.value_hidden)
    _check(s.num_simulations >= 1, "search.num_simulations", "must be >= 1", s.num_simulations)
    # 593 is the largest number of legal moves of any shogi position.
    _check(2 <= s.max_num_considered_actions <= 593, "search.max_num_considered_actions",
           "must be in [2, 593] (the legal-move range)", s.max_num_considered_actions)
    _check(s.c_visit >= 0, "search.c_visit", "must be >= 0", s.c_visit)
    _check(s.c_scale > 0, "search.c_scale", "must be > 0", s.c_scale)
    _check(s.c_base > 0, "search.c_base", "must be > 0", s.c_base)
    _check(s.c_init > 0, "search.c_init", "must be > 0", s.c_init)
    _check(s.dirichlet_alpha > 0, "search.dirichlet_alpha", "must be > 0", s.dirichlet_alpha)
    _check(0 <= s.dirichlet_weight <= 1, "search.dirichlet_weight", "must be in [0, 1]", s.dirichlet_weight)
    _check(s.sampling_plies >= 0, "search.sampling_plies", "must be >= 0", s.sampling_plies)
    _check(s.leaves_per_step >= 1, "search.leaves_per_step", "must be >= 1", s.leaves_per_step)
    _check(s.virtual_loss >= 0, "search.virtual_loss", "must be >= 0", s.virtual_loss)
    _check(r.max_plies >= 1, "rules.max_plies", "must be >= 1", r.max_plies)
    _check(r.impasse_rule in (24, 27), "rules.impasse_rule", "allowed: 24, 27", r.impasse_rule)
    _check(r.mate_adjudication_plies == 0 or (r.mate_adjudication_plies % 2 == 1
                                               and 0 < r.mate_adjudication_plies <= MAX_MATE_PLIES),
           "rules.mate_adjudication_plies", f"must be 0 (off) or an odd number of plies up to {MAX_MATE_PLIES}",
           r.mate_adjudication_plies)
    _check(sp.num_actors >= 0, "selfplay.num_actors", "must be >= 1 (or 0 = auto)", sp.num_actors)
    _check(sp.num_workers >= -1, "selfplay.num_workers", "must be >= 0 (or -1 = auto)", sp.num_workers)
    _check(sp.search_threads >= 1 and (sp.num_actors == 0 or sp.search_threads <= sp.num_actors),
           "selfplay.search_threads", "must be in [1, num_actors]", sp.search_threads)
    _check(sp.search_threads == 1 or sp.num_workers <= 0, "selfplay.search_threads",
           "must be 1 unless selfplay.num_workers=0 (workers already search in parallel)", sp.search_threads)
    _check(sp.num_actors == 0 or sp.num_workers <= sp.num_actors, "selfplay.num_workers",
           f"must be in [0, selfplay.num_actors={sp.num_actors}] (0 = self-play in the main process)",
           sp.num_workers)
    _check(sp.server_max_batch >= 0, "selfplay.server_max_batch", "must be >= 0 (0 = all actors' leaves)",
           sp.server_max_batch)
    _check(sp.server_wait_ms >= 0, "selfplay.server_wait_ms", "must be >= 0", sp.server_wait_ms)
    _check(sp.worker_groups >= 1, "selfplay.worker_groups", "must be >= 1", sp.worker_groups)
    _check(0 <= sp.cheap_search_prob < 1, "selfplay.cheap_search_prob", "must be in [0, 1) (0 = off)",
           sp.cheap_search_prob)
    _check(sp.cheap_simulations >= 1, "selfplay.cheap_simulations", "must be >= 1", sp.cheap_simulations)
    _check(sp.cheap_search_prob == 0 or sp.cheap_simulations < s.num_simulations, "selfplay.cheap_simulations",
           f"must be below search.num_simulations={s.num_simulations} (the cheap search is the smaller one)",
           sp.cheap_simulations)
    _check(0 <= sp.resign_threshold < 1, "selfplay.resign_threshold", "must be a win rate in [0, 1) (0 = off)",
           sp.resign_threshold)
    _check(sp.resign_moves >= 1, "selfplay.resign_moves", "must be >= 1", sp.resign_moves)
    _check(0 <= sp.resign_target < 1, "selfplay.resign_target",
           "must be a share of false resignations in [0, 1) (0 = a fixed threshold; AlphaZero: 0.05)", sp.resign_target)
    _check(sp.resign_target == 0 or sp.resign_playout_share > 0, "selfplay.resign_playout_share",
           "must be > 0 with selfplay.resign_target: the automatic threshold is set from the games played out",
           sp.resign_playout_share)
    _check(sp.resign_target == 0 or sp.resign_threshold <= 0.5, "selfplay.resign_threshold",
           "must be <= 0.5 with selfplay.resign_target (the automatic threshold's rule tries 0.01 to 0.5)",
           sp.resign_threshold)
    _check(sp.resign_window >= 1, "selfplay.resign_window", "must be >= 1 (checkpoints)", sp.resign_window)
    _check(0 <= sp.resign_playout_share <= 1, "selfplay.resign_playout_share", "must be in [0, 1]",
           sp.resign_playout_share)
    _check(sp.opening_random_plies >= 0, "selfplay.opening_random_plies", "must be >= 0 (0 = off)",
           sp.opening_random_plies)
    # the policy targets' ring holds 64 entries a position: 10 positions' room for one with all
    # 593 legal moves
    _check(rp.capacity >= 10, "replay.capacity", "must be >= 10 (positions)", rp.capacity)
    _check(0 <= rp.min_policy_prob < 1, "replay.min_policy_prob", "must be in [0, 1)", rp.min_policy_prob)
    _check(1 <= t.batch_size <= rp.capacity, "train.batch_size",
           f"must be in [1, replay.capacity] (a batch draws from the window's {rp.capacity:,} positions)", t.batch_size)
    _check(0 < t.lr <= 10, "train.lr", "must be in (0, 10] (a larger rate sends the weights off at once)", t.lr)
    _check(0 <= t.momentum < 1, "train.momentum", "must be in [0, 1)", t.momentum)
    _check(t.weight_decay >= 0, "train.weight_decay", "must be >= 0", t.weight_decay)
    _check(t.warmup_steps >= 0, "train.warmup_steps", "must be >= 0", t.warmup_steps)
    _check(t.decay_steps >= 1, "train.decay_steps", "must be >= 1", t.decay_steps)
    _check(0 <= t.min_lr_ratio <= 1, "train.min_lr_ratio", "must be in [0, 1]", t.min_lr_ratio)
    _check(t.grad_clip >= 0, "train.grad_clip", "must be >= 0 (0 = off)", t.grad_clip)
    _check(t.value_loss_weight >= 0, "train.value_loss_weight", "must be >= 0", t.value_loss_weight)
    _check(0 <= t.opponent_policy_weight < math.inf, "train.opponent_policy_weight",
           "must be a finite number >= 0 (used with model.opponent_policy=true)", t.opponent_policy_weight)
    _check(0 <= t.surprise_weight <= 1, "train.surprise_weight", "must be in [0, 1] (0 = uniform sampling)",
           t.surprise_weight)
    _check(0 <= t.average_decay < 1, "train.average_decay",
           "must be in [0, 1) (0 = off: the trained network plays; 0.8 weighs about the last 10 checkpoints)",
           t.average_decay)
    _check(0 <= t.value_target_root_weight <= 1, "train.value_target_root_weight",
           "must be in [0, 1]", t.value_target_root_weight)
    _check(t.max_consecutive_skips >= 1, "train.max_consecutive_skips", "must be >= 1", t.max_consecutive_skips)
    _check(t.log_every >= 1, "train.log_every", "must be >= 1", t.log_every)
    _check(lp.positions_per_checkpoint >= 1, "loop.positions_per_checkpoint", "must be >= 1",
           lp.positions_per_checkpoint)
    _check(lp.steps_per_checkpoint >= 1, "loop.steps_per_checkpoint", "must be >= 1", lp.steps_per_checkpoint)
    _check(lp.max_checkpoints >= 0, "loop.max_checkpoints", "must be >= 0 (0 = no limit)", lp.max_checkpoints)
    _check(lp.keep_checkpoints >= 1, "loop.keep_checkpoints", "must be >= 1", lp.keep_checkpoints)
    _check(lp.selfplay_games_saved >= 0, "loop.selfplay_games_saved", "must be >= 0", lp.selfplay_games_saved)
    _validate_eval(cfg.eval)
    _validate_cluster(cfg.cluster)
    _validate_stages(cfg)
    b = cfg.bench
    _check(b.seconds > 0, "bench.seconds", "must be > 0", b.seconds)
    _check(b.warmup_seconds >= 0, "bench.warmup_seconds", "must be >= 0", b.warmup_seconds)
    _check(b.repeats >= 1, "bench.repeats", "must be >= 1", b.repeats)
    _check(b.fake_clients >= 0, "bench.fake_clients", "must be >= 0", b.fake_clients)
    _check(all(p >= 0 for p in b.plies), "bench.plies", "must be numbers of plies >= 0", b.plies)
    _check(b.delay_ms > 0, "bench.delay_ms", "must be > 0", b.delay_ms)
    _check(b.train_positions >= 1, "bench.train_positions", "must be >= 1", b.train_positions)
    _check_data_files(rp.seed_files, "replay.seed_files")
    pt = cfg.pretrain
    _check_data_files(pt.train_files, "pretrain.train_files")
    _check_data_files(pt.test_files, "pretrain.test_files")
    _check(pt.steps >= 1, "pretrain.steps", "must be >= 1", pt.steps)
    _check(pt.eval_every >= 1, "pretrain.eval_every", "must be >= 1", pt.eval_every)
    _check(pt.test_positions >= 1, "pretrain.test_positions", "must be >= 1", pt.test_positions)
    _check_finite(cfg, "")
    return cfg


def _check_finite(node: Any, prefix: str) -> None:
    """Every number setting is finite: inf passes a range check such as train.lr > 0, and a run
    would train on it into NaN weights."""
    for f in fields(node):
        value, key = getattr(node, f.name), prefix + f.name
        if is_dataclass(value):
            _check_finite(value, key + ".")
        elif isinstance(value, float):
            _check(math.isfinite(value), key, "must be a finite number", value)


def resolve_selfplay(cfg: Config, device_type: str, cores: int) -> tuple[Config, str]:
    """`cfg` with selfplay.num_actors / num_workers left on auto (0 / -1) made concrete for this
    machine, and a line saying what was chosen. On the CPU: 128 actors in process. On CUDA:
    cores - 1 workers (the main process serves the network) and 128 actors per worker, at least
    512 and at most 4096: the server's batches are then large enough to keep a GPU busy."""
    sp = cfg.selfplay
    cuda = device_type == "cuda"
    in_process = not cuda or sp.search_threads > 1  # threads: the user chose the in-process overlap
    workers = sp.num_workers if sp.num_workers >= 0 else (0 if in_process else max(1, cores - 1))
    actors = sp.num_actors or (128 if not cuda else min(4096, max(512, 128 * workers)))
    if sp.num_workers < 0:
        workers = min(workers, actors)
    auto = [key for key, given in (("num_workers", sp.num_workers >= 0), ("num_actors", sp.num_actors > 0))
            if not given]
    note = (f"self-play: {actors} actors, " + (f"{workers} worker processes" if workers else "in process")
            + (f" (selfplay.{' and '.join(auto)} auto for {device_type} with {cores} cores)" if auto else ""))
    resolved = replace(cfg, selfplay=replace(sp, num_actors=actors, num_workers=workers))
    return validate(resolved), note


def _validate_cluster(c: ClusterConfig) -> None:
    if c.backend == ClusterBackend.none:  # a cluster setting without the cluster: it would be ignored
        for f in fields(ClusterConfig):
            if f.name != "backend" and getattr(c, f.name) != f.default:
                raise ConfigError(f"cluster.{f.name}={getattr(c, f.name)}: a cluster setting, but self-play runs "
                                  f"on this machine (cluster.backend=none); add +cluster=ray (docs/cluster.md)")
        return
    _check(bool(c.address.strip()), "cluster.address", "local, auto, or HOST:PORT of the cluster's head",
           c.address)
    _check(c.nodes >= 1, "cluster.nodes", "must be >= 1", c.nodes)
    _check(c.node_cpus >= 0, "cluster.node_cpus", "must be >= 0", c.node_cpus)
    _check(c.node_gpus >= 0, "cluster.node_gpus", "must be >= 0", c.node_gpus)
    _check(bool(_DEVICE.match(c.node_device)), "cluster.node_device", "allowed: auto, cpu, cuda, cuda:N",
           c.node_device)
    _check(c.local_cpus >= 0, "cluster.local_cpus", "must be >= 0 (0 = nodes x node_cpus)", c.local_cpus)
    _check(c.address != "local" or c.local_cpus == 0 or c.local_cpus >= c.nodes * c.node_cpus, "cluster.local_cpus",
           f"fewer than the {c.nodes} nodes' {c.nodes * c.node_cpus:g} CPUs (cluster.nodes x cluster.node_cpus): "
           f"the nodes that do not fit would be waited for (0 = as many as they need)", c.local_cpus)
    _check(c.call_timeout_s > 0, "cluster.call_timeout_s", "must be > 0", c.call_timeout_s)
    _check(c.start_timeout_s > 0, "cluster.start_timeout_s", "must be > 0", c.start_timeout_s)


def _validate_eval(ev: EvalConfig) -> None:
    _check(ev.every >= 0, "eval.every", "must be >= 0 (0 = off)", ev.every)
    _check(ev.games >= 1, "eval.games", "must be >= 1", ev.games)
    _check(ev.num_simulations >= 0, "eval.num_simulations", "must be >= 0 (0 = search.num_simulations)",
           ev.num_simulations)
    _check(ev.opening_plies >= 0, "eval.opening_plies", "must be >= 0", ev.opening_plies)
    _check(ev.max_plies >= 0, "eval.max_plies", "must be >= 0 (0 = rules.max_plies)", ev.max_plies)
    # eval.anchors name rungs of the ladder: play/gauntlet.check_settings checks them at start-up
    _check(ev.ladder >= 0, "eval.ladder", "must be >= 0 (0 = off)", ev.ladder)
    _check(ev.records_saved >= 0, "eval.records_saved", "must be >= 0", ev.records_saved)
    _check(bool(ev.usi_go.strip()), "eval.usi_go", "must not be empty (e.g. 'byoyomi 100')", ev.usi_go)


# The settings a stage may set: what the loop changes at a checkpoint without starting over
# (train/loop.py). The network grows (never shrinks), self-play's search and playout caps, the
# phases' sizes, the replay window, the learning rate, what training weighs and its precision on
# the CPU (train.cpu_bf16); not what a checkpoint must agree on (train.optimizer,
# model.value_hidden), nor the machine's settings.
STAGE_KEYS = (("model.blocks", "model.channels")
              + tuple(f"search.{f.name}" for f in fields(SearchConfig) if f.name != "kind")
              + ("selfplay.cheap_search_prob", "selfplay.cheap_simulations",
                 "loop.positions_per_checkpoint", "loop.steps_per_checkpoint", "replay.capacity")
              + tuple(f"train.{name}" for name in ("lr", "lr_schedule", "decay_steps", "min_lr_ratio", "batch_size",
                                                    "weight_decay", "momentum", "grad_clip", "value_loss_weight",
                                                    "value_target_root_weight", "mirror", "surprise_weight",
                                                    "average_decay", "cpu_bf16")))
_STAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def dotted(node: Any, prefix: str = "") -> Dict[str, Any]:
    """A nested mapping as dotted keys ({"search": {"num_simulations": 64}} -> {"search.num_simulations":
    64}); dotted keys already in it stay as they are, an empty mapping is a value of its own."""
    if not (isinstance(node, dict) and node):
        return {prefix: node}
    out: Dict[str, Any] = {}
    for key, value in node.items():
        out.update(dotted(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def stage_settings(stage: StageConfig) -> Dict[str, Any]:
    """A stage's settings as dotted keys ({"search.num_simulations": 64}), nested or dotted alike."""
    return dotted(dict(stage.set))


def stages_in_order(cfg: Config) -> List[tuple[str, StageConfig]]:
    """The run's stages as they begin: by from_checkpoint, in the config's order where equal.
    Raises ConfigError naming the key of a stage that is not {from_checkpoint: N, set: {...}}."""
    out = []
    for name, spec in cfg.stages.items():
        key = f"stages.{name}"
        _check(bool(_STAGE_NAME.match(str(name))), key, "a stage's name: letters, digits, '_' and '-'", name)
        _check(isinstance(spec, dict), key, "a stage is {from_checkpoint: N, set: {KEY: VALUE, ...}}", spec)
        for unknown in set(spec) - {"from_checkpoint", "set", "when_flat", "until_checkpoint"}:
            _check(False, f"{key}.{unknown}", "a stage has from_checkpoint, set, when_flat and until_checkpoint only",
                   spec[unknown])
        start = spec.get("from_checkpoint")
        _check(isinstance(start, int) and not isinstance(start, bool) and start >= 1, f"{key}.from_checkpoint",
               "a number of checkpoints >= 1 (the settings in force from the start are the run's own)", start)
        settings = spec.get("set")
        _check(isinstance(settings, dict) and bool(settings), f"{key}.set",
               "a stage sets at least one setting: {KEY: VALUE, ...}", settings)
        flat = spec.get("when_flat", 0)
        _check(isinstance(flat, int) and not isinstance(flat, bool) and flat >= 0, f"{key}.when_flat",
               "a number of in-loop evaluations >= 1 (0 = off)", flat)
        until = spec.get("until_checkpoint", 0)
        _check(isinstance(until, int) and not isinstance(until, bool) and (until == 0 or until > start),
               f"{key}.until_checkpoint", f"a number of checkpoints > from_checkpoint ({start}), or 0 (to the end)",
               until)
        _check(not (until and flat), f"{key}.until_checkpoint",
               "not with when_flat: a stage that waits for the rating has no known start to end after", until)
        stage = StageConfig(start, dict(settings), flat, until)
        grows = sorted(k for k in stage_settings(stage) if k.startswith("model."))
        _check(not (until and grows), f"{key}.until_checkpoint",
               f"not with {', '.join(grows)}: a network grows, never shrinks, so it cannot end", until)
        out.append((str(name), stage))
    return sorted(out, key=lambda item: item[1].from_checkpoint)


def with_stage(cfg: Config, name: str, stage: StageConfig) -> Config:
    """`cfg` with the stage's settings in place of its own (not validated as a whole: `validate`
    does that for every stage in turn). Raises ConfigError naming stages.NAME.set.KEY for a key
    a stage may not set or a value of the wrong type."""
    where = f"stages.{name}.set"
    sections: Dict[str, Dict[str, Any]] = {}
    for key, value in stage_settings(stage).items():
        _check(key in STAGE_KEYS, f"{where}.{key}",
               "a stage may set only " + ", ".join(k for k in STAGE_KEYS if not k.startswith("search."))
               + " and search.* but search.kind", value)
        section, setting = key.split(".")
        sections.setdefault(section, {})[setting] = value
    for section, values in sections.items():
        try:
            node = OmegaConf.merge(OmegaConf.structured(getattr(cfg, section)), values)
        except Exception as e:  # omegaconf's ValidationError: a value of the wrong type
            bad = next((k for k in values if k in str(e)), next(iter(values)))
            raise ConfigError(f"{where}.{section}.{bad}={values[bad]!r}: "
                              f"{str(e).splitlines()[0]}") from None
        updated: Any = OmegaConf.to_object(node)
        cfg = replace(cfg, **{section: updated})
    return cfg


def _validate_stages(cfg: Config) -> None:
    """Each stage: a name, a checkpoint, settings a stage may set, and the settings in force from
    it on valid as a whole (the network never smaller than before it), and from its end on; with
    the other when_flat stages begun and with them still waiting for the rating."""
    base, ordered = replace(cfg, stages={}), stages_in_order(cfg)
    for waiting in (False, True):
        for i, (name, stage) in enumerate(ordered):
            key = f"stages.{name}"
            before = _in_force(base, ordered[:i], stage.from_checkpoint, waiting)
            now = with_stage(before, name, stage)
            for dim in ("blocks", "channels"):
                _check(getattr(now.model, dim) >= getattr(before.model, dim), f"{key}.set.model.{dim}",
                       f"the network grows, never shrinks: must be >= {getattr(before.model, dim)} (before this "
                       "stage)", getattr(now.model, dim))
            try:
                validate(now)
            except ConfigError as e:
                bad = str(e).split("=")[0]
                raise ConfigError(f"{key}.set.{e}" if bad in stage_settings(stage)
                                  else f"{key} (from checkpoint {stage.from_checkpoint}): {e}") from None
        # the ends after every start: a value set by a later stage is named by its own stage's check
        for name, stage in ordered:
            if stage.until_checkpoint:
                try:
                    validate(_in_force(base, ordered, stage.until_checkpoint, waiting))
                except ConfigError as e:
                    raise ConfigError(f"stages.{name} (ending at checkpoint {stage.until_checkpoint}): {e}") from None


def _in_force(cfg: Config, stages: List[tuple[str, StageConfig]], checkpoints: int, waiting: bool) -> Config:
    """`cfg` with those of `stages` (in the order they begin) in force once `checkpoints`
    checkpoints are written: begun and not ended, a when_flat one at its from_checkpoint, or with
    `waiting` not at all (it may wait for the rating for the rest of the run)."""
    for name, stage in stages:
        if (stage.from_checkpoint <= checkpoints and not stage.ended(checkpoints)
                and not (waiting and stage.when_flat)):
            cfg = with_stage(cfg, name, stage)
    return cfg


def _check_data_files(paths: List[str], key: str) -> None:
    for i, path in enumerate(paths):
        _check(str(path).endswith((".hcpe", ".hcpe3")), f"{key}[{i}]",
               "must be a .hcpe or .hcpe3 file (dlshogi's formats)", path)
        _check(str(path) not in map(str, paths[:i]), f"{key}[{i}]",
               "is named before in the list (its positions would count twice)", path)


def to_config(cfg: DictConfig | Config) -> Config:
    """Converts Hydra's merged DictConfig into validated dataclasses."""
    if isinstance(cfg, Config):
        return validate(_home_expanded(cfg))
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, Config):
        # A plain dict (no structured schema): merge it onto the schema so types are checked.
        obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), cfg))
    assert isinstance(obj, Config), type(obj)  # merged onto the structured schema
    return validate(_home_expanded(obj))


def _home_expanded(cfg: Config) -> Config:
    """The settings that name files and folders with a leading `~` (that the shell left, as zsh
    and dash do in KEY=~/x, or a quoted value) as the user's home: it made a folder named `~`."""
    home = os.path.expanduser
    return replace(cfg, checkpoint_root=home(cfg.checkpoint_root), log_root=home(cfg.log_root),
                   resume=home(cfg.resume) if cfg.resume else cfg.resume,
                   replay=replace(cfg.replay, seed_files=[home(f) for f in cfg.replay.seed_files]),
                   pretrain=replace(cfg.pretrain, train_files=[home(f) for f in cfg.pretrain.train_files],
                                    test_files=[home(f) for f in cfg.pretrain.test_files]))


def to_plain(cfg: Config) -> dict:
    """The resolved config as plain Python values (saved with checkpoints, shown in TensorBoard)."""
    plain = OmegaConf.to_container(OmegaConf.structured(cfg), enum_to_str=True)
    assert isinstance(plain, dict)
    return plain


def _known_keys(data: dict, schema) -> dict:
    """`data` without the keys `schema` (a dataclass type) no longer has, at any depth."""
    names = {f.name: f for f in fields(schema)}
    out = {}
    for key, value in data.items():
        if key not in names:
            continue
        sub = names[key].default_factory if names[key].default_factory is not MISSING else None
        out[key] = _known_keys(value, sub) if isinstance(value, dict) and is_dataclass(sub) else value
    return out


def _as_checked_now(data: dict) -> dict:
    """A saved config in the forms today's checks accept, where an older azshogi allowed more
    and reading it back changes nothing that plays: a data file named twice in a list (the files
    are not read again), a self-play mate adjudication past MAX_MATE_PLIES (at most that),
    cluster settings without the cluster (ignored), a batch larger than the replay window or a
    learning rate past 10 (at most those: a saved config's are read for the network, not trained with)."""
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for section, key in (("replay", "seed_files"), ("pretrain", "train_files"), ("pretrain", "test_files")):
        if isinstance(data.get(section, {}).get(key), list):
            data[section][key] = list(dict.fromkeys(map(str, data[section][key])))
    plies = data.get("rules", {}).get("mate_adjudication_plies")
    if isinstance(plies, int) and plies > MAX_MATE_PLIES:
        data["rules"]["mate_adjudication_plies"] = MAX_MATE_PLIES
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and cluster.get("backend", "none") == "none":  # cluster settings never used
        data["cluster"] = {}
    train, capacity = data.get("train", {}), data.get("replay", {}).get("capacity")
    if isinstance(train.get("batch_size"), int) and isinstance(capacity, int) and train["batch_size"] > capacity:
        train["batch_size"] = capacity  # a batch drew from a smaller window with replacement
    if isinstance(train.get("lr"), (int, float)) and train["lr"] > 10:
        train["lr"] = 10.0
    return data


def from_plain(data: dict) -> Config:
    """Inverse of `to_plain` (for a checkpoint's saved config). Settings that a later azshogi
    removed are ignored, and values it no longer takes are read in the forms it does, so older
    checkpoints stay readable."""
    merged = OmegaConf.merge(OmegaConf.structured(Config), _as_checked_now(_known_keys(data, Config)))
    assert isinstance(merged, DictConfig)
    return to_config(merged)

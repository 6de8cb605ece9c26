"""The shared shape of azshogi's Hydra commands: parse overrides, validate, run, and turn the
errors a user can cause (bad settings, bad files, a diverging run) into one line and exit 2."""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from azshogi.commands.cli import fail, user_errors
from azshogi.config import Config, ConfigError, register_configs, to_config
from azshogi.formats import run_lock
from azshogi.formats.checkpoint import CheckpointError
from azshogi.formats.files import DataFormatError, remove_leftovers, write_problem
from azshogi.formats.paths import RunPaths
from azshogi.formats.replay_store import ReplayStoreError
from azshogi.selfplay.cluster import ClusterError
from azshogi.selfplay.workers import WorkerError
from azshogi.train.trainer import TrainingDiverged

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

USER_ERRORS = (ConfigError, CheckpointError, DataFormatError, ReplayStoreError, TrainingDiverged, WorkerError,
               ClusterError, run_lock.RunInUse)

register_configs()

# `PROGRAM --help` opens with what the program does (conf/config.yaml's hydra.help), not Hydra's
# "app is powered by Hydra".
_about = {"program": "azshogi", "summary": ""}
OmegaConf.register_new_resolver("azshogi_help", lambda key: _about[key], replace=True)


def place_run(dict_cfg: DictConfig) -> None:
    """`hydra.run.dir=DIR` places a run: relative `checkpoint_root` and `log_root` go under DIR
    (azshogi writes no Hydra output folder of its own)."""
    run_dir = HydraConfig.get().run.dir
    if run_dir in (None, "", "."):
        return
    for key in ("checkpoint_root", "log_root"):
        if not Path(dict_cfg[key]).is_absolute():
            dict_cfg[key] = str(Path(run_dir) / dict_cfg[key])


def _one_line(error: Exception) -> str:
    """Hydra's and OmegaConf's several-line messages (the key, what was wrong, the allowed
    options) as one line."""
    text = str(error)
    if error.__cause__ is not None and str(error.__cause__) not in text:
        text += "\n" + str(error.__cause__)
    parts: list[str] = []
    listing = False  # the lines after "...:" are a list (the options of a group)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Config search path"):
            break
        if not line or line.startswith(("full_key:", "object_type=", "reference_type=", "See https://")):
            continue
        if listing:
            parts[-1] += (" " if parts[-1].endswith(":") else ", ") + line
        else:
            parts.append(line)
        listing = listing or line.endswith(":")
    return "; ".join(p.rstrip(".") for p in parts)


def _schema_fields(schema: type[DataclassInstance]) -> dict[str, Optional[type[DataclassInstance]]]:
    """{name: the dataclass type of that field, or None for a value or a free dict}."""
    out: dict[str, Optional[type[DataclassInstance]]] = {}
    for f in dataclasses.fields(schema):
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        out[f.name] = factory if isinstance(factory, type) and dataclasses.is_dataclass(factory) else None
    return out


def unknown_key_message(key: str, added: bool = False) -> Optional[str]:
    """'KEY: no such setting ...' naming the first part of a dotted key that azshogi's schema
    (config.Config) does not have, with the closest known name; None when the key exists (or
    lies in a dict whose keys are free, such as eval.usi_options). added: it came with a `+`."""
    schema: type[DataclassInstance] = Config
    path: list[str] = []
    for part in key.split("."):
        names = _schema_fields(schema)
        if part not in names:
            near = difflib.get_close_matches(part, list(names), n=1)
            known = ".".join(path + near) if near else None
            hint = f"did you mean {known}?" if known else "see --help for the settings"
            return f"{key}: no such setting ({hint})" + ("; a '+' adds no setting to azshogi's config" if added else "")
        path.append(part)
        inner = names[part]
        if inner is None:
            return None
        schema = inner
    return None


def unknown_keys(cfg: DictConfig) -> list[str]:
    """The keys of a composed config that its structured schema does not know (e.g. added with
    `+key=value`, which Hydra accepts and azshogi would ignore), dotted; free dicts excepted."""
    found: list[str] = []

    def walk(node: DictConfig, prefix: str) -> None:
        schema = OmegaConf.get_type(node)
        if not dataclasses.is_dataclass(schema):
            return  # a dict with free keys
        names = _schema_fields(schema)
        for key in node.keys():
            if prefix == "" and key == "hydra":  # Hydra's own settings
                continue
            if key not in names:
                found.append(prefix + str(key))
            elif names[key] is not None and OmegaConf.is_dict(node[key]):
                walk(node[key], f"{prefix}{key!s}.")

    walk(cfg, "")
    return found


def check_writable(program: str, folders: dict) -> None:
    """Stops the program with one line when a folder it will write cannot be written:
    {folder: the setting that places it}. Runs before any work, so that a read-only or full
    disk is found at start-up, not at the first checkpoint."""
    for folder, setting in folders.items():
        problem = write_problem(Path(folder))
        if problem:
            fail(program, f"cannot write in {folder} ({setting}): {problem}")


def run_folders(cfg: Config) -> dict:
    """The folders a training run writes, and the settings that place them."""
    paths = RunPaths.of(cfg)
    return {paths.checkpoints: "checkpoint_root", paths.logs: "log_root"}


_NOT_OVERRIDDEN = re.compile(r"Could not override '([^']+)'")
_OPTION_NAME = re.compile(r"[A-Za-z_][\w-]*")
_GRAMMAR = re.compile(r"LexerNoViableAltException|mismatched input|no viable alternative|extraneous input")


def _group_given_no_option(overrides: list[str]) -> Optional[str]:
    """The line for an override of a config group (`model=5`, `model=[5]`) whose value is no
    option's name (Hydra says only "Got int", or fails with a TypeError), or None."""
    from importlib.resources import files

    folder = files("azshogi.conf")  # a config group is a folder of it, its options the files
    for override in overrides:
        key, sep, value = override.lstrip("+~").partition("=")
        if sep and _OPTION_NAME.fullmatch(key) and folder.joinpath(key).is_dir() and not _OPTION_NAME.fullmatch(value):
            options = ", ".join(sorted(p.name[:-5] for p in folder.joinpath(key).iterdir() if p.name.endswith(".yaml")))
            return f"{key}={value}: a config group takes the name of one of its options: {options}"
    return None
_ADDED_STAGE = re.compile(r"\+stages\.([^.=]+)=")  # `+stages.NAME=...`: a whole stage added


def check_overrides(program: str) -> None:
    """Composes the config once before Hydra runs the command, so that an unknown key (with or
    without a `+`), a value of the wrong type or an unknown option of a group ends in one line and
    exit code 2 (Hydra would print several lines and exit 1, suggest `+key=value` for a mistyped
    key, and accept that key silently); so do an interpolation that does not resolve, a sweep
    (-m), and a `+stages.NAME` that the config has already. --config-dir and --config-name are
    composed as Hydra will run them."""
    from hydra import compose, initialize_config_module
    from hydra._internal.utils import get_args_parser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    args, _ = get_args_parser().parse_known_args(sys.argv[1:])
    if args.help or args.hydra_help or args.shell_completion or args.info:
        return
    if args.multirun:
        fail(program, "sweeps (--multirun, -m) are not supported: their jobs would share one run; start one "
                      "command per setting, each with its own run=NAME")
    overrides = list(args.overrides)
    if args.config_dir:  # Hydra's --config-dir: that folder's configs beside azshogi's own, as Hydra runs them
        folder = str(Path(args.config_dir).resolve()).replace("\\", "\\\\").replace("'", "\\'")
        overrides.append(f"hydra.searchpath=['file://{folder}']")  # quoted: a comma in the path
    name = args.config_name or "config"
    try:
        with initialize_config_module("azshogi.conf", version_base="1.3"):
            cfg = compose(name, overrides=overrides, return_hydra_config=True)
            plain = [o for o in overrides if not _ADDED_STAGE.match(o)]
            before = compose(name, overrides=plain) if len(plain) < len(overrides) else cfg
        for override in overrides:
            added = _ADDED_STAGE.match(override)
            if added and added.group(1) in (before.get("stages") or {}):
                fail(program, f"+stages.{added.group(1)}: the run's schedule has a stage {added.group(1)} already "
                              f"(its preset's), which this would merge into; change it with "
                              f"stages.{added.group(1)}.KEY=VALUE (+stages.{added.group(1)}.set.KEY=VALUE for a "
                              f"setting it does not set yet), remove it with '~stages.{added.group(1)}', or add the "
                              f"stage under another name")
        # every interpolation (`train.lr=${foo}`), resolved now rather than in a traceback later
        # (`${hydra:...}` resolves from the Hydra config, which hydra.main sets again before the run)
        HydraConfig.instance().set_config(cfg)
        OmegaConf.to_container(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError, TypeError) as e:  # `model=5`, `model=[5]`
        missing = _NOT_OVERRIDDEN.match(str(e))
        message = unknown_key_message(missing.group(1)) if missing else _group_given_no_option(overrides)
        key = getattr(e, "full_key", None)  # an interpolation's error names its key apart
        line = _one_line(e)
        if _GRAMMAR.search(str(e)):  # Hydra's override grammar: a value it reads only quoted
            line = (line.removesuffix("; ^") + ": quote such a value for Hydra, 'KEY=\"VALUE\"' (a value with "
                    "letters other than ASCII, or ~ ( ) = # & and the like)")
        fail(program, message or (f"{key}: " if key and key not in line else "") + line)
    try:
        run_dir = cfg.hydra.run.dir  # Hydra makes it before azshogi runs
    except OmegaConfBaseException as e:
        fail(program, _one_line(e))
    unknown = unknown_keys(cfg)
    if unknown:
        fail(program, unknown_key_message(unknown[0], added=True) or f"{unknown[0]}: no such setting")
    if run_dir not in (None, "", "."):
        check_writable(program, {run_dir: "hydra.run.dir"})


def hydra_command(program: str, body: Callable[[Config], object], summary: str,
                  writes: Optional[Callable[[Config], dict]] = None, run: bool = False) -> Callable[[], None]:
    """A console-script main() running `body(config)` on azshogi's Hydra config; `summary` (one
    sentence) opens its --help. writes: the folders `body` will write ({folder: setting}),
    checked before it starts; run: `body` writes the config's run, which it holds while it runs
    (formats/run_lock.py: a second process on it stops at start-up)."""

    @hydra.main(version_base="1.3", config_path="pkg://azshogi.conf", config_name="config")
    def _main(dict_cfg: DictConfig) -> None:
        try:
            with user_errors(program, *USER_ERRORS):  # and a file error, say the disk filling up during the run
                place_run(dict_cfg)
                cfg = to_config(dict_cfg)
                if writes is not None:
                    check_writable(program, writes(cfg))
                paths = RunPaths.of(cfg)
                with run_lock.holding(paths.lock, f"run {cfg.run!r} ({paths.checkpoints})") if run else \
                        contextlib.nullcontext():
                    if run:  # the run is this process's alone now: what killed writes left goes
                        remove_leftovers(paths.checkpoints, paths.logs)
                    body(cfg)
        except MemoryError:  # numpy's "Unable to allocate 29.1 TiB": a size setting far past the machine
            fail(program, "out of memory: a setting asks for more than this machine has (replay.capacity, "
                          "selfplay.num_actors, search.num_simulations, train.batch_size, the network's size?); "
                          "the run's checkpoints are as they were")
        except KeyboardInterrupt:  # a second Ctrl-C while the first one's stop is under way
            print(f"{program}: interrupted: stopped at once, without a checkpoint", file=sys.stderr)
            sys.exit(130)

    def main() -> None:
        _about.update(program=program, summary=summary)
        check_overrides(program)
        _main()

    return main

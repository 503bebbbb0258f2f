"""The ``cupel-np`` argument parser: every sub-command's options, each bound to its command
module's ``cmd_*`` function."""

from __future__ import annotations

import argparse

from cupel_np._version import __version__
from cupel_np.cli.budget import cmd_budget
from cupel_np.cli.check import cmd_check
from cupel_np.cli.conformance import cmd_conformance
from cupel_np.cli.demo import cmd_demo
from cupel_np.cli.import_ import cmd_import
from cupel_np.cli.presets import cmd_presets
from cupel_np.cli.report import cmd_report
from cupel_np.cli.run import cmd_run
from cupel_np.cli.sensitivity import cmd_sensitivity
from cupel_np.cli.shared import _EMPTY_HELP
from cupel_np.cli.sweep import cmd_sweep
from cupel_np.cli.tune import cmd_tune
from cupel_np.cli.validate import cmd_validate
from cupel_np.cli.warmup import cmd_warmup


def _threads_arg(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--threads must be a positive integer, got {v!r}")
    return n


def _jobs_arg(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs must be a positive integer, got {v!r}")
    return n


def _out_opts(p, default: str | None = None) -> None:
    """``--out DIR`` (required unless a default is given) and ``--overwrite``."""
    if default is None:
        p.add_argument("--out", required=True, help="output directory")
    else:
        p.add_argument("--out", default=default, help=f"output directory (default ./{default})")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs of an earlier run in --out (only cupel-np's own files are removed)",
    )


def _count_arg(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {v!r}")
    return n


_ITEMS_HELP = "items Parquet: a file, a directory (hive partitions become columns) or several files"

_SET_HELP = "column holding the item-set key (without it the whole input is one item set)"

_LABEL_HELP = (
    "relevance label column (boolean, or non-negative numbers; null = unlabelled): also write outcomes.parquet "
    "and print each variant's token recall with its bootstrap interval"
)

_DASK_HELP = "run on Dask: local, local:N (a LocalCluster of N workers) or tcp://HOST:PORT"


def _common_parents() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """(options of every command, the same plus --threads for the commands that compute)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", help="no progress output")
    common.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the file system of s3:// (gs://, az://...) URLs, e.g. endpoint_url=http://HOST:9000, "
        "access_key=..., secret_key=..., region=..., anonymous=true (repeatable; never printed; "
        "see docs/scaling-out.md#object-storage)",
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    common.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (a module name or a .py file) first, so the scorers it registers "
        "with cupel_np.register_scorer can be named in policy and grid files (repeatable). "
        "This RUNS the plugin's code with your rights: only name plugins you trust",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    compute = argparse.ArgumentParser(add_help=False, parents=[common])
    compute.add_argument(
        "--threads",
        type=_threads_arg,
        default=None,
        help="worker threads (default: $CUPEL_NP_THREADS, else the cores this process may use)",
    )
    return common, compute


def _budget_opts(p) -> None:
    g = p.add_argument_group("budget (required)")
    g.add_argument("--max-tokens", type=int, required=True, help="the model's context window")
    g.add_argument("--target-tokens", type=int, required=True, help="the slicer's token target")
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer (default 0)")


def _allow_empty_opt(p) -> None:
    p.add_argument("--allow-empty", action="store_true", help=_EMPTY_HELP)


def _memory_opts(p) -> None:
    p.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="memory budget, e.g. 2G or 500M (default: half the memory available now); "
        "a larger input is processed in chunks of whole item sets",
    )
    p.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="stream in chunks of at most N rows (whole item sets; a longer set is a chunk of its own), "
        "whatever the input size",
    )


_GROUPS_HELP = (
    "select the items of a set sharing a value of COLUMN whole or not at all, in every variant "
    "(e.g. tool_group: a tool call with its results; docs/tool-pairs.md)"
)


def _add_sweeps(sub, compute) -> None:
    p = sub.add_parser("demo", parents=[compute], help="presets x budgets on the sample corpus; Parquet + HTML report")
    p.add_argument("--items", help="items Parquet (default: the sample corpus shipped in the package)")
    p.add_argument("--set-column", default="session_id", help="column holding the item-set key (default session_id)")
    _allow_empty_opt(p)
    _out_opts(p, "cupel-np-demo")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("sensitivity", parents=[compute], help="compare policies over an items file")
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    _allow_empty_opt(p)
    p.add_argument("--policies", help="JSON/TOML file of labelled policies")
    p.add_argument("--preset", action="append", help="a preset to compare (repeatable)")
    _budget_opts(p)
    p.add_argument("--set-column", help=_SET_HELP)
    p.add_argument("--label-column", metavar="COL", help=_LABEL_HELP)
    _out_opts(p)
    p.add_argument("--dask", metavar="SPEC", help=_DASK_HELP)
    _memory_opts(p)
    p.add_argument("--groups", metavar="COLUMN", help=_GROUPS_HELP)
    p.set_defaults(func=cmd_sensitivity)

    p = sub.add_parser(
        "sweep", parents=[compute], help="run a grid of variants (presets x weights x slicers x placers x budgets)"
    )
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    _allow_empty_opt(p)
    p.add_argument("--grid", required=True, help="grid file (TOML/JSON; see docs/sweeps.md)")
    p.add_argument("--set-column", help="column holding the item-set key (overrides the grid's)")
    p.add_argument("--label-column", metavar="COL", help=_LABEL_HELP)
    _out_opts(p)
    p.add_argument("--dask", metavar="SPEC", help=_DASK_HELP)
    _memory_opts(p)
    p.add_argument("--groups", metavar="COLUMN", help=_GROUPS_HELP)
    p.set_defaults(func=cmd_sweep)


def _add_single(sub, common, compute) -> None:
    p = sub.add_parser("budget", parents=[common], help="budget curves: selection and utilization along a ladder")
    p.add_argument("items", help="items Parquet file")
    _allow_empty_opt(p)
    p.add_argument("--policy", action="append", help="policy file (JSON/TOML; repeatable, labelled by file name)")
    p.add_argument("--preset", action="append", help="a preset (repeatable)")
    p.add_argument("--ladder", required=True, help="LO:HI:STEPS budgets (max_tokens), e.g. 4000:200000:16")
    p.add_argument(
        "--spacing", choices=["geometric", "linear"], default="geometric", help="ladder spacing (default geometric)"
    )
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer at every budget")
    p.add_argument("--set-column", help=_SET_HELP)
    p.add_argument(
        "--label-column",
        metavar="COL",
        help="relevance label column (boolean, or non-negative numbers; null = unlabelled): also write "
        "outcomes.parquet (token recall against budget) and outcome_reach.parquet (the budget at which each "
        "variant keeps 90/95/99%% of the relevant tokens)",
    )
    _out_opts(p)
    p.add_argument("--groups", metavar="COLUMN", help=_GROUPS_HELP)
    p.set_defaults(func=cmd_budget)

    p = sub.add_parser(
        "run", parents=[compute], help="one dry run: included and excluded items with scores and reasons"
    )
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    _allow_empty_opt(p)
    p.add_argument(
        "--policy",
        help="policy file: JSON or TOML with [[scorers]], slicer, placer... (the policy format; "
        "see 'Policy files' in docs/cli.md of the cupel-np repository), or the .NET policy JSON shape",
    )
    p.add_argument("--preset", help="a preset name")
    _budget_opts(p)
    p.add_argument("--set-column", help=_SET_HELP)
    p.add_argument("--set", metavar="KEY", help="which item set to run (with --set-column)")
    p.add_argument("--groups", metavar="COLUMN", help=_GROUPS_HELP)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("presets", parents=[common], help="list the presets with their full configuration")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("validate", parents=[common], help="check an items file: schema and row problems")
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    _allow_empty_opt(p)
    p.add_argument("--set-column", help=_SET_HELP)
    _memory_opts(p)
    p.set_defaults(func=cmd_validate)


#: ``cupel_np.io.importers.FORMATS``, spelled out (a test keeps them equal)
IMPORT_FORMATS = [
    "auto",
    "openai",
    "anthropic",
    "gemini",
    "claude-code",
    "stream-json",
    "codex",
    "sharegpt",
    "llama-factory",
    "swe-agent",
    "mini-swe-agent",
    "otel",
    "messages",
]


def _add_files(sub, common) -> None:
    p = sub.add_parser("import", parents=[common], help="chat / agent transcripts -> an items Parquet file")
    p.add_argument(
        "format",
        choices=IMPORT_FORMATS,
        help="auto (detected), openai, anthropic (Messages API bodies), gemini (generateContent bodies), claude-code, stream-json, codex, sharegpt, llama-factory, swe-agent, "
        "mini-swe-agent, otel, messages (JSONL/CSV/TSV/Parquet + --map); see docs/importing.md",
    )
    p.add_argument("inputs", nargs="+", metavar="IN", help="input files or directories")
    p.add_argument("--out", required=True, help="items Parquet to write")
    p.add_argument(
        "--map",
        help="messages format: TARGET=COLUMN,... (targets: content, kind (or role), set, "
        "timestamp, source, tokens, pinned, id)",
    )
    p.add_argument(
        "--tokenizer",
        help="token counter: estimate (default), chars4, tiktoken:ENCODING, "
        "tokenizers:PATH/tokenizer.json or module:function (module:function imports the module and RUNS "
        "its code: only name modules you trust)",
    )
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip unreadable lines (each is listed on stderr); a file none of whose lines reads is still an error",
    )
    p.add_argument(
        "--set-column", default="conversation_id", help="name of the conversation column (default conversation_id)"
    )
    p.add_argument("--tool-call-kind", default="ToolCall", help="kind given to tool calls (default ToolCall)")
    p.add_argument(
        "--keep-rewound",
        action="store_true",
        help="claude-code: keep the records of rewound branches (metadata rewound=true), not only the live context",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="scale each conversation's token counts to the API's own counts in the log (usage records)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the items file even when the import yields 0 items or skipped more than it kept",
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("report", parents=[common], help="HTML report of a written sweep directory (in-process or Dask)")
    p.add_argument("out_dir", help="a directory written by sensitivity, sweep or demo (with or without --dask)")
    p.add_argument("--title", help="page title (default: the directory's name)")
    p.add_argument("--top", type=_count_arg, default=200, help="swinging items in the table (default 200)")
    p.add_argument("--overwrite", action="store_true", help="replace a report.html built from the in-memory result")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "warmup",
        parents=[common],
        help="compile every kernel into the kernel cache (NUMBA_CACHE_DIR) ahead of use: for images and CI caches",
    )
    p.add_argument("--jobs", type=_jobs_arg, default=2, help="child processes compiling side by side (default 2)")
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="exit 0 when a kernel was not reached (by default a partial warm-up exits 1)",
    )
    p.set_defaults(func=cmd_warmup)

    p = sub.add_parser("conformance", parents=[common], help="run conformance vectors (files or directories)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="vector .toml files or directories holding them")
    p.set_defaults(func=cmd_conformance)


def add_check_parser(sub, common) -> None:
    """Register ``check`` on the ``cupel-np`` subparsers (``common``: the shared options)."""
    p = sub.add_parser(
        "check",
        parents=[common],
        help="run a checks file's assertions over every item set; exit 1 when one fails",
    )
    p.add_argument("items", nargs="+", help="items Parquet: a file, a directory or several files")
    _allow_empty_opt(p)
    p.add_argument("--checks", required=True, help="TOML/JSON checks file (policies, budgets, [[check]] tables)")
    p.add_argument("--set-column", help="column holding the item-set key (overrides the checks file's)")
    p.add_argument("--junit", metavar="OUT.xml", help="also write JUnit XML for CI")
    p.add_argument("--max-rows", type=int, default=10, help="failing rows shown per check (default 10)")
    p.add_argument("--memory-limit", metavar="SIZE", help="memory budget, e.g. 2G; a larger input is checked in chunks")
    p.add_argument("--chunk-rows", type=int, metavar="N", help="check in chunks of at most N rows, whatever the size")
    p.add_argument(
        "--dask",
        metavar="SPEC",
        help="run on Dask (partitions of whole item sets; needs a set column): local, local:N "
        "(a LocalCluster of N workers) or tcp://HOST:PORT",
    )
    p.set_defaults(func=cmd_check)


def add_tune_parser(sub, common) -> None:
    """Add the ``tune`` subcommand to the ``cupel-np`` parser."""
    p = sub.add_parser(
        "tune",
        parents=[common],
        help="search policies that keep the labelled-relevant items (Optuna; leaderboard, Pareto front, best policy files)",
    )
    p.add_argument("items", nargs="+", help="items Parquet: a file, a directory or several files")
    _allow_empty_opt(p)
    p.add_argument("--space", required=True, help="search space TOML (see data/examples/tune_space.toml)")
    p.add_argument("--label-column", required=True, help="relevance label column: boolean or non-negative numbers")
    p.add_argument("--set-column", help="item set key column (sets are split into search and held-out parts)")
    p.add_argument("--trials", type=int, default=256, help="trials in all (default 256)")
    p.add_argument("--batch-size", type=int, default=64, help="trials evaluated together as one sweep (default 64)")
    p.add_argument(
        "--objective",
        default="token_recall",
        choices=["token_recall", "item_recall", "gain_share", "recall_vs_tokens"],
        help="maximise a mean recall, or recall_vs_tokens for a Pareto search (default token_recall)",
    )
    p.add_argument(
        "--sampler",
        default="nsga2",
        choices=["nsga2", "tpe"],
        help="Optuna optimizer: nsga2 (a generation per batch, cheap per trial; default) or tpe",
    )
    p.add_argument("--seed", type=int, default=0, help="optimizer and bootstrap seed (default 0)")
    p.add_argument("--holdout", type=float, default=0.2, help="share of sets held out of the search (default 0.2)")
    p.add_argument("--top", type=int, default=5, help="best policies written and compared (default 5)")
    p.add_argument("--baseline", help="the policy the best one's swing is measured against (default: the best preset)")
    p.add_argument("--max-tokens", type=int, help="budget, when the space file names none")
    p.add_argument("--target-tokens", type=int, help="slicer target (default: max tokens - output reserve)")
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer")
    p.add_argument("--out", default="cupel-np-tune", help="output directory (default ./cupel-np-tune)")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier tune run in --out")
    p.add_argument(
        "--dask",
        metavar="SPEC",
        help="run every batch of trials on Dask (needs --set-column): local, local:N (a LocalCluster of N workers) "
        "or tcp://HOST:PORT",
    )
    p.set_defaults(func=cmd_tune)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "expected one argument" also says how to give a value that
    starts with '-' (``--ladder -5:2000:3`` reads ``-5:2000:3`` as an option)."""

    def error(self, message: str):  # type: ignore[override]
        if message.endswith("expected one argument"):
            flag = message.removeprefix("argument ").split(":")[0].split("/")[-1].strip()
            message += f" (a value that starts with '-' is given as {flag}=VALUE)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``cupel-np`` argument parser (one sub-command per task)."""
    common, compute = _common_parents()
    parser = _Parser(
        prog="cupel-np",
        description="Cupel context selection at corpus scale: which items do your policies swap in or out?",
    )
    parser.add_argument("--version", action="version", version=f"cupel-np {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add_sweeps(sub, compute)
    _add_single(sub, common, compute)
    _add_files(sub, common)
    add_check_parser(sub, compute)  # `cupel-np check`: cupel_np/cli/check.py
    add_tune_parser(sub, compute)  # `cupel-np tune`: cupel_np/cli/tune.py
    return parser

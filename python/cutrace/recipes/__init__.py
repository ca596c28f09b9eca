"""`cutrace recipe NAME`: nsys-style recipes over many traces (one per rank of a job).

A recipe is a map step per trace (SQL over the trace's tables, run in DuckDB where the trace is
read) and a reduce step over the small per-trace results (SQL in DuckDB over their Parquet files).
Each recipe object has: name, description, tables (those its map step reads), outputs (the files
it writes), summary_output (the one printed), map_queries(options) -> {part: SQL} and
reduce_queries({part: the partials as a FROM item with Rank}, options) -> {file: SQL}, and
optionally arguments: its own command-line options, ((flag, argparse keywords), ...).
framework.py runs them in the modes none, concurrent and dask-futures; cli.py is the command.
"""
from . import analysis, diff, gpu, summaries

RECIPES = {r.name: r for r in summaries.recipes() + analysis.recipes() + gpu.recipes() + diff.recipes()}

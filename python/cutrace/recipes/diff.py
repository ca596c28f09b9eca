"""`cutrace recipe diff --input A B`: two runs compared, A and B each a trace or a directory of traces
(ranks paired by rank). Per CUDA API function and per kernel: the count, total time and average of
each side, B's difference from A (B - A) and their ratio (B / A)."""
from .summaries import API_CALLS, KERNELS

# The numbers each side gives per name, and the columns compared.
MEASURES = (("Count", "BIGINT"), ("Total Time", "BIGINT"), ("Avg", "DOUBLE"))


def compared(a, b):
    """Columns of A and B side by side (a, b: the SQL of two rows, either of which may be missing)."""
    columns = []
    for measure, kind in MEASURES:
        x, y = f'{a}."{measure}"', f'{b}."{measure}"'
        if measure != "Avg":  # a name absent from one side: no calls there
            x, y = f"coalesce({x}, 0)", f"coalesce({y}, 0)"
        columns += [f'CAST({x} AS {kind}) AS "{measure} A"', f'CAST({y} AS {kind}) AS "{measure} B"',
                    f'CAST({y} - {x} AS {kind}) AS "{measure} Diff"',
                    f'CAST({y} AS DOUBLE) / nullif({x}, 0) AS "{measure} Ratio"']
    return ", ".join(columns)


class Diff:
    name = "diff"
    description = ("two runs compared (--input A B, traces or directories paired by rank): count, total and "
                   "average time per CUDA API function and kernel on each side, B - A and B / A")
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds")
    outputs = ("all_stats.parquet", "rank_stats.parquet")
    summary_output = "all_stats.parquet"
    sides = ("A", "B")

    def map_queries(self, options):
        return {"stats": f"""
            SELECT 'CUDA API' AS "Type", "Name", count(*) AS "Count", CAST(sum(v) AS BIGINT) AS "Total Time"
            FROM ({API_CALLS}) GROUP BY "Name"
            UNION ALL
            SELECT 'Kernel', "Name", count(*), CAST(sum(v) AS BIGINT) FROM ({KERNELS}) GROUP BY "Name" """}

    def reduce_queries(self, partials, options):
        stats = partials["stats"]

        def side(name, keys):
            return f"""(SELECT {keys}, sum("Count") AS "Count", sum("Total Time") AS "Total Time",
                               sum("Total Time") / sum("Count") AS "Avg"
                        FROM {stats} WHERE "Side" = '{name}' GROUP BY {keys})"""

        def paired(keys):
            keys = keys.strip()
            names = [k.strip() for k in keys.split(",")]
            picked = ", ".join(f"coalesce(a.{k}, b.{k}) AS {k}" for k in names)
            return f"""SELECT {picked}, {compared("a", "b")}
                       FROM {side("A", keys)} AS a FULL JOIN {side("B", keys)} AS b USING ({keys})"""

        order = 'abs("Total Time Diff") DESC, "Type", "Name"'
        return {
            "rank_stats.parquet": f'SELECT * FROM ({paired(""" "Rank", "Type", "Name" """)}) ORDER BY "Rank", {order}',
            "all_stats.parquet": f'SELECT * FROM ({paired(""" "Type", "Name" """)}) ORDER BY {order}',
        }


def recipes():
    return [Diff()]

"""Tables as text, the way `cutrace stats` prints its column format: numbers right-aligned with
thousands separators (reals with one decimal), text left-aligned, a dashed rule under the header.
Used by `cutrace recipe` for its summary and by `cutrace analyze` for its findings."""


def cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table_lines(columns, rows):
    """The lines of a table: the header, its rule, a line per row. A column is right-aligned when
    every value in it is a number (or missing), and there is at least one row."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
               for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)).rstrip()
    return [line(columns), line(["-" * w for w in widths])] + [line(r) for r in text]

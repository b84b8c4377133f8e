"""Peer FLOP formulas vs flopplan's exact count, for every Qwen2.5 size; prints the error tables.

    python benchmarks/peer_formulas.py           # print the tables (Markdown)
    flopplan tables                              # regenerate tables/peer_formulas.{md,tex}

The formulas of the peers live in flopplan/peers.py, each with its public source; the exact count is the closed
form, equal to torch FlopCounterMode (tests/test_exact_counts.py).
"""

from __future__ import annotations

import time

from flopplan.report.generate import COMMAND
from flopplan.report.peer_tables import peer_error_tables
from flopplan.report.tables import to_markdown


def main() -> None:
    start = time.perf_counter()
    tables = peer_error_tables()
    elapsed = time.perf_counter() - start
    print(to_markdown(tables, COMMAND))
    worst = {}
    for table in tables:
        for row in table.rows:
            for column, cell in zip(table.columns[3:], row[3:], strict=True):
                error = abs(float(cell.rstrip("%")))
                worst[column] = max(worst.get(column, 0.0), error)
    print("largest absolute error per peer across all cases:")
    for column, error in worst.items():
        print(f"  {column:<16} {error:6.1f} %")
    print(f"computed {sum(len(t.rows) for t in tables)} rows in {1000 * elapsed:.1f} ms")


if __name__ == "__main__":
    main()

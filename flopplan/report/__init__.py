"""Rendering: engineering units, tables (md/latex/csv/json), symbolic formulas. Torch-free."""

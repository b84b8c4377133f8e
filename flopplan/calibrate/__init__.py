"""``flopplan calibrate``: prove the counts (verify), compare the counters (counters), time the phase units over a
grid of shapes (harness, sweep) or over a plan's own shapes (for_plan), fit how fast each kind of work runs here
(fit, torch-free), learn the time model from real runs (runs, fit_runs, from_runs, probe: torch-free) and write the
profile the planner reads (run)."""

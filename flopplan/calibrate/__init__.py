"""``flopplan calibrate``: prove the counts (verify), compare the counters (counters), time the phase units over a
grid of shapes (harness, sweep), fit how fast each kind of work runs here (fit, torch-free) and write the profile
the planner reads (run)."""

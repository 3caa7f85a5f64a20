"""The sim-to-real gap: reality profiles, the exported policy in native MuJoCo (or MJX) under
them, intervals and break points, and the report of `mjxgap gap` (`measure.py`)."""

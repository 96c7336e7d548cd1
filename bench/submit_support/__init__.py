"""Support modules for bench/submit.py: its settings and a baseline endpoint (used only there),
the harness (configuration, database, servers, load, figures) and the races."""

"""Support modules for bench/submit.py (settings and a baseline endpoint used only there)."""

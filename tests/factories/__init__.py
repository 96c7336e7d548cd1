"""Test data, one module per app: `users`, `submissions`, `jobs`, `quotas`, `schedule`.

Each module makes its app's rows directly (factory-boy) or through the app's services, so a
test states only what it cares about.
"""

"""Code the benchmark scripts in bench/ share: the web server as the Procfile runs it, the
loopback webhook receiver, throw-away databases and the quick mode of `make bench`."""

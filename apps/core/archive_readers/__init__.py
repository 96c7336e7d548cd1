"""Archive readers that see exactly what the grader's unpacking sees.

`apps.core.archives` holds the rules (names, member count, sizes); these modules read the
bytes: `tar` is `tarfile` itself with a `TarInfo` that refuses oversized or endless header
extensions before `tarfile` reads them, over `gzip_stream`'s forward-only decompression;
`zip` walks a zip's central directory the way `zipfile` finds and reads it. Both the upload
check and the unpacking read through them, so no header can end one scan early and not the
other. Plain Python, no Django.
"""

"""Imported first by the local fork server (``local.PRELOAD``): the collector is off while the server imports torch
(its full passes there freed nothing and took 0.5 s of the server's 3) and stays off in it; each worker turns it on
again with what the server loaded frozen out of its passes (``local._main``). The server's exit skips the collection of
all it loaded: a second, and whoever reads ``suite run``'s output waits for the server (it holds the same pipes)."""

import atexit
import gc

gc.disable()
atexit.register(gc.freeze)

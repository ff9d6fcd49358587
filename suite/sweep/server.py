"""Imported by the local fork server alone (``local.PRELOAD``): its exit skips the collections of all it loaded. They
took a second, and whoever reads ``suite run``'s output waits for the server to end (it holds the same pipes)."""

import atexit
import gc

atexit.register(gc.freeze)

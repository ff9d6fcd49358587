from suite.interrupt import forget_caught_interrupt

try:
    from suite.cli import console
except KeyboardInterrupt:  # Ctrl-C while the command-line module itself loads: exit as main() would
    forget_caught_interrupt()
    raise SystemExit(130) from None

raise SystemExit(console())

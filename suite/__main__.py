try:
    from suite.cli import console
except KeyboardInterrupt:  # Ctrl-C while the command-line module itself loads: exit as main() would
    exec("")  # clear CPython's mark of an unhandled interrupt: see suite.cli.forget_caught_interrupt
    raise SystemExit(130) from None

raise SystemExit(console())

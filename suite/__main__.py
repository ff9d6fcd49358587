try:
    from suite.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command-line module itself loads: exit as main() would
    raise SystemExit(130) from None

raise SystemExit(main())

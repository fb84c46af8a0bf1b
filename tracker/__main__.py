from tracker.cli.main import main

raise SystemExit(main())

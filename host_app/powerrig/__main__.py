from powerrig.cli import main

raise SystemExit(main())

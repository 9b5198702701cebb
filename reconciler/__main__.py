from reconciler.cli.commands import main

main()

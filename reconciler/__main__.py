from reconciler.app import main

main()

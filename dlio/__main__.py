from dlio.cli.main import main

main()

from dlio.cli import main

main()

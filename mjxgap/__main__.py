from mjxgap.cli import main

main()

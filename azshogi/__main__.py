from azshogi.commands.train import main

main()

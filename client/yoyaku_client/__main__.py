from yoyaku_client.cli import main

main()

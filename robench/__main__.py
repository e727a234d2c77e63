"""Allow ``python -m robench`` as well as the ``robench`` console script."""

from robench.cli import main

if __name__ == "__main__":
    main()

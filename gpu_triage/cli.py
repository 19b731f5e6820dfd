"""Command line entry point (placeholder, filled in below)."""


def main(argv: list[str] | None = None) -> int:
    return 0

def add(a: int, b: int) -> int:
    """Local tool of full.yaml."""
    return a + b

def log_it(event):
    """on_fallback hook of full.yaml."""
    return True

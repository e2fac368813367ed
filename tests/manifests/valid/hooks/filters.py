def keep(tool):
    """tools.filter of full.yaml."""
    return True

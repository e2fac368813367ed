"""Modules the valid corpus names by import path."""

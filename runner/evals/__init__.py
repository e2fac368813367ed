"""Regression tests for an agent: cases, runs over a shared fleet, record and replay, reports."""

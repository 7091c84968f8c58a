"""Verification: smoke checks, measuring suites, reports and host checks."""

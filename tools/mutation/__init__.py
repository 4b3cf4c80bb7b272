"""Mutation testing of the product (``make mutation``); docs/testing.md says how and why."""

"""Consumers written on the kit as a user would write one (docs/your-own-consumer.md); each is
run by its test in tests/kit/. Imports the kit only."""

"""Consumers written on the kit as a user would write one (README, "Your own consumer"); each is
run by its test in tests/kit/. Imports the kit only."""

"""The idempotent order consumer: a pure decision core plus one adapter per outside system."""

"""Developer tools that are not part of the product (nothing in shared/ imports them)."""

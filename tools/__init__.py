"""Developer tools that are not part of the product: ``mutation`` (``make mutation``,
docs/testing.md) and ``docs_hooks`` (the documentation site's home page, mkdocs.yml). They import
no product package (``make lint``): they read the product's files and run it only through pytest
and mutmut; nothing imports them, and nothing here ships (``.funcignore``).
"""

"""The documentation site (mkdocs.yml, docs/, the README as its home page): it builds with no
warning, so a broken link, a missing page or anchor, or a page left out of the nav fails."""

"""(package docstring follows in a later commit)"""

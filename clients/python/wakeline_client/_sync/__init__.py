# GENERATED from wakeline_client/_async/__init__.py by clients/python/codegen/unasync.py: do not edit.

"""The relational fabric: engines and migrations (``db``), the schema (``tables``), ``Repository`` and
its parts (``records``)."""

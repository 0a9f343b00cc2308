"""Embedders, the text -> vector edge of the fabric: the port and the built-in models (``port``), an
OpenAI-compatible endpoint (``http``), local models (``local``), embedding ahead (``prefetch``)."""

"""The vector-store port (``port``) and its adapters: embedded qdrant-edge (``edge``), a Qdrant server
(``qdrant``); the in-process ANN cache (``ann``, ``ann_snapshot``) and the port's parts."""

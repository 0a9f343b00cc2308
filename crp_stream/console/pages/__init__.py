"""The console's pages, one group per module; each has ``routes(console) -> list[Route]``."""

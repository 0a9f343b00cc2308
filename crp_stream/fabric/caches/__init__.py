"""In-memory caches of committed fabric state: the similarity graph, candidate facts, the arbiter's claims."""

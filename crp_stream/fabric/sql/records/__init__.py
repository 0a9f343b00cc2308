"""``Repository``'s parts, one noun each: edges, forgetting, operator records, progress, stored vectors."""

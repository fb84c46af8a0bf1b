"""The store's reads, one module per concern, each a mixin of tracker.store.Store; `_sql` holds what they share."""

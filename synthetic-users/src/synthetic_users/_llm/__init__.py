"""Models behind personas: one interface (`_base.Model`), three implementations."""

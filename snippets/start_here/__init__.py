"""Chapter: Start here."""

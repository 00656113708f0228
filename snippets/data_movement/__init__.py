"""Chapter: moving data between host and device."""

"""Chapter: GPU memory: where it goes, out-of-memory errors, and how to need less."""

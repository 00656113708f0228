"""Chapter: Compilers."""

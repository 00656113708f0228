"""Chapter: case studies that combine the techniques."""

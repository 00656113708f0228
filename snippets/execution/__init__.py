"""Chapter: asynchronous execution, timing, streams and events."""

"""Chapter: foundations: the hardware, concurrency on the host, and when a GPU pays."""

"""pytest plugin (placeholder until the plugin issue lands): does nothing visible."""

"""Model configuration: ``config.pbtxt`` parsing, JSON form, validation and defaults."""

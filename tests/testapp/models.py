"""Models the tests use the app's parts with."""

"""Test support: a tiny causal LM built from local text, and an OpenAI-format test server."""

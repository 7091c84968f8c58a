"""Custom pyinfra facts for GPU LLM hosts. Parsers are plain functions for unit tests."""

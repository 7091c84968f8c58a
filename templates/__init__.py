"""Jinja2 templates of the kit (units, Dockerfile, compose file, HAProxy config)."""

"""
beekeeper's own pyinfra operations, one module per concern: each reads a fact, then yields
commands or says with host.noop why nothing changes.
"""

"""
The kit's core: profiles, host data, the VRAM planner, the build spec, the host's file
layout and errors. It imports nothing of the kit outside beekeeper.core.
"""

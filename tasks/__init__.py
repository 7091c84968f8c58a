"""Deploy steps, one concern per module; deploy.py calls them in order."""

"""Messaging doors: people talk to the agent from a chat platform, through the same durable
admission, lease and events as the desktop and the command line.  `door.py` is the
platform-neutral part; each platform is one module implementing `base.Transport`."""

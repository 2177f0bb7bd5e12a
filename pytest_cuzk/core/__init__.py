"""What every room of the plugin shares: errors, outcomes, progress, transport, other plugins.

The error tree, where an error becomes a test's outcome, the progress line, what workers send
the controller, and the one door to other plugins' internals. It imports no other room.
"""

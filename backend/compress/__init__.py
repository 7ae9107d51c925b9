"""Context compression: fit a long session into the model's window without losing the thread.

`model` defines what the algorithms work on; `tokens`, `prune`, `plan` and
`summary` are pure (no I/O, no clock); `compressor` applies them to a stored
session under a lock, in place (rows marked `compacted`, a summary note
added), with the cooldown and anti-thrash guards; `Compressor.due` is the
preflight decision before every model call.
"""

"""Captioner families behind the decoder-step contract; a module per family name (show_tell,
show_attend_tell)."""

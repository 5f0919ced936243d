"""Data: the built-in English→Korean generator and readers for bring-your-own corpora."""

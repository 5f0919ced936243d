"""The built-in sentence-pair generator and the readers of bring-your-own corpora."""

"""The built-in review generator and the readers of bring-your-own labelled documents."""

"""Frontends: the ways users reach gingham without writing Tile (``gingham.Tensor`` first)."""

"""Pieces of the command line (:mod:`gpscale.cli`) that are not argument parsing:
standard input and output (:mod:`.stdio`), the method listing (:mod:`.methods`) and the
model description of ``gpscale info`` (:mod:`.info`)."""

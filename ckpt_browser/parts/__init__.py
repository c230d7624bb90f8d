"""Checkpoints read by what they hold (FORMATS.md "State by content"): which subtree of each pickled
file is the weights, the optimizer, the scheduler ... (`classify`), which project wrote it
(`projects`), and the parts each tensor belongs to (`tag`)."""

"""Checkpoints read by what they hold (content-signatures.md): which subtree of each pickled
file is the weights, the optimizer, the scheduler ... (`classify`), which project wrote it
(`projects`), and the parts each tensor belongs to (`tag`)."""

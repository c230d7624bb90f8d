"""Quiz: the question bank (data), questions generated from a checkpoint, a pure session."""

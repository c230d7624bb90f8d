"""Training state per framework family, read without executing any pickle.

`files` reads each state file once within caps; `common`, `optimizer`, `scheduler`, `scaler`,
`rng` and `weights` build the Components every framework shares; `sources` finds weights and
optimizer in HF Trainer and accelerate folders; `hf`, `accelerate`, `lightning`, `dcp`,
`deepspeed` and `megatron` each fill the seven for one family.
`analysis.components.training_state` is the entry point.
"""

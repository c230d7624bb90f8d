"""Write `projects/sb3/ppo_cartpole.zip` with Stable-Baselines3's own save code.

SB3 is not a project dependency: run this in a venv of its own, with torch pinned,
    python3 -m venv /tmp/sb3venv
    echo torch==2.13.0 > /tmp/c.txt
    /tmp/sb3venv/bin/pip install -c /tmp/c.txt torch==2.13.0 stable-baselines3
    /tmp/sb3venv/bin/python sample_checkpoints/make_sb3_sample.py
PPO on CartPole-v1 for 128 steps (two rollouts of 64), a policy of one hidden layer of 8, seeded,
on CPU; `model.save` writes the zip (stable_baselines3/common/save_util.py save_to_zip_file):
a JSON `data`, `policy.pth`, `policy.optimizer.pth` (Adam after two updates),
`pytorch_variables.pth`, `_stable_baselines3_version`, `system_info.txt`.
"""

from pathlib import Path

import torch
from stable_baselines3 import PPO

OUT = Path(__file__).resolve().parent / "projects" / "sb3"


def main() -> None:
    torch.set_num_threads(1)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=1, seed=0,
                policy_kwargs=dict(net_arch=[8]), device="cpu")
    model.learn(total_timesteps=128)
    OUT.mkdir(parents=True, exist_ok=True)
    model.save(OUT / "ppo_cartpole")  # SB3 adds .zip


if __name__ == "__main__":
    main()

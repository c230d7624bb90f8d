"""Write `projects/ultralytics/` with Ultralytics' own trainer (`YOLO(...).train(...)`).

Ultralytics is not a project dependency, and it needs torchvision, whose wheel does not import
beside the project's torch 2.13.0: so run this in a venv of its own, separate from the project's
.venv, with torch and torchvision pinned together,
    python3.11 -m venv /tmp/ultravenv
    /tmp/ultravenv/bin/pip install torch==2.14.1 torchvision==0.29.1
    printf 'torch==2.14.1\\ntorchvision==0.29.1\\n' > /tmp/ultra_c.txt
    /tmp/ultravenv/bin/pip install -c /tmp/ultra_c.txt ultralytics
    /tmp/ultravenv/bin/python sample_checkpoints/make_ultralytics_samples.py
Made with ultralytics 8.4.190, torch 2.14.1, torchvision 0.29.1 (CPU), Python 3.11.

No network: a synthetic detection set is made on disk (8 PNGs of 64x64, one coloured box each,
YOLO-format labels, one class 'box'; the same images train and validate), and the model is built
from a yaml: ultralytics' own cfg/models/v8/yolov8.yaml with nc 1, its scale 'n' shrunk to
[0.33, 0.0625, 512] (channels 8..32) and reg_max 4 (DFL bins; 16 by default), about 119k parameters,
so nothing is downloaded and the files stay small. YOLO_OFFLINE=1 skips the online check;
YOLO_CONFIG_DIR is a temporary folder (settings sync off), and check_det_dataset's
check_font('Arial.ttf') is served by a copy of matplotlib's DejaVuSans.ttf placed there as
Ultralytics/Arial.ttf (else it tries a download; plots=False keeps the plotters off).
Training runs with relative paths (data.yaml, the model yaml), which train_args keep as given;
only train_args' save_dir is absolute (/tmp/ultra-samples/<kind>/runs/detect/train, fixed).

Two runs, each `train(data='data.yaml', imgsz=64, batch=4, device='cpu', workers=0, plots=False,
val=True, amp=False, seed=0, deterministic=True, name='train')` in /tmp/ultra-samples/<kind>/, the
settings' runs_dir being 'runs' (a fresh YOLO_CONFIG_DIR outside a git repo), so runs/detect/train:
- interrupted/runs/detect/train/weights/last.pt: epochs=3, stopped after the first epoch by an
  `on_model_save` callback raising KeyboardInterrupt once epoch 0 is saved, as a Ctrl-C there
  would: the trainer never reaches final_eval, so strip_optimizer never runs and last.pt is the
  trainer's resume checkpoint (epoch 0, 'model' None, the fp16 EMA model as 'ema', 'updates',
  the AdamW state_dict, whose exp_avg/exp_avg_sq/step Ultralytics' fp16 conversion leaves fp32,
  and the disabled scaler's empty state).
- finished/runs/detect/train/weights/best.pt: epochs=2, run to the end, so it went through
  strip_optimizer (epoch -1, optimizer/ema/updates/scaler/best_fitness None, the EMA in fp16 as
  'model'); that run's last.pt, stripped the same way, is not kept (size).
results.csv and args.yaml are kept beside the weights; the dataset and labels cache are not.
expected_keys.json records what Ultralytics loads from each file (write_keys; `--keys` alone).
"""

import os
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "projects" / "ultralytics"
WIDTH = 0.0625
REG_MAX = 4
MAX_CHANNELS = 512
TMP = Path("/tmp/ultra-samples")


def make_dataset(root: Path) -> None:
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(0)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir(parents=True)
    for i in range(8):
        img = Image.new("RGB", (64, 64), (rng.randrange(40, 90),) * 3)
        w, h = rng.randrange(14, 30), rng.randrange(14, 30)
        x0, y0 = rng.randrange(0, 64 - w), rng.randrange(0, 64 - h)
        colour = tuple(rng.randrange(120, 256) for _ in range(3))
        ImageDraw.Draw(img).rectangle([x0, y0, x0 + w - 1, y0 + h - 1], fill=colour)
        img.save(root / "images" / f"img{i}.png")
        cx, cy = (x0 + w / 2) / 64, (y0 + h / 2) / 64
        label = f"0 {cx:.6f} {cy:.6f} {w / 64:.6f} {h / 64:.6f}\n"
        (root / "labels" / f"img{i}.txt").write_text(label)
    (root.parent / "data.yaml").write_text(
        f"path: {root.name}\ntrain: images\nval: images\nnames:\n  0: box\n"
    )


def make_model_yaml(dst: Path) -> None:
    import ultralytics

    src = Path(ultralytics.__file__).parent / "cfg" / "models" / "v8" / "yolov8.yaml"
    lines, out = src.read_text().splitlines(), []
    for line in lines:
        if line.strip().startswith(("n:", "s:", "m:", "l:", "x:")) and "[" in line:
            if line.strip().startswith("n:"):
                out.append(f"  n: [0.33, {WIDTH}, {MAX_CHANNELS}] # shrunk for a small sample")
            continue
        out.append(line)
    text = "\n".join(out) + "\n"
    text = text.replace("nc: 80 # number of classes",
                        f"nc: 1 # number of classes\nreg_max: {REG_MAX} # DFL bins, 16 by default")
    dst.write_text(text)


def train(epochs: int, interrupt_after_first: bool) -> None:
    from ultralytics import YOLO, settings

    settings.update(sync=False)  # no analytics events (offline anyway)

    model = YOLO("yolov8n-tiny.yaml")  # 'n' picks the scale; the file is ours
    if interrupt_after_first:
        def stop(trainer):
            if trainer.epoch == 0:
                raise KeyboardInterrupt("sample: stop after epoch 1, as a Ctrl-C would")
        model.add_callback("on_model_save", stop)
    try:
        model.train(data="data.yaml", epochs=epochs, imgsz=64, batch=4, device="cpu", workers=0,
                    plots=False, val=True, amp=False, seed=0, deterministic=True,
                    name="train", exist_ok=True)  # runs_dir 'runs' (relative) / task / name
    except KeyboardInterrupt:
        if not interrupt_after_first:
            raise


def main() -> None:
    tmp = TMP  # fixed, so train_args' absolute save_dir is the same on every run
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cfg = tmp / "config"
    cfg.mkdir()
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_CONFIG_DIR"] = str(cfg)
    import matplotlib  # before ultralytics: USER_CONFIG_DIR is YOLO_CONFIG_DIR/Ultralytics

    (cfg / "Ultralytics").mkdir()
    shutil.copy(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf",
                cfg / "Ultralytics" / "Arial.ttf")
    import torch

    torch.set_num_threads(1)
    shutil.rmtree(OUT, ignore_errors=True)
    for kind, epochs, interrupt in (("interrupted", 3, True), ("finished", 2, False)):
        work = tmp / kind
        work.mkdir()
        make_dataset(work / "shapes")
        make_model_yaml(work / "yolov8n-tiny.yaml")
        cwd = os.getcwd()
        os.chdir(work)
        try:
            train(epochs, interrupt)
        finally:
            os.chdir(cwd)
        src = work / "runs" / "detect" / "train"
        dst = OUT / kind / "runs" / "detect" / "train"
        (dst / "weights").mkdir(parents=True)
        keep = ["last.pt"] if interrupt else ["best.pt"]
        for name in keep:
            shutil.copy(src / "weights" / name, dst / "weights" / name)
        for name in ("results.csv", "args.yaml"):
            if (src / name).exists():
                shutil.copy(src / name, dst / name)
    shutil.rmtree(tmp)
    write_keys()


def write_keys() -> None:
    """expected_keys.json: what Ultralytics itself loads from each sample (the module its
    loaders take: the EMA, or the stripped file's model), as its state_dict() names it; the
    tests check the listing against it. `--keys` writes it alone, from the samples on disk."""
    import json

    import torch

    out = {}
    for rel, key in (("interrupted/runs/detect/train/weights/last.pt", "ema"),
                     ("finished/runs/detect/train/weights/best.pt", "model")):
        ckpt = torch.load(OUT / rel, map_location="cpu", weights_only=False)  # our own file
        sd = ckpt[key].state_dict()
        out[rel] = {"key": key, "names": list(sd),
                    "params": sum(v.numel() for v in sd.values())}
    (OUT / "expected_keys.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    import sys

    write_keys() if sys.argv[1:] == ["--keys"] else main()

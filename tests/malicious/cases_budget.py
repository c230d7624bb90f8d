"""Inputs that made values work, DCP metadata or numbers run long or crash: one tensor listed
100,000 times, a stride-0 view of 2**33 elements over one stored element, a DCP .metadata that
names a million chunks in 48 KB, a DCP whose items hold inf, nan, 10**40 and a rank of 5,000
digits, an HF checkpoint of infinite rates and a NaN loss, an index whose total_size has 999
digits. None of them is a payload (nothing to prove live): each must stay bounded."""

from __future__ import annotations

from tests.malicious.make_corpus import (
    _MD,
    ADAMW_STORAGES,
    DAMAGED,
    ODD,
    SCHEDULER,
    TITAN_ITEMS,
    TRAINER_STATE,
    Build,
    Call,
    G,
    Get,
    NewObj,
    Put,
    adamw,
    case,
    dcp_folder,
    dcp_metadata,
    dcp_tensor_blob,
    deflated,
    dumps,
    good_safetensors,
    hf_checkpoint,
    jdump,
    put,
    storage,
    tensor,
    tensor_md,
    torch_zip,
)

INF, NAN = float("inf"), float("nan")


@case(name="budget-tensor-flood", path="budget-tensor-flood/checkpoint-1", exits=ODD, live=None,
      tries="optimizer.pt (data.pkl deflated to 2 KB) whose state lists one memoised 4-element "
            "tensor 100,000 times: stats '*' read 100,000 tensors, 20 s of per-tensor work "
            "(the values budget reads 50,000 at most and lists them all as not read)",
      bad="budget-tensor-flood/checkpoint-1/optimizer.pt", words=r".")
def _():
    flood = [Put(250, tensor("1", (4,)))] + [Get(250)] * 99_999
    pkl = dumps(adamw({"flood": flood}), 2)
    hf_checkpoint("budget-tensor-flood/checkpoint-1",
                  torch_zip(deflated("archive/data.pkl", pkl), ADAMW_STORAGES))


@case(name="budget-stride0-view", path="budget-stride0-view/checkpoint-1", exits=ODD, live=None,
      tries="optimizer.pt whose exp_avg is a [2**17, 2**16] view with strides (0, 0) of its "
            "one-element storage (torch's expand): 32 GiB of values from 4 bytes, which stats "
            "read block by block for minutes (it is over its file's allowance now)",
      bad="budget-stride0-view/checkpoint-1/optimizer.pt", words=r".")
def _():
    view = Call(G("torch._utils", "_rebuild_tensor_v2"),
                (storage("1", 1), 0, (2**17, 2**16), (0, 0), False,
                 Call(G("collections", "OrderedDict"), ())))
    sd = adamw(state={0: {"step": tensor("0", ()), "exp_avg": view,
                          "exp_avg_sq": tensor("2", (4,))}})
    hf_checkpoint("budget-stride0-view/checkpoint-1", torch_zip(dumps(sd, 2), ADAMW_STORAGES))


def _shared_chunks(tensors: int, per: int) -> bytes:
    """`tensors` entries naming one memoised list of `per` chunks (each tiles [per])."""
    size = [Put(190, G("torch", "Size"))]
    cls = [Put(191, G(_MD, "ChunkStorageMetadata"))]
    one = [Put(192, Call(Get(190), ((1,),)))]

    def chunk(i: int) -> Build:
        return Build(NewObj(cls.pop() if cls else Get(191)),
                     {"offsets": Call(size.pop() if size else Get(190), ((i,),)),
                      "sizes": one.pop() if one else Get(192)})

    first = tensor_md((per,), [])
    first.state["chunks"] = Put(200, [chunk(i) for i in range(per)])
    items = {"model.t0": Put(201, first)}
    items.update((f"model.t{t}", Get(201)) for t in range(1, tensors))
    return dcp_metadata(items, {})


@case(name="budget-dcp-million-chunks", path="budget-dcp-million-chunks/step-1", exits=DAMAGED,
      live=None,
      tries="a DCP .metadata of 48 KB whose 1,000 tensors all name one memoised list of 1,000 "
            "chunks: a million chunks, 10 s and 730 MB to read, 160 MB of inspect --json",
      bad="budget-dcp-million-chunks/step-1/.metadata", words=r"names 1,000,000 chunks in")
def _():
    put("budget-dcp-million-chunks/step-1/.metadata", _shared_chunks(1000, 1000))
    put("budget-dcp-million-chunks/step-1/__0_0.distcp", dcp_tensor_blob())


@case(name="budget-dcp-numbers", path="budget-dcp-numbers/step-1", exits=ODD, live=None,
      tries="a torchtitan DCP whose items hold train_state.step nan, ntokens_seen inf, "
            "lr_scheduler.last_epoch 10**40 and a dataloader.dp_rank_ key of 5,000 digits "
            "(int() refused to sort it: check stopped with an internal error)",
      bad="budget-dcp-numbers/step-1/.metadata", words=r".")
def _():
    meta, rank = dcp_folder({**TITAN_ITEMS, "train_state.step": NAN,
                             "train_state.ntokens_seen": INF,
                             "lr_scheduler.last_epoch": 10**40, "dataloader.dp_world_size": 1,
                             "dataloader.dp_rank_" + "9" * 5000: {"sampler": 10**40}})
    put("budget-dcp-numbers/step-1/.metadata", meta)
    put("budget-dcp-numbers/step-1/__0_0.distcp", rank)


@case(name="budget-hf-numbers", path="budget-hf-numbers/checkpoint-1", exits=ODD, live=None,
      tries="an HF checkpoint-1 whose optimizer has lr inf, betas (nan, inf), weight_decay "
            "-inf and eps 1e308, whose scheduler is at last_epoch 10**40 with _last_lr [nan], "
            "and whose trainer_state.json logs a NaN loss and an Infinity grad_norm (as "
            "transformers writes them: they were called not JSON, progress damaged)",
      bad="budget-hf-numbers/checkpoint-1/trainer_state.json", words=r".",
      forbid=r"not valid JSON")
def _():
    sd = adamw()
    sd["param_groups"][0].update(lr=INF, betas=(NAN, INF), weight_decay=-INF, eps=1e308)
    sched = dict(SCHEDULER, base_lrs=[INF], _last_lr=[NAN], last_epoch=10**40,
                 _step_count=10**40)
    state = dict(TRAINER_STATE, epoch=NAN, log_history=[
        {"epoch": NAN, "grad_norm": INF, "learning_rate": INF, "loss": NAN, "step": 1}])
    hf_checkpoint("budget-hf-numbers/checkpoint-1", torch_zip(dumps(sd, 2), ADAMW_STORAGES),
                  scheduler__pt=torch_zip(dumps(sched, 2)), trainer_state__json=jdump(state))


@case(name="budget-index-total-size", path="budget-index-total-size", exits=ODD, live=None,
      tries="model.safetensors.index.json whose metadata.total_size has 999 digits: the "
            "browser's summary line turned it into a float while the shards loaded "
            "(OverflowError: the app stopped)",
      bad="budget-index-total-size/model.safetensors.index.json", words=r".")
def _():
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"metadata": {"total_size": 10**998},
             "weight_map": {"a": names[0], "b": names[1]}}
    put("budget-index-total-size/model.safetensors.index.json", jdump(index))
    put(f"budget-index-total-size/{names[0]}", good_safetensors(["a"]))
    put(f"budget-index-total-size/{names[1]}", good_safetensors(["b"]))

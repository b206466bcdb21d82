"""Capture Lightning runs (Trainer + MLFlowLogger + ThroughputMonitor) into runs/*.json.

    venvs/hf/bin/python scripts/capture_lightning.py               # both variants
    venvs/hf/bin/python scripts/capture_lightning.py ddp           # or: default_log

`ddp`: devices=2, strategy="ddp" on CPU (Lightning starts the second process itself), log_every_n_steps=5.
`default_log`: one device, log_every_n_steps left at its default (50) over 40 steps.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

BATCH, STEPS, WINDOW = 8, 40, 5
VARIANTS = {
    # name: (output file, devices, log_every_n_steps or None for the default)
    "ddp": ("lightning_ddp_2.json", 2, 5),
    "default_log": ("lightning_default_log_1.json", 1, None),
}


def worker(variant):
    import torch
    import lightning as L
    from lightning.fabric.utilities.throughput import measure_flops
    from lightning.pytorch.callbacks import ThroughputMonitor
    from lightning.pytorch.loggers import MLFlowLogger
    from torch.utils.data import DataLoader

    out_name, devices, log_every = VARIANTS[variant]

    class LitLM(L.LightningModule):
        def __init__(self, batch_size, seq_len, max_steps):
            super().__init__()
            self.save_hyperparameters()
            self.model = common.tiny_llama()
            self.tokens_this_rank = 0

        def training_step(self, batch, batch_idx):
            self.tokens_this_rank += batch.numel()
            loss = self.model(input_ids=batch, labels=batch).loss
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    module = LitLM(BATCH, common.SEQ_LEN, STEPS)
    with torch.device("meta"):
        meta_model = common.tiny_llama()
        x = torch.randint(0, common.VOCAB, (BATCH, common.SEQ_LEN))
    module.flops_per_batch = measure_flops(meta_model, lambda: meta_model(input_ids=x, labels=x).loss,
                                           loss_fn=torch.Tensor.sum)
    loader = DataLoader(common.synthetic_tokens(), batch_size=BATCH, shuffle=True, drop_last=True)
    mlf = MLFlowLogger(experiment_name=f"lightning-{variant}", run_name=out_name[:-5],
                       tracking_uri=os.environ["CAPTURE_TRACKING_URI"])
    kw = dict(accelerator="cpu", devices=devices, max_steps=STEPS, logger=mlf,
              callbacks=[ThroughputMonitor(batch_size_fn=lambda b: b.shape[0], length_fn=lambda b: b.numel(),
                                           window_size=WINDOW)],
              enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
              default_root_dir="_scratch/lightning")
    if devices > 1:
        kw["strategy"] = "ddp"
    if log_every is not None:
        kw["log_every_n_steps"] = log_every
    trainer = L.Trainer(**kw)
    t0 = time.time()
    trainer.fit(module, loader)
    t1 = time.time()
    counts = common.param_counts(module.model)
    notes = {
        "global_rank": trainer.global_rank, "world_size": trainer.world_size, "num_devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes, "precision": trainer.precision,
        "strategy": type(trainer.strategy).__name__, "global_step": trainer.global_step,
        "log_every_n_steps": trainer.log_every_n_steps, "throughput_window": WINDOW,
        "tokens_this_rank": module.tokens_this_rank,
        "flops_per_batch_per_device": module.flops_per_batch,
        "flops_per_token_measured": module.flops_per_batch / (BATCH * common.SEQ_LEN),
        "flops_per_token_formula": common.flops_per_token_formula(counts["params_total"]),
        "fit_wall_s": t1 - t0, "fit_wall_epoch_s": [t0, t1],
        "callback_metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
        "logged_metrics": {k: float(v) for k, v in trainer.logged_metrics.items()},
        "mlflow_run_id": mlf.run_id if trainer.global_rank == 0 else None,
        "torch_num_threads": torch.get_num_threads(),
        **counts,
        "versions": common.versions("torch", "lightning", "transformers", "mlflow", "mlflow-skinny"),
    }
    common.write_rank_notes(notes, rank=trainer.global_rank)


def capture(uri, variant):
    out_name, devices, log_every = VARIANTS[variant]
    cmd = [common.venv_bin("hf", "python"), "scripts/capture_lightning.py", "--worker", variant]
    notes, wall, _ = common.run_worker(cmd, {"CAPTURE_TRACKING_URI": uri}, f"lightning_{variant}")
    runs = common.find_runs(uri, f"lightning-{variant}")
    assert len(runs) == 1, f"expected one run, found {len(runs)}"
    r0 = notes[0]
    tokens = sum(n["tokens_this_rank"] for n in notes.values())
    capture_notes = {
        "framework": f"lightning Trainer + MLFlowLogger + ThroughputMonitor(window_size={WINDOW})",
        "launcher": ("python (Lightning's ddp subprocess launcher, devices=2)" if devices > 1
                     else "python (single process)"),
        "model": common.MODEL_DESC, "data": common.DATA_DESC,
        "trainer_args": (f"accelerator='cpu', devices={devices}"
                         + (", strategy='ddp' (gloo)" if devices > 1 else "")
                         + f", max_steps={STEPS}, batch {BATCH} per device, "
                         + (f"log_every_n_steps={log_every}" if log_every else "log_every_n_steps left at default")
                         + ", flops_per_batch from lightning measure_flops on a meta-device copy"),
        "world_size": r0["world_size"], "num_devices": r0["num_devices"], "num_nodes": r0["num_nodes"],
        "precision": r0["precision"], "strategy": r0["strategy"], "global_step": r0["global_step"],
        "log_every_n_steps": r0["log_every_n_steps"], "tokens_trained": tokens,
        "model_flops_total_by_measure_flops": r0["flops_per_batch_per_device"] * r0["global_step"] * len(notes),
        "trainer_side": {k: v for k, v in r0.items() if k != "versions"},
        "per_rank": {r: {k: n[k] for k in ("global_rank", "tokens_this_rank", "global_step", "fit_wall_s",
                                           "torch_num_threads")} for r, n in notes.items()},
        "script_wall_s": wall,
        "versions": r0["versions"],
    }
    common.export_run(uri, runs[0].info.run_id, out_name, capture_notes)


def main(argv):
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    with common.mlflow_server("lightning") as uri:
        for v in argv or list(VARIANTS):
            capture(uri, v)


if __name__ == "__main__":
    main(sys.argv[1:])

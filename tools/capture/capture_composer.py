"""Capture Composer runs (Trainer + MLFlowLogger + SpeedMonitor) into runs/*.json.

    venvs/hf/bin/python scripts/capture_composer.py          # both variants
    venvs/hf/bin/python scripts/capture_composer.py single   # or: ddp

The orchestrator (hf venv: it has the MLflow server) starts the workers with the composer venv:
one process with venvs/composer/bin/python, two with `venvs/composer/bin/composer -n 2`.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

BATCH, STEPS, WINDOW = 8, 40, 5
VARIANTS = {"single": ("composer_2.json", 1), "ddp": ("composer_ddp_1.json", 2)}


def worker(variant):
    import torch
    from torch.utils.data import DataLoader
    from composer import Trainer
    from composer.callbacks import SpeedMonitor
    from composer.loggers import MLFlowLogger
    from composer.models import ComposerModel
    from composer.utils import dist

    class TinyLM(ComposerModel):
        def __init__(self):
            super().__init__()
            self.model = common.tiny_llama()
            self.counts = common.param_counts(self.model)
            self.flops_per_token = common.flops_per_token_formula(self.counts["params_total"])

        def forward(self, batch):
            return self.model(input_ids=batch["input_ids"], labels=batch["input_ids"])

        def loss(self, outputs, batch):
            return outputs.loss

        def flops_per_batch(self, batch):  # read by SpeedMonitor; per rank, it sums over ranks
            return self.flops_per_token * batch["input_ids"].numel()

    model = TinyLM()
    dataset = [{"input_ids": x} for x in common.synthetic_tokens()]
    loader = DataLoader(dataset, batch_size=BATCH, sampler=dist.get_sampler(dataset, shuffle=True),
                        drop_last=True)
    out_name = VARIANTS[variant][0]
    mlf = MLFlowLogger(experiment_name=f"composer-{variant}", run_name=out_name[:-5],
                       tracking_uri=os.environ["CAPTURE_TRACKING_URI"])
    trainer = Trainer(model=model, train_dataloader=loader, max_duration=f"{STEPS}ba",
                      optimizers=torch.optim.AdamW(model.parameters(), lr=1e-3), device="cpu",
                      loggers=[mlf], callbacks=[SpeedMonitor(window_size=WINDOW)],
                      progress_bar=False, log_to_console=False, seed=42)
    t0 = time.time()
    trainer.fit()
    t1 = time.time()
    ts = trainer.state.timestamp
    notes = {
        "rank": dist.get_global_rank(), "world_size": dist.get_world_size(),
        "local_world_size": dist.get_local_world_size(), "node_rank": dist.get_node_rank(),
        "device": type(trainer.state.device).__name__, "precision": str(trainer.state.precision),
        "trainer_run_name": trainer.state.run_name,
        "timestamp_batch": int(ts.batch), "timestamp_sample": int(ts.sample), "timestamp_token": int(ts.token),
        "timestamp_epoch": int(ts.epoch),
        "composer_total_wct_s": ts.total_wct.total_seconds(),
        "composer_batch_wct_s": ts.batch_wct.total_seconds(),
        "fit_wall_s": t1 - t0, "fit_wall_epoch_s": [t0, t1],
        "speed_monitor_window": WINDOW, "flops_per_token": model.flops_per_token,
        "flops_per_batch_formula": "(6*N_total*T + 12*L*d*T*T) * batch, per rank; SpeedMonitor sums over ranks",
        "mlflow_run_id": getattr(mlf, "_run_id", None),
        "torch_num_threads": torch.get_num_threads(),
        **model.counts,
        "versions": common.versions("torch", "mosaicml", "transformers", "mlflow-skinny", "mlflow"),
    }
    trainer.close()
    common.write_rank_notes(notes)


def capture(uri, variant):
    out_name, nproc = VARIANTS[variant]
    if nproc == 1:
        cmd = [common.venv_bin("composer", "python"), "scripts/capture_composer.py", "--worker", variant]
        launcher = "python (single process)"
    else:
        cmd = [common.venv_bin("composer", "composer"), "-n", str(nproc), "--master_addr", "127.0.0.1",
               "--master_port", str(common.free_port()), "--stdout", "logs/composer_ddp_rank{rank}.stdout.txt",
               "--stderr", "logs/composer_ddp_rank{rank}.stderr.txt",
               "scripts/capture_composer.py", "--worker", variant]
        launcher = f"composer -n {nproc} (Composer's own launcher, gloo on CPU)"
    notes, wall, _ = common.run_worker(cmd, {"CAPTURE_TRACKING_URI": uri}, f"composer_{variant}")
    runs = common.find_runs(uri, f"composer-{variant}")
    assert len(runs) == 1, f"expected one run, found {len(runs)}"
    r0 = notes[0]
    steps = r0["timestamp_batch"]
    tokens_job = r0["timestamp_token"]
    capture_notes = {
        "framework": "composer Trainer + MLFlowLogger + SpeedMonitor(window_size=%d)" % WINDOW,
        "launcher": launcher, "model": common.MODEL_DESC, "data": common.DATA_DESC,
        "trainer_args": f"batch {BATCH} per device, max_duration='{STEPS}ba', AdamW lr 1e-3, device='cpu', "
                        "precision default, auto_log_hparams default (False)",
        "world_size": r0["world_size"], "local_world_size": r0["local_world_size"],
        "steps": steps, "samples_trained": r0["timestamp_sample"], "tokens_trained": tokens_job,
        "tokens_per_step_job": tokens_job // steps if steps else None,
        "model_flops_total_by_formula": r0["flops_per_token"] * tokens_job,
        "trainer_side": {k: v for k, v in r0.items() if k != "versions"},
        "per_rank": {r: {k: n[k] for k in ("rank", "timestamp_batch", "timestamp_sample", "timestamp_token",
                                           "composer_total_wct_s", "fit_wall_s", "torch_num_threads")}
                     for r, n in notes.items()},
        "script_wall_s": wall,
        "versions": r0["versions"],
    }
    common.export_run(uri, runs[0].info.run_id, out_name, capture_notes)


def main(argv):
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    with common.mlflow_server("composer") as uri:
        for v in argv or list(VARIANTS):
            capture(uri, v)


if __name__ == "__main__":
    main(sys.argv[1:])

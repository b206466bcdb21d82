"""MLflow runs logged exactly as training frameworks log them (metric names, units, scopes,
steps, timestamps, params), generated from a known utilization u and overhead f so a test
can check that Reckon recovers both. No Reckon tag on any of them. Each builder cites the
framework source it follows; the numbers follow Reckon's own definitions:

    hardware FLOPs = 6·N·D × recompute factor,  compute = hardware FLOPs / (G · peak · u)
    (steady state),  wall = compute / (1 − f)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from demo.mlflow_server import to_ms

H100_BF16 = 989e12  # h100-sxm dense bf16, service/domain/hardware.py
BATCH_LIMIT = 1000  # metrics per log_batch call (MLflow's limit)


@dataclass(frozen=True)
class Truth:
    """What really happened: the run's size, its GPUs and its two efficiency factors."""

    params: float = 1.3e9
    gpus: int = 8
    seq_len: int = 2048
    batch_per_device: int = 8
    grad_accum: int = 2
    steps: int = 2000
    utilization: float = 0.42
    overhead: float = 0.18
    recompute: float = 1.0  # 4/3 for full recomputation
    peak: float = H100_BF16

    @property
    def tokens_per_step(self) -> int:
        return self.batch_per_device * self.grad_accum * self.gpus * self.seq_len

    @property
    def tokens(self) -> float:
        return float(self.steps * self.tokens_per_step)

    @property
    def model_flops(self) -> float:
        return 6.0 * self.params * self.tokens

    @property
    def compute_seconds(self) -> float:
        return self.model_flops * self.recompute / (self.gpus * self.peak * self.utilization)

    @property
    def wall_seconds(self) -> float:
        return self.compute_seconds / (1.0 - self.overhead)

    @property
    def step_seconds(self) -> float:
        return self.compute_seconds / self.steps

    @property
    def tokens_per_second(self) -> float:  # whole job, steady state
        return self.tokens / self.compute_seconds


def _write(
    client: MlflowClient,
    experiment_id: str,
    start: datetime,
    end: datetime,
    metrics: list[Metric],
    params: dict[str, str],
    tags: dict[str, str] | None = None,
) -> str:
    run_id: str = client.create_run(
        experiment_id, start_time=to_ms(start), tags=tags or {}
    ).info.run_id
    items = [Param(key, value) for key, value in params.items()]
    for offset in range(0, len(items), 100):
        client.log_batch(run_id, params=items[offset : offset + 100], synchronous=True)
    for offset in range(0, len(metrics), BATCH_LIMIT):
        client.log_batch(run_id, metrics=metrics[offset : offset + BATCH_LIMIT], synchronous=True)
    client.set_terminated(run_id, "FINISHED", end_time=to_ms(end))
    return run_id


def _at(moment: datetime) -> int:
    return to_ms(moment)


def _points(values: dict[str, float], moment: datetime, step: int) -> Iterable[Metric]:
    return (Metric(key, value, _at(moment), step) for key, value in values.items())


def hf_trainer_run(
    client: MlflowClient,
    experiment_id: str,
    truth: Truth,
    start: datetime,
    *,
    gradient_checkpointing: bool = False,
    logging_steps: int = 100,
) -> str:
    """transformers (huggingface/transformers 0101dc0)
    src/transformers/integrations/integration_utils.py, MLflowCallback:
    setup() logs TrainingArguments.to_dict() merged with the model config as params;
    on_log() logs every numeric value of `logs` with step=state.global_step. The Trainer
    (src/transformers/trainer.py, _inner_training_loop and _maybe_log_save_evaluate) logs at
    every logging_steps loss, grad_norm, learning_rate, epoch and, with
    include_num_input_tokens_seen, num_input_tokens_seen (summed over ranks), train_runtime
    and train_tokens_per_second (tokens so far / time so far); at the end, speed_metrics()
    (src/transformers/trainer_utils.py) gives train_runtime rounded to 4 places and
    train_samples_per_second / train_steps_per_second rounded to 3, beside total_flos
    (6 x non-embedding params x tokens, no recomputation) and train_loss. train() starts
    inside the run here (a pre-created run, as `reckon launch` makes): the overhead is the
    wall time outside train()."""
    outside = truth.wall_seconds - truth.compute_seconds
    train_start = start + timedelta(seconds=0.7 * outside)  # preprocessing before train()
    end = start + timedelta(seconds=truth.wall_seconds)
    metrics: list[Metric] = []
    per_step = truth.tokens_per_step
    for step in range(logging_steps, truth.steps + 1, logging_steps):
        elapsed = truth.step_seconds * step
        moment = train_start + timedelta(seconds=elapsed)
        seen = float(step * per_step)
        metrics += _points(
            {
                "loss": 2.0 + 1.0 / step,
                "grad_norm": 0.5,
                "learning_rate": 3e-4 * (1 - step / truth.steps),
                "epoch": step / truth.steps,
                "num_input_tokens_seen": seen,
                "train_runtime": round(elapsed, 4),
                "train_tokens_per_second": round(seen / elapsed, 3),
            },
            moment,
            step,
        )
    runtime = round(truth.compute_seconds, 4)
    samples = truth.steps * truth.batch_per_device * truth.grad_accum * truth.gpus
    metrics += _points(
        {
            "train_runtime": runtime,
            "train_samples_per_second": round(samples / runtime, 3),
            "train_steps_per_second": round(truth.steps / runtime, 3),
            "total_flos": truth.model_flops,
            "train_loss": 2.1,
            "epoch": 1.0,
        },
        train_start + timedelta(seconds=truth.compute_seconds),
        truth.steps,
    )
    params = {
        "per_device_train_batch_size": str(truth.batch_per_device),
        "gradient_accumulation_steps": str(truth.grad_accum),
        "gradient_checkpointing": str(gradient_checkpointing),
        "activation_checkpointing": str(gradient_checkpointing),
        "bf16": "True",
        "fp16": "False",
        "tf32": "None",
        "logging_steps": str(logging_steps),
        "max_steps": str(truth.steps),
        "include_num_input_tokens_seen": "all",
        "report_to": "['mlflow']",
        "model_type": "llama",
        "hidden_size": "2048",
        "num_hidden_layers": "24",
    }
    return _write(client, experiment_id, start, end, metrics, params)


def composer_run(
    client: MlflowClient,
    experiment_id: str,
    truth: Truth,
    start: datetime,
    *,
    window_size: int = 20,
    batches: int = 200,
) -> str:
    """composer (mosaicml/composer 6405188) composer/callbacks/speed_monitor.py,
    SpeedMonitor.batch_end (line 300; time/* logged at line 372): once the window
    of `window_size` batches is full, every batch logs throughput/{batches,samples,tokens,
    flops}_per_sec (whole job: elapsed over the window) and throughput/device/* (divided by
    world size), throughput/device/mfu; every batch logs time/train, time/val, time/total
    (hours, the default time_unit) and time/secs_per_step. Composer's MLFlowLogger logs with
    step = the batch count; the trainer logs time/token (tokens so far, whole job;
    composer/trainer/trainer.py line 2456). The
    first two batches run 3x slower (warm-up, compilation)."""
    per_batch_tokens = truth.tokens / batches
    steady_batch = truth.compute_seconds / batches
    durations = [3 * steady_batch if index < 2 else steady_batch for index in range(batches)]
    train_start = start + timedelta(seconds=0.5 * (truth.wall_seconds - truth.compute_seconds))
    samples_per_batch = per_batch_tokens / truth.seq_len
    metrics: list[Metric] = []
    clock = [0.0]
    for duration in durations:
        clock.append(clock[-1] + duration)
    for batch in range(1, batches + 1):
        moment = train_start + timedelta(seconds=clock[batch])
        values = {
            "time/train": clock[batch] / 3600,
            "time/val": 0.0,
            "time/total": clock[batch] / 3600,
            "time/secs_per_step": durations[batch - 1],
            "time/token": batch * per_batch_tokens,
            "time/batch": float(batch),
        }
        if batch >= window_size:
            elapsed = clock[batch] - clock[batch - window_size]
            tokens_per_sec = window_size * per_batch_tokens / elapsed
            flops_per_sec = tokens_per_sec * 6 * truth.params
            values |= {
                "throughput/batches_per_sec": window_size / elapsed,
                "throughput/samples_per_sec": window_size * samples_per_batch / elapsed,
                "throughput/device/batches_per_sec": window_size / elapsed / truth.gpus,
                "throughput/device/samples_per_sec": window_size
                * samples_per_batch
                / elapsed
                / truth.gpus,
                "throughput/tokens_per_sec": tokens_per_sec,
                "throughput/device/tokens_per_sec": tokens_per_sec / truth.gpus,
                "throughput/flops_per_sec": flops_per_sec,
                "throughput/device/flops_per_sec": flops_per_sec / truth.gpus,
                "throughput/device/mfu": flops_per_sec / truth.gpus / truth.peak,
            }
        metrics += _points(values, moment, batch)
    end = start + timedelta(seconds=truth.wall_seconds)
    params = {"num_nodes": "1", "num_gpus_per_node": str(truth.gpus), "precision": "amp_bf16"}
    return _write(client, experiment_id, start, end, metrics, params)


def lightning_run(
    client: MlflowClient,
    experiment_id: str,
    truth: Truth,
    start: datetime,
    *,
    log_every_n_steps: int = 50,
    window_size: int = 100,
) -> str:
    """lightning (Lightning-AI/pytorch-lightning 7f0c343)
    src/lightning/pytorch/callbacks/throughput_monitor.py (ThroughputMonitor._update, line
    124, per micro-batch; ._compute, line 159, after each optimizer step (line 183), logged
    only when the
    logger connector should update, i.e. every log_every_n_steps, at step = completed
    steps - 1) and src/lightning/fabric/utilities/throughput.py (Throughput.compute, line
    172: flops are summed over ranks, device/* divide by world size): keys
    train/time, train/batches (micro-batches), train/samples, train/lengths (this rank),
    and once `window_size` updates are held, train/device/{batches,samples,items,flops}_per_sec
    and, with more than one device, the whole-job train/*_per_sec. flops_per_batch is per
    device micro-batch. The first two optimizer steps run 3x slower."""
    micro = truth.grad_accum
    per_micro_tokens = truth.batch_per_device * truth.seq_len  # one device
    steady_step = truth.compute_seconds / truth.steps
    durations = [3 * steady_step if step < 2 else steady_step for step in range(truth.steps)]
    clock = [0.0]
    for duration in durations:
        clock.append(clock[-1] + duration)
    train_start = start + timedelta(seconds=0.5 * (truth.wall_seconds - truth.compute_seconds))
    flops_per_batch = 6 * truth.params * per_micro_tokens
    window_steps = window_size // micro  # the window counts micro-batch updates
    metrics: list[Metric] = []
    for step in range(log_every_n_steps, truth.steps + 1, log_every_n_steps):
        moment = train_start + timedelta(seconds=clock[step])
        batches = step * micro
        values = {
            "train/time": clock[step],
            "train/batches": float(batches),
            "train/samples": float(batches * truth.batch_per_device),
            "train/lengths": float(batches * per_micro_tokens),
            "train_loss": 2.0,
            "epoch": 0.0,
        }
        if step >= window_steps:
            elapsed = clock[step] - clock[step - window_steps]
            batches_per_sec = window_size / elapsed
            device = {
                "batches_per_sec": batches_per_sec,
                "samples_per_sec": batches_per_sec * truth.batch_per_device,
                "items_per_sec": batches_per_sec * per_micro_tokens,
                "flops_per_sec": batches_per_sec * flops_per_batch,
            }
            values |= {f"train/device/{key}": value for key, value in device.items()}
            if truth.gpus > 1:
                values |= {f"train/{key}": value * truth.gpus for key, value in device.items()}
        metrics += _points(values, moment, step - 1)
    end = start + timedelta(seconds=truth.wall_seconds)
    params = {  # Lightning logs only what the module saved with save_hyperparameters()
        "lr": "0.0003",
        "batch_size": str(truth.batch_per_device),
        "seq_len": str(truth.seq_len),
    }
    return _write(client, experiment_id, start, end, metrics, params)


def nemo_run(
    client: MlflowClient,
    experiment_id: str,
    truth: Truth,
    start: datetime,
    *,
    log_every_n_steps: int = 10,
) -> str:
    """NeMo (NVIDIA/NeMo 8cfedd7) nemo/utils/exp_manager.py (TimingCallback, line 297:
    "train_step_timing in s", seconds per step, and tokens_per_sec_per_gpu with
    log_tokens_per_sec, line 380) and nemo/lightning/pytorch/callbacks/flops_callback.py
    (FLOPsMeasurementCallback.on_train_batch_end, line 146, every log_every_n_steps, from
    the model's FLOPs formula without recomputation: tflops_per_sec_per_gpu in the releases
    logged here, TFLOPS_per_GPU in the newest); Lightning's MLFlowLogger logs them at step =
    global_step and the config flattened with "/" as params. The first log interval runs
    2x slower."""
    metrics: list[Metric] = []
    train_start = start + timedelta(seconds=0.6 * (truth.wall_seconds - truth.compute_seconds))
    per_gpu_tokens = truth.tokens_per_second / truth.gpus
    per_gpu_tflops = per_gpu_tokens * 6 * truth.params / 1e12
    elapsed = 0.0
    for step in range(log_every_n_steps, truth.steps + 1, log_every_n_steps):
        slow = 2.0 if step == log_every_n_steps else 1.0
        elapsed += slow * truth.step_seconds * log_every_n_steps
        values = {
            "train_step_timing in s": slow * truth.step_seconds,
            "tflops_per_sec_per_gpu": per_gpu_tflops / slow,
            "tokens_per_sec_per_gpu": per_gpu_tokens / slow,
            "reduced_train_loss": 2.0,
            "lr": 3e-4,
            "global_step": float(step),
            "consumed_samples": float(step * truth.tokens_per_step / truth.seq_len),
        }
        metrics += _points(values, train_start + timedelta(seconds=elapsed), step)
    end = start + timedelta(seconds=truth.wall_seconds)
    params = {
        "trainer/devices": str(truth.gpus),
        "trainer/num_nodes": "1",
        "trainer/precision": "bf16-mixed",
        "model/encoder_seq_length": str(truth.seq_len),
        "model/global_batch_size": str(truth.tokens_per_step // truth.seq_len),
    }
    return _write(client, experiment_id, start, end, metrics, params)


def torchtitan_run(
    client: MlflowClient,
    experiment_id: str,
    truth: Truth,
    start: datetime,
    *,
    log_freq: int = 10,
) -> str:
    """torchtitan torchtitan/components/metrics.py, MetricsProcessor.log (lines 455-518 at
    pytorch/torchtitan b5bcd76): at step 1 and every log_freq steps, per device, tps
    (tokens/s), tflops (num_flops_per_token x tps / 1e12), mfu(%) (a percentage),
    time_metrics/end_to_end(s) (seconds per step over the interval), data loading and
    memory figures, loss_metrics/*; keys as an MLflow bridge logs them, step = the step
    (from 1): MLflow refuses "(", ")" and "%" in a metric name, so "mfu(%)" becomes "mfu"
    and "time_metrics/end_to_end(s)" becomes "time_metrics/end_to_end" (units dropped).
    The first interval (step 1) is 3x slower."""
    metrics: list[Metric] = []
    train_start = start + timedelta(seconds=0.5 * (truth.wall_seconds - truth.compute_seconds))
    per_device_tps = truth.tokens_per_second / truth.gpus
    steps = [1, *range(log_freq, truth.steps + 1, log_freq)]
    for step in steps:
        slow = 3.0 if step == 1 else 1.0
        tps = per_device_tps / slow
        values = {
            "loss_metrics/global_avg_loss": 2.0,
            "loss_metrics/global_max_loss": 2.2,
            "tps": tps,
            "tflops": 6 * truth.params * tps / 1e12,
            "mfu": 100 * 6 * truth.params * tps / truth.peak,
            "time_metrics/end_to_end": slow * truth.step_seconds,
            "time_metrics/data_loading": 0.01,
            "time_metrics/data_loading_pct": 0.1,
            "memory/max_active_gib": 61.0,
        }
        metrics += _points(values, train_start + timedelta(seconds=step * truth.step_seconds), step)
    end = start + timedelta(seconds=truth.wall_seconds)
    return _write(client, experiment_id, start, end, metrics, {"job.config_file": "llama3_8b"})


def reckon_run(client: MlflowClient, experiment_id: str, truth: Truth, start: datetime) -> str:
    """Reckon's own convention (docs/contract.md §4): tokens_per_second, whole job, latest
    value, and the configuration as reckon.* params (no estimate tag)."""
    moment = start + timedelta(seconds=truth.wall_seconds / 2)
    metrics = [
        Metric("tokens_per_second", truth.tokens_per_second * fraction, _at(moment), step)
        for step, fraction in enumerate((0.5, 0.9, 1.0))
    ]
    params = {
        "reckon.params": repr(truth.params),
        "reckon.tokens": repr(truth.tokens),
        "reckon.gpus": str(truth.gpus),
        "reckon.precision": "bf16",
    }
    end = start + timedelta(seconds=truth.wall_seconds)
    return _write(client, experiment_id, start, end, metrics, params)


def replay_captured(
    client: MlflowClient, experiment_id: str, path: Path, tags: dict[str, str] | None = None
) -> tuple[str, Any]:
    """A captured real run (tests/data/trainer_runs) logged again with every metric point,
    its params, tags (or `tags` instead of the captured reckon.* ones) and times; returns
    the new run id and the capture's notes."""
    document = json.loads(path.read_text())
    info = document["run_info"]
    captured = document["tags"].items()
    if tags is None:
        tags = {key: value for key, value in captured if key != "mlflow.runName"}
    else:
        kept = {key: value for key, value in captured if not key.startswith("reckon.")}
        tags = {**kept, **tags}
        tags.pop("mlflow.runName", None)
    run_id: str = client.create_run(
        experiment_id, start_time=info["start_time"], tags=tags
    ).info.run_id
    params = [Param(key, value) for key, value in document["params"].items()]
    for offset in range(0, len(params), 100):
        client.log_batch(run_id, params=params[offset : offset + 100], synchronous=True)
    points = [  # later captures leave the key out of each point: it is the series' name
        Metric(point.get("key", key), point["value"], point["timestamp"], point["step"])
        for key, series in document["metric_history"].items()
        for point in series
    ]
    for offset in range(0, len(points), BATCH_LIMIT):
        client.log_batch(run_id, metrics=points[offset : offset + BATCH_LIMIT], synchronous=True)
    client.set_terminated(run_id, info["status"], end_time=info["end_time"])
    return run_id, document["capture_notes"]

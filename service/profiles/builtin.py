"""The logging profiles Reckon knows without configuration: what each framework logs to
MLflow by default, read from the framework's own source (cited per profile). Pure data."""

from __future__ import annotations

from service.profiles.spec import Profile, Spec

DEFAULT_THROUGHPUT_METRIC = "tokens_per_second"

HF_TRAINER = Profile(
    name="hf-trainer",
    source_file=(
        "transformers (huggingface/transformers 0101dc0): src/transformers/integrations/"
        "integration_utils.py (MLflowCallback.setup, .on_log), src/transformers/trainer.py "
        "(Trainer._inner_training_loop, _maybe_log_save_evaluate) and trainer_utils.py "
        "(speed_metrics)"
    ),
    # Every scalar in `logs` is logged with step=state.global_step. total_flos is
    # state.total_flos: 6 x non-embedding parameters x tokens summed over ranks, never
    # counting recomputation. train_runtime is the wall time of train() itself, so it
    # includes evaluation and checkpoint saves inside train(): Reckon takes it as the
    # compute time, and the run's wall time outside train() as the overhead. Its timer starts
    # before the MLflow run exists, so on a short run train_runtime can exceed the run's wall
    # time (the comparison clamps overhead to 0 with the note overhead_clamped). Its rates
    # are averages over train(), never a steady state.
    specs=(
        Spec("total_flos", "model_flops", "job", "flop"),
        Spec("train_runtime", "compute_seconds", "job", "s"),
        Spec("num_input_tokens_seen", "tokens", "job", "count"),  # opt-in, summed over ranks
        Spec("train_tokens_per_second", "tokens_per_second_average", "job", "1/s"),
        Spec("train_samples_per_second", "samples_per_second_average", "job", "1/s"),
        Spec("train_steps_per_second", "steps_per_second_average", "job", "1/s"),
        Spec("per_device_train_batch_size", "batch_per_device", source="param"),
        Spec("gradient_accumulation_steps", "grad_accum", source="param"),
        # -1 unless the run was given a step budget; the steps it ran come from its rates.
        Spec("max_steps", "optimizer_steps", source="param"),
        Spec("gradient_checkpointing", "recompute", unit="bool", source="param"),
        Spec("activation_checkpointing", "recompute", unit="bool", source="param"),
        Spec("bf16", "bf16", unit="bool", source="param"),
        Spec("fp16", "fp16", unit="bool", source="param"),
        Spec("tf32", "tf32", unit="bool", source="param"),
    ),
    detect=("total_flos", "train_runtime"),
    compute_from=("runtime",),
    counts_model_config=True,
)

COMPOSER = Profile(
    name="composer",
    source_file=(
        "composer (mosaicml/composer 6405188): composer/callbacks/speed_monitor.py "
        "(SpeedMonitor.batch_end, line 300; time/* at 372) and composer/trainer/trainer.py "
        "(time/token, line 2456)"
    ),
    # Rates are rolling averages over the last `window_size` batches (default 100), logged
    # every batch; throughput/* is the whole job, throughput/device/* divides by world size.
    # time/train is the training wall clock without evaluation, in `time_unit` (hours by
    # default). time/token is the trainer's timestamp: tokens so far, whole job.
    specs=(
        Spec("throughput/tokens_per_sec", "tokens_per_second", "job", "1/s", statistic="steady"),
        Spec(
            "throughput/device/tokens_per_sec",
            "tokens_per_second",
            "device",
            "1/s",
            statistic="steady",
        ),
        Spec("throughput/flops_per_sec", "flops_per_second", "job", "flop/s", statistic="steady"),
        Spec(
            "throughput/device/flops_per_sec",
            "flops_per_second",
            "device",
            "flop/s",
            statistic="steady",
        ),
        Spec("time/token", "tokens", "job", "count"),
        # Logged with time/token at each batch start (trainer.py, beside time/token): both are
        # counts so far, so their ratio is the tokens of one optimizer step (a Composer batch,
        # its microbatches included).
        Spec("time/batch", "optimizer_steps", "job", "count"),
        Spec("time/train", "compute_seconds", "job", "h"),
        Spec("num_nodes", "nodes", source="param"),
        Spec("num_gpus_per_node", "gpus_per_node", source="param"),
        Spec("precision", "precision", unit="name", source="param"),
    ),
    detect=("throughput/tokens_per_sec", "throughput/device/tokens_per_sec", "time/token"),
)

LIGHTNING = Profile(
    name="lightning",
    source_file=(
        "lightning (Lightning-AI/pytorch-lightning 7f0c343): src/lightning/pytorch/callbacks/"
        "throughput_monitor.py (ThroughputMonitor._update line 124, ._compute 159, "
        "on_train_batch_end 177) and src/lightning/fabric/utilities/throughput.py "
        "(Throughput.compute, line 172)"
    ),
    # Keys are "<stage>/<name>": train/time (seconds since training started, validation
    # excluded), train/batches (micro-batches), train/samples, train/lengths (items from
    # length_fn: tokens, on this rank) and windowed rates train/device/*_per_sec; the
    # whole-job train/*_per_sec appear only with more than one device, so their absence
    # means one. flops_per_sec is the module's flops_per_batch x batches/s. With the default
    # window of 100 batches a shorter run logs no rate at all.
    specs=(
        Spec("train/items_per_sec", "tokens_per_second", "job", "1/s", statistic="steady"),
        Spec(
            "train/device/items_per_sec", "tokens_per_second", "device", "1/s", statistic="steady"
        ),
        Spec("train/flops_per_sec", "flops_per_second", "job", "flop/s", statistic="steady"),
        Spec(
            "train/device/flops_per_sec",
            "flops_per_second",
            "device",
            "flop/s",
            statistic="steady",
        ),
        Spec("train/lengths", "tokens", "device", "count"),
        Spec("train/time", "compute_seconds", "job", "s"),
    ),
    detect=("train/time", "train/device/samples_per_sec", "train/device/flops_per_sec"),
    compute_from=("throughput", "flops"),
    single_device_without_job_rate=True,
    no_rate_detail=(
        "Lightning's ThroughputMonitor logged no rate (the run is shorter than its "
        "window_size, 100 batches by default); wall time still used"
    ),
)

NEMO = Profile(
    name="nemo",
    source_file=(
        "NeMo (NVIDIA/NeMo 8cfedd7): nemo/utils/exp_manager.py (TimingCallback, line 297: "
        "'train_step_timing in s', tokens_per_sec_per_gpu) and nemo/lightning/pytorch/"
        "callbacks/flops_callback.py (FLOPsMeasurementCallback.on_train_batch_end, line 146: "
        "TFLOPS_per_GPU and TFLOPS; tflops_per_sec_per_gpu in earlier releases)"
    ),
    # Logged through Lightning's MLFlowLogger at step=global_step, every log_every_n_steps:
    # "train_step_timing in s" (seconds per step), tokens_per_sec_per_gpu (per device, with
    # log_tokens_per_sec), TFLOPS_per_GPU (per device; tflops_per_sec_per_gpu before) and
    # TFLOPS (the global batch's FLOPs over the step time: whole job). The config is logged
    # as flattened params ("trainer/devices", "trainer/num_nodes"). Compute time is the
    # steady step time times the steps logged (the last logged step: within one step).
    specs=(
        Spec("train_step_timing in s", "step_seconds", "job", "s", statistic="steady"),
        Spec("tokens_per_sec_per_gpu", "tokens_per_second", "device", "1/s", statistic="steady"),
        Spec("TFLOPS_per_GPU", "flops_per_second", "device", "tflop/s", statistic="steady"),
        Spec("TFLOPS", "flops_per_second", "job", "tflop/s", statistic="steady"),
        Spec("tflops_per_sec_per_gpu", "flops_per_second", "device", "tflop/s", statistic="steady"),
        Spec("trainer/devices", "gpus_per_node", source="param"),
        Spec("trainer/num_nodes", "nodes", source="param"),
        Spec("trainer/precision", "precision", unit="name", source="param"),
    ),
    detect=(
        "train_step_timing in s",
        "TFLOPS_per_GPU",
        "tflops_per_sec_per_gpu",
        "tokens_per_sec_per_gpu",
    ),
    compute_from=("steps",),
)

TORCHTITAN = Profile(
    name="torchtitan",
    source_file=(
        "torchtitan (pytorch/torchtitan b5bcd76): torchtitan/components/metrics.py "
        "(MetricsProcessor.log, lines 455-518: tps, tflops, mfu(%), "
        "time_metrics/end_to_end(s)), keys as an MLflow bridge logs them"
    ),
    # Per device and per log interval: tps (tokens/s), tflops (model TFLOP/s), mfu(%) (a
    # percentage), time_metrics/end_to_end(s) (seconds per step). MLflow rejects "(", ")"
    # and "%" in metric names, so a bridge logs them as mfu and time_metrics/end_to_end.
    # Steps start at 1, so the last logged step is the step count. The GPU count is not
    # logged: tag reckon.gpus or pass --gpus.
    specs=(
        Spec("time_metrics/end_to_end", "step_seconds", "job", "s", statistic="steady"),
        Spec("tps", "tokens_per_second", "device", "1/s", statistic="steady"),
        Spec("tflops", "flops_per_second", "device", "tflop/s", statistic="steady"),
    ),
    detect=("tps",),
    compute_from=("steps",),
)


def reckon_profile(metric: str = DEFAULT_THROUGHPUT_METRIC) -> Profile:
    """Reckon's own convention: one whole-job tokens/s metric, its latest value as logged.
    A non-default RECKON_THROUGHPUT_METRIC is the same profile under another metric name
    (named "throughput-metric"), and takes precedence over the framework profiles."""
    name = "reckon" if metric == DEFAULT_THROUGHPUT_METRIC else "throughput-metric"
    return Profile(
        name=name,
        source_file="Reckon: docs/contract.md §4 (RECKON_THROUGHPUT_METRIC, whole-job tokens/s)",
        specs=(Spec(metric, "tokens_per_second", "job", "1/s"),),
        detect=(metric,),
        raw_throughput=True,
    )


FRAMEWORKS: tuple[Profile, ...] = (HF_TRAINER, COMPOSER, LIGHTNING, NEMO, TORCHTITAN)

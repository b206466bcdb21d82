"""Capture Hugging Face Trainer runs (report_to="mlflow") into runs/*.json.

    venvs/hf/bin/python scripts/capture_hf.py            # all three variants
    venvs/hf/bin/python scripts/capture_hf.py default    # or: ddp, tokens

Worker mode (started by the above, once per process): scripts/capture_hf.py --worker VARIANT
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

BATCH, ACCUM, STEPS, LOG_EVERY = 8, 2, 30, 5
VARIANTS = {
    # name: (output file, processes, include_num_input_tokens_seen)
    "default": ("hf_default_1.json", 1, None),   # left off: TrainingArguments default
    "ddp": ("hf_ddp_1.json", 2, None),
    "tokens": ("hf_tokens_1.json", 1, True),
}


def training_args(variant, tokens, world):
    from transformers import TrainingArguments
    kw = dict(output_dir=f"_scratch/hf_{variant}", per_device_train_batch_size=BATCH,
              gradient_accumulation_steps=ACCUM, max_steps=STEPS, logging_steps=LOG_EVERY,
              save_strategy="no", report_to=["mlflow"], use_cpu=True, disable_tqdm=True,
              dataloader_pin_memory=False, seed=42)
    if tokens is not None:
        kw["include_num_input_tokens_seen"] = tokens
    if world > 1:
        kw["ddp_backend"] = "gloo"
    return TrainingArguments(**kw), kw


def worker(variant):
    import torch
    from transformers import Trainer
    world = int(os.environ.get("WORLD_SIZE", "1"))
    tokens = VARIANTS[variant][2] if variant in VARIANTS else None
    args, kw = training_args(variant, tokens, world)
    model = common.tiny_llama()
    data = common.synthetic_tokens()
    dataset = [{"input_ids": x, "labels": x} for x in data]

    counted = {"tokens": 0, "forward_calls": 0}

    def count(module, a, kwargs):  # our own count of tokens that reached the model on this rank
        if module.training and kwargs.get("input_ids") is not None:
            counted["tokens"] += kwargs["input_ids"].numel()
            counted["forward_calls"] += 1
    model.register_forward_pre_hook(count, with_kwargs=True)

    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    t0 = time.time()
    out = trainer.train()
    t1 = time.time()
    import mlflow
    last = mlflow.last_active_run() if args.process_index == 0 else None
    notes = {
        "process_index": args.process_index, "world_size": args.world_size, "n_gpu": args.n_gpu,
        "device": str(args.device), "parallel_mode": str(args.parallel_mode),
        "include_num_input_tokens_seen": args.include_num_input_tokens_seen,
        "n_params_all": model.num_parameters(),
        "n_params_no_embeddings": model.num_parameters(exclude_embeddings=True),
        "own_param_counts": common.param_counts(model),
        "train_output": {"global_step": out.global_step, "training_loss": out.training_loss,
                         "metrics": out.metrics},
        "state_total_flos": trainer.state.total_flos,
        "state_num_input_tokens_seen": trainer.state.num_input_tokens_seen,
        "log_history": trainer.state.log_history,
        "wall_train_call_s": [t0, t1],
        "script_counted_tokens_this_rank": counted["tokens"],
        "script_counted_forward_calls_this_rank": counted["forward_calls"],
        "training_args_set": {k: v for k, v in kw.items() if k != "output_dir"},
        "last_active_run_id": last.info.run_id if last else None,
        "env_MLFLOW_RUN_ID": os.environ.get("MLFLOW_RUN_ID"),
        "torch_num_threads": torch.get_num_threads(),
        "versions": common.versions("torch", "transformers", "accelerate", "mlflow", "mlflow-skinny"),
    }
    common.write_rank_notes(notes)


def launch_cmd(nproc, variant):
    if nproc == 1:
        return [common.venv_bin("hf", "python"), "scripts/capture_hf.py", "--worker", variant]
    return [common.venv_bin("hf", "torchrun"), "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
            "--master-port", str(common.free_port()), "scripts/capture_hf.py", "--worker", variant]


def build_notes(variant, nproc, tokens, env, notes, wall, launcher):
    r0 = notes[0]
    per_rank = {r: {k: n[k] for k in ("process_index", "state_total_flos", "state_num_input_tokens_seen",
                                      "script_counted_tokens_this_rank", "script_counted_forward_calls_this_rank",
                                      "wall_train_call_s", "torch_num_threads")}
                for r, n in notes.items()}
    return {
        "framework": "transformers.Trainer + MLflowCallback (report_to=['mlflow'])",
        "launcher": launcher,
        "model": common.MODEL_DESC, "data": common.DATA_DESC,
        "training_args": (f"per_device_train_batch_size={BATCH}, gradient_accumulation_steps={ACCUM}, "
                          f"max_steps={STEPS}, logging_steps={LOG_EVERY}, save_strategy='no', use_cpu=True"
                          + (", ddp_backend='gloo'" if nproc > 1 else "")
                          + (f", include_num_input_tokens_seen={tokens!r}" if tokens is not None
                             else ", include_num_input_tokens_seen left at its default")),
        "env": env, "devices": nproc, "world_size": r0["world_size"], "variant": variant,
        "tokens_trained_whole_job": sum(n["script_counted_tokens_this_rank"] for n in notes.values()),
        "trainer_side": {k: v for k, v in r0.items() if k != "versions"},
        "per_rank": per_rank,
        "script_wall_s": wall,
        "versions": r0["versions"],
    }


def capture(uri, variant):
    out_name, nproc, tokens = VARIANTS[variant]
    exp_name = f"hf-{variant}"
    env = {"MLFLOW_EXPERIMENT_NAME": exp_name}
    notes, wall, _ = common.run_worker(launch_cmd(nproc, variant), dict(env, MLFLOW_TRACKING_URI=uri),
                                       f"hf_{variant}")
    runs = common.find_runs(uri, exp_name)
    assert len(runs) == 1, f"expected one run in {exp_name}, found {len(runs)}"
    launcher = "python (single process)" if nproc == 1 else f"torchrun --nproc-per-node {nproc} (gloo, CPU)"
    common.export_run(uri, runs[0].info.run_id, out_name,
                      build_notes(variant, nproc, tokens, env, notes, wall, launcher))


def main(argv):
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    wanted = argv or list(VARIANTS)
    with common.mlflow_server("hf") as uri:
        for v in wanted:
            capture(uri, v)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Capture a "planned vs observed" run: tagged as Reckon's launcher would tag it with the planned
values, but trained with fewer processes (and so half the tokens) than planned.

    venvs/hf/bin/python scripts/capture_planned.py

Emulates `reckon launch` (see the project README): create the run with the planned tags, then run
the command with MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID/NAME, MLFLOW_TAGS, MLFLOW_TRACKING_URI and
RECKON_ESTIMATE_ID set, and mark the run FINISHED when the command exits 0. The command is the HF
Trainer worker of capture_hf.py under `torchrun --nproc-per-node 2` (planned: 4 GPUs).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import capture_hf  # noqa: E402

OUT = "planned_vs_observed_1.json"
NPROC, PLANNED_GPUS = 2, 4
ESTIMATE_ID = "0123456789abcdef"
EXPERIMENT = "reckon-planned"


def main():
    from mlflow.tracking import MlflowClient
    real_tokens = capture_hf.STEPS * capture_hf.BATCH * capture_hf.ACCUM * common.SEQ_LEN * NPROC
    planned = {"reckon.estimate_id": ESTIMATE_ID, "reckon.gpus": str(PLANNED_GPUS),
               "reckon.tokens": str(2 * real_tokens)}
    with common.mlflow_server("planned") as uri:
        client = MlflowClient(tracking_uri=uri)
        exp_id = client.create_experiment(EXPERIMENT)
        run = client.create_run(exp_id, tags=planned, run_name=OUT[:-5])
        run_id = run.info.run_id
        env = {"MLFLOW_RUN_ID": run_id, "MLFLOW_EXPERIMENT_ID": exp_id, "MLFLOW_EXPERIMENT_NAME": EXPERIMENT,
               "MLFLOW_TAGS": json.dumps(planned), "RECKON_ESTIMATE_ID": ESTIMATE_ID}
        notes, wall, rc = common.run_worker(capture_hf.launch_cmd(NPROC, "planned"),
                                            dict(env, MLFLOW_TRACKING_URI=uri), "planned")
        after_trainer = client.get_run(run_id).info
        client.set_terminated(run_id, "FINISHED" if rc == 0 else "FAILED")  # what the launcher does
        runs = common.find_runs(uri, EXPERIMENT)
        hf_notes = capture_hf.build_notes("planned", NPROC, None, {k: v for k, v in env.items()},
                                          notes, wall, f"torchrun --nproc-per-node {NPROC} (gloo, CPU)")
        observed_tokens = hf_notes["tokens_trained_whole_job"]
        capture_notes = {
            "case": "planned vs observed: tags carry the plan, the job ran with fewer processes",
            "launcher_emulated": "reckon launch: run created with the planned tags via MlflowClient.create_run, "
                                 "command run with MLFLOW_RUN_ID etc. set, run marked FINISHED after exit 0",
            "planned_tags": planned,
            "true_values": {"processes": NPROC, "world_size": notes[0]["world_size"], "gpus": 0,
                            "device": "cpu", "tokens_trained_whole_job": observed_tokens,
                            "tokens_planned_over_observed": 2 * real_tokens / observed_tokens,
                            "n_params_all": notes[0]["n_params_all"],
                            "n_params_no_embeddings": notes[0]["n_params_no_embeddings"],
                            "precision": "fp32 (bf16=False, fp16=False)", "recompute": "none"},
            "runs_in_experiment": len(runs),
            "status_after_trainer_exit": after_trainer.status,
            "end_time_after_trainer_exit": after_trainer.end_time,
            "command_exit_code": rc,
            **{k: v for k, v in hf_notes.items() if k != "variant"},
        }
        common.export_run(uri, run_id, OUT, capture_notes)


if __name__ == "__main__":
    main()

"""Shared helpers for the capture scripts: a throwaway MLflow server, the tiny model,
synthetic data, per-rank notes and the JSON export.

Paths are resolved relative to the capture folder; nothing absolute is written to a JSON file.
"""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CAPTURE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS = os.path.join(CAPTURE_DIR, "venvs")
RUNS_DIR = os.path.join(CAPTURE_DIR, "runs")
SCRATCH = os.path.join(CAPTURE_DIR, "_scratch")

# The tiny Llama used by every run (same shape as the first shared capture).
VOCAB, HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 1000, 64, 256, 2, 4, 4
SEQ_LEN = 128
N_SEQUENCES = 1024
MODEL_DESC = (f"LlamaForCausalLM(vocab {VOCAB}, hidden {HIDDEN}, intermediate {INTERMEDIATE}, "
              f"{LAYERS} layers, {HEADS} heads, {KV_HEADS} kv heads, untied lm_head), random init")
DATA_DESC = f"{N_SEQUENCES} random sequences x {SEQ_LEN} tokens (seed 0), labels=input_ids, no padding"


def venv_bin(venv, name):
    return os.path.join(VENVS, venv, "bin", name)


def rel(path):
    return os.path.relpath(path, CAPTURE_DIR)


# ---------------------------------------------------------------- MLflow server
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(log_name):
    """Start `mlflow server` (SQLite in a temp dir, one worker, no job execution) and yield its URI."""
    tmp = tempfile.mkdtemp(prefix="capture-mlflow-")
    port = free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    os.makedirs(os.path.join(CAPTURE_DIR, "logs"), exist_ok=True)
    log = open(os.path.join(CAPTURE_DIR, "logs", f"server_{log_name}.log"), "w")
    cmd = [venv_bin("hf", "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db",
           "--artifacts-destination", os.path.join(tmp, "artifacts"), "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}, see logs/server_{log_name}.log")
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("mlflow server did not come up in 120 s")
            time.sleep(0.5)
        print(f"[capture] mlflow server up at {uri} (pid {proc.pid})", flush=True)
        yield uri
    finally:
        os.killpg(proc.pid, 15)  # only the server we started (its own process group)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- model and data
def tiny_llama(seed=0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                      max_position_embeddings=SEQ_LEN, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg)


def synthetic_tokens():
    import torch
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (N_SEQUENCES, SEQ_LEN), generator=g)


def param_counts(model):
    """Our own count, for cross-checking the trainer's: all, minus nn.Embedding, minus lm_head too."""
    import torch
    total = sum(p.numel() for p in model.parameters())
    emb = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    head = model.get_output_embeddings().weight.numel()
    return {"params_total": total, "embedding_params": emb, "lm_head_params": head,
            "params_without_embedding_modules": total - emb,
            "params_without_embeddings_and_lm_head": total - emb - head}


def flops_per_token_formula(n_params):
    """6*N + 12*L*d*T (attention scores), forward+backward, per token."""
    return 6 * n_params + 12 * LAYERS * HIDDEN * SEQ_LEN


def versions(*names):
    from importlib import metadata
    out = {"python": sys.version.split()[0]}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


# ---------------------------------------------------------------- per-rank notes
def write_rank_notes(notes, rank=None):
    """Each process writes what its trainer reported to $CAPTURE_NOTES_DIR/rank<R>.json."""
    d = os.environ.get("CAPTURE_NOTES_DIR")
    if not d:
        return
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    with open(os.path.join(d, f"rank{rank}.json"), "w") as f:
        json.dump(notes, f, indent=1, default=str)


def read_rank_notes(d):
    out = {}
    for name in sorted(os.listdir(d)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                out[int(name[4:-5])] = json.load(f)
    return out


def run_worker(cmd, env_extra, log_name, timeout=900):
    """Run a training command from the capture folder (so sys.argv[0] and mlflow.source.name stay
    relative); return (notes per rank, wall seconds, exit code)."""
    notes_dir = tempfile.mkdtemp(prefix="capture-notes-")
    # One intra-op thread per process: on this 2-core machine two threads per process ran ~10x slower,
    # and torchrun sets OMP_NUM_THREADS=1 for its workers anyway.
    env = dict(os.environ, CAPTURE_NOTES_DIR=notes_dir, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", **env_extra)
    log_path = os.path.join(CAPTURE_DIR, "logs", f"{log_name}.log")
    t0 = time.time()
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, cwd=CAPTURE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                            timeout=timeout).returncode
    wall = time.time() - t0
    notes = read_rank_notes(notes_dir)
    shutil.rmtree(notes_dir, ignore_errors=True)
    print(f"[capture] {log_name}: exit {rc}, {wall:.1f} s, notes from ranks {sorted(notes)}", flush=True)
    if rc != 0:
        raise RuntimeError(f"{log_name} failed with exit code {rc}; see logs/{log_name}.log")
    return notes, wall, rc


# ---------------------------------------------------------------- export
def find_runs(uri, experiment_name):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment_name)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def export_run(uri, run_id, out_name, capture_notes):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    exp = client.get_experiment(run.info.experiment_id)
    info = run.info
    doc = {
        "run_info": {"run_id": info.run_id, "run_name": info.run_name, "experiment_id": info.experiment_id,
                     "experiment_name": exp.name, "status": info.status,
                     "lifecycle_stage": info.lifecycle_stage, "start_time": info.start_time,
                     "end_time": info.end_time, "artifact_uri": info.artifact_uri, "user_id": info.user_id},
        "params": dict(sorted(run.data.params.items())),
        "tags": dict(sorted(run.data.tags.items())),
        "latest_metrics": dict(sorted(run.data.metrics.items())),
        "metric_history": {},
        "capture_notes": capture_notes,
    }
    for key in sorted(run.data.metrics):
        hist = client.get_metric_history(run_id, key)
        doc["metric_history"][key] = [{"value": m.value, "step": m.step, "timestamp": m.timestamp}
                                      for m in sorted(hist, key=lambda m: (m.timestamp, m.step))]
    text = json.dumps(doc, indent=1, default=str)
    for bad in (CAPTURE_DIR, "/tmp/", "/root/"):
        if bad in text:
            raise RuntimeError(f"absolute path {bad!r} would be written into {out_name}")
    os.makedirs(RUNS_DIR, exist_ok=True)
    with open(os.path.join(RUNS_DIR, out_name), "w") as f:
        f.write(text + "\n")
    print(f"[capture] wrote runs/{out_name}: {len(doc['params'])} params, {len(doc['tags'])} tags, "
          f"{len(doc['metric_history'])} metrics", flush=True)
    return doc

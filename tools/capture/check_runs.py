"""Numeric checks on the captured runs (stdlib only). Prints the observations the README quotes.

    python3 scripts/check_runs.py > checks.txt
"""
import json
import os
import statistics

RUNS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runs")


def load(name):
    with open(os.path.join(RUNS, name)) as f:
        return json.load(f)


def ratios(doc, num, den):
    """num/den for every logged point where both metrics share a step."""
    a = {p["step"]: p["value"] for p in doc["metric_history"].get(num, [])}
    b = {p["step"]: p["value"] for p in doc["metric_history"].get(den, [])}
    return [a[s] / b[s] for s in sorted(a) if s in b and b[s]]


def span(xs):
    return f"min {min(xs):.6f} max {max(xs):.6f} (n={len(xs)})" if xs else "no common points"


def precision_keys(doc):
    keys = ("bf16", "fp16", "tf32", "dtype", "precision", "half_precision_backend")
    return {k: v for k, v in doc["params"].items() if k in keys} or "none"


def hf(name, batch=8, accum=2):
    d = load(name)
    m, n = d["latest_metrics"], d["capture_notes"]
    ts = n["trainer_side"]
    tokens = n["tokens_trained_whole_job"]
    dur = (d["run_info"]["end_time"] - d["run_info"]["start_time"]) / 1000
    print(f"== {name} ({n['launcher']}, world_size {n['world_size']})")
    print(f"  metrics: {sorted(m)}")
    print(f"  num_input_tokens_seen logged: {'num_input_tokens_seen' in m}; trainer state value "
          f"{ts['state_num_input_tokens_seen']}; tokens counted by our hook, all ranks: {tokens}")
    print(f"  total_flos {m['total_flos']:.0f} / (6 x n_params_no_embeddings {ts['n_params_no_embeddings']} x "
          f"tokens {tokens}) = {m['total_flos'] / (6 * ts['n_params_no_embeddings'] * tokens):.6f}")
    dev = m["train_samples_per_second"] / (m["train_steps_per_second"] * batch * accum)
    print(f"  samples/s {m['train_samples_per_second']} / (steps/s {m['train_steps_per_second']} x {batch} x "
          f"{accum}) = {dev:.4f} devices")
    print(f"  train_runtime {m['train_runtime']:.4f} s vs run end-start {dur:.3f} s; "
          f"train_runtime points: {len(d['metric_history']['train_runtime'])}")
    print(f"  epoch at end {m['epoch']} -> samples seen / dataset = {m['epoch']} "
          f"(x1024 seq = {m['epoch'] * 1024:.0f} samples = steps x {m['epoch'] * 1024 / 30:.0f})")
    print(f"  precision-related params: {precision_keys(d)}; world-size params: "
          f"{ {k: d['params'][k] for k in ('local_rank', 'ddp_backend') if k in d['params']} }")
    return d


def composer(name):
    d = load(name)
    m, n = d["latest_metrics"], d["capture_notes"]
    world = n["world_size"]
    print(f"== {name} (world_size {world}, launcher {n.get('launcher')})")
    print(f"  params: {d['params']}")
    print(f"  samples_per_sec / device/samples_per_sec: "
          f"{span(ratios(d, 'throughput/samples_per_sec', 'throughput/device/samples_per_sec'))}")
    print(f"  tokens_per_sec / device/tokens_per_sec: "
          f"{span(ratios(d, 'throughput/tokens_per_sec', 'throughput/device/tokens_per_sec'))}")
    fpt = ratios(d, "throughput/flops_per_sec", "throughput/tokens_per_sec")
    print(f"  flops_per_sec / tokens_per_sec (timestamps differ by a few ms, same step): {span(fpt)} "
          f"vs flops_per_token {n.get('flops_per_token') or n.get('trainer_side', {}).get('flops_per_token')}")
    print(f"  final time/batch {m['time/batch']:.0f}, time/sample {m['time/sample']:.0f}, time/token "
          f"{m['time/token']:.0f} -> tokens/step {m['time/token'] / m['time/batch']:.0f} (whole job: "
          f"{n['tokens_trained']} tokens, {n.get('tokens_per_step_job')} per step)")
    wct = n.get("composer_total_wct_s") or n.get("trainer_side", {}).get("composer_total_wct_s")
    print(f"  time/train {m['time/train']:.9f} h x 3600 = {m['time/train'] * 3600:.3f} s vs state wct {wct} s")
    rates = [p["value"] for p in d["metric_history"]["throughput/samples_per_sec"]]
    avg = m["time/sample"] / (m["time/train"] * 3600)
    print(f"  median window samples/s {statistics.median(rates):.1f} vs average samples/time/train {avg:.1f}; "
          f"first rate at step {d['metric_history']['throughput/samples_per_sec'][0]['step']}")
    print(f"  precision logged: {'precision' in d['params']}; system/* metrics: "
          f"{[k for k in m if k.startswith('system/')]}")


def lightning(name):
    d = load(name)
    m, n = d["latest_metrics"], d["capture_notes"]
    print(f"== {name} (world_size {n['world_size']}, log_every_n_steps {n['log_every_n_steps']}, "
          f"global_step {n['global_step']})")
    print(f"  params: {d['params']}; metrics: {len(m)}")
    if not m:
        print("  no metric logged at all (not even train_loss or the ThroughputMonitor rates)")
        return
    print(f"  samples_per_sec / device/samples_per_sec: "
          f"{span(ratios(d, 'train/samples_per_sec', 'train/device/samples_per_sec'))}")
    fpt = ratios(d, "train/device/flops_per_sec", "train/device/items_per_sec")
    print(f"  device flops/s / device items/s = flops per token: {span(fpt)}; trainer_side measured "
          f"{n.get('trainer_side', {}).get('flops_per_token_measured')}, 6N+12LdT formula "
          f"{n.get('trainer_side', {}).get('flops_per_token_formula') or n.get('flops_per_token')}")
    steps = [p["step"] for p in d["metric_history"]["train/batches"]]
    print(f"  train/batches final {m['train/batches']:.0f}, train/samples {m['train/samples']:.0f}, "
          f"train/lengths {m['train/lengths']:.0f} (rank 0 only; whole job {n['tokens_trained']} tokens); "
          f"logged at steps {steps}")
    print(f"  train/time {m['train/time']:.3f} s")


def planned(name):
    d = load(name)
    m, n, t = d["latest_metrics"], d["capture_notes"], d["tags"]
    tv = n["true_values"]
    print(f"== {name}")
    print(f"  tags: { {k: v for k, v in t.items() if k.startswith('reckon.')} }; other tags: "
          f"{sorted(k for k in t if not k.startswith('reckon.'))}; user_id {d['run_info']['user_id']}")
    dev = m["train_samples_per_second"] / (m["train_steps_per_second"] * 8 * 2)
    print(f"  observed devices from HF rates {dev:.4f} vs tag reckon.gpus {t['reckon.gpus']} "
          f"(true world_size {tv['world_size']})")
    flos_tok = m["total_flos"] / (6 * tv["n_params_no_embeddings"])
    print(f"  tokens implied by total_flos/(6 N_no_emb) {flos_tok:.0f} vs tag reckon.tokens {t['reckon.tokens']} "
          f"(true {tv['tokens_trained_whole_job']}; ratio tag/true {int(t['reckon.tokens']) / tv['tokens_trained_whole_job']})")
    print(f"  status after trainer exit {n['status_after_trainer_exit']} (HF ended the re-attached run itself); "
          f"run end_time moved {d['run_info']['end_time'] - n['end_time_after_trainer_exit']} ms by the launcher")


def main():
    for f in ("hf_default_1.json", "hf_ddp_1.json", "hf_tokens_1.json"):
        hf(f)
    for f in ("composer_1.json", "composer_2.json", "composer_ddp_1.json"):
        composer(f)
    for f in ("lightning_ddp_1.json", "lightning_ddp_2.json", "lightning_default_log_1.json"):
        lightning(f)
    planned("planned_vs_observed_1.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Extract MLPerf Training LLM results (gpt3, llama2_70b_lora) from rounds v3.1, v4.0, v4.1.

Reads the bare git snapshots of mlcommons/training_results_v{3.1,4.0,4.1} (HEAD commit) and
writes two CSVs next to this script:
  mlperf_llm_runs.csv  one row per results/<system>/<benchmark>/result_*.txt
  mlperf_llm.csv       one row per submission (results dir), with the olympic mean

Standard library only.  Usage:  python3 extract.py [MIRROR_ROOT]
MIRROR_ROOT holds mlcommons+training_results_vX.Y/repo (default: $MLPERF_MIRROR).
Later rounds are deliberately not read.
"""
import csv
import json
import os
import re
import statistics
import subprocess
import sys

ROUNDS = ["v3.1", "v4.0", "v4.1"]          # later rounds must not be used
BENCHMARKS = ["gpt3", "llama2_70b_lora"]
HERE = os.path.dirname(os.path.abspath(__file__))
MIRROR = sys.argv[1] if len(sys.argv) > 1 else os.environ["MLPERF_MIRROR"]
RESULT_RE = re.compile(r"^([^/]+)/results/([^/]+)/(%s)/(result_[^/]*\.txt)$" % "|".join(BENCHMARKS))


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True,
                          text=True, errors="replace").stdout


def chip_of(model):
    """Short chip family from the systems JSON accelerator_model_name."""
    m = model.upper().replace(" ", "")
    for key, chip in [("B200", "B200"), ("H200", "H200"), ("H100", "H100"), ("A100", "A100"),
                      ("L40S", "L40S"), ("GAUDI2", "Gaudi2"), ("GAUDI", "Gaudi2"), ("MI300", "MI300X"),
                      ("TRILLIUM", "TPU-v6e"), ("V6E", "TPU-v6e"), ("V5P", "TPU-v5p"), ("V5E", "TPU-v5e")]:
        if key in m:
            return chip
    return model


def parse_mllog(text):
    """Yield the JSON dicts of all ':::MLLOG {...}' lines (any prefix before the tag is ignored)."""
    for line in text.splitlines():
        i = line.find(":::MLLOG ")
        if i < 0:
            continue
        try:
            yield json.loads(line[i + 9:])
        except ValueError:
            continue


def parse_result(text, bench):
    """Per-run values from one result file (keys named as in the MLLOG lines)."""
    first = {}            # first value of each POINT_IN_TIME key
    last = {}             # last value of each POINT_IN_TIME key
    run_start = run_stop = None
    stop_meta = {}
    eval_points = []      # epoch_num (gpt3, tokens) or samples_count (lora, sequences) of eval_accuracy
    for d in parse_mllog(text):
        k, v, md = d.get("key"), d.get("value"), d.get("metadata") or {}
        # run_start/run_stop as the MLPerf result_summarizer takes them: keep overwriting
        # run_start until the first run_stop is seen.
        if run_stop is None and k == "run_start":
            run_start = d["time_ms"]
        elif run_stop is None and k == "run_stop":
            run_stop, stop_meta = d["time_ms"], md
        elif k == "eval_accuracy":
            pt = md.get("epoch_num", md.get("samples_count"))
            if pt is not None and pt not in eval_points:
                eval_points.append(pt)
        if d.get("event_type") == "POINT_IN_TIME" and not isinstance(v, (dict, list)):
            first.setdefault(k, v)
            last[k] = v
    r = {
        "status": stop_meta.get("status", "missing_run_stop" if run_stop is None else ""),
        "time_to_train_ms": (run_stop - run_start) if (run_start is not None and run_stop is not None) else "",
        "submission_org": first.get("submission_org", ""),
        "submission_platform": first.get("submission_platform", ""),
        "global_batch_size": first.get("global_batch_size", ""),
        "gradient_accumulation_steps": first.get("gradient_accumulation_steps", ""),
        "seq_len_logged": first.get("max_sequence_length", first.get("sequence_length", first.get("seq_len", ""))),
        "train_samples_logged": last.get("train_samples", ""),
        "trained_samples_logged": last.get("trained_samples", ""),
        "eval_samples_logged": first.get("eval_samples", ""),
        "init_checkpoint_step": first.get("init_checkpoint_step", ""),
        "opt_base_learning_rate": first.get("opt_base_learning_rate", ""),
        "opt_learning_rate_training_steps": first.get("opt_learning_rate_training_steps", ""),
        "opt_learning_rate_decay_steps": first.get("opt_learning_rate_decay_steps", ""),
        "max_steps_logged": first.get("max_steps", ""),
        "lora_rank": first.get("lora_rank", ""),
        "lora_alpha": first.get("lora_alpha", ""),
        "seed": first.get("seed", ""),
        "n_evals": len(eval_points),
        "final_eval_accuracy": last.get("eval_accuracy", ""),
    }
    # Amount trained up to run_stop.
    #  gpt3: the epoch_num of the eval_accuracy lines counts TOKENS (block epoch_count = 12 steps x
    #        2048 seqs x 2048 tokens = 50331648); samples = tokens / 2048.
    #  lora: run_stop metadata samples_count (sequences of 8192 tokens); else last eval samples_count.
    if bench == "gpt3":
        seq = r["seq_len_logged"] or 2048
        tokens = eval_points[-1] if eval_points else ""
        r["seq_len"] = seq
        r["tokens_trained"] = tokens
        r["samples_trained"] = tokens / seq if tokens != "" else ""
    else:
        seq = r["seq_len_logged"] or 8192   # not logged; 8192 = packed GovReport length (see README)
        samples = stop_meta.get("samples_count", eval_points[-1] if eval_points else "")
        r["seq_len"] = seq
        r["samples_trained"] = samples
        r["tokens_trained"] = samples * seq if samples != "" else ""
    gbs = r["global_batch_size"]
    r["steps"] = r["samples_trained"] / gbs if (gbs and r["samples_trained"] != "") else ""
    return r


def olympic(scores, failed):
    """MLPerf result_summarizer olympic average (max_dropped_scores = 1 for these benchmarks):
    failed runs count as the dropped slowest score; >1 failed run -> no score."""
    if failed > 1:
        return None
    s = sorted(scores)[1:len(scores) - (1 - failed)]
    return sum(s) / len(s) if s else None


def num(x):
    """Compact number formatting; non-numbers pass through unchanged."""
    if x in ("", None) or isinstance(x, bool) or not isinstance(x, (int, float)):
        return "" if x is None else x
    return int(x) if float(x).is_integer() else round(float(x), 6)


def main():
    runs, subs = [], []
    seen_runs = {}    # (benchmark, sorted (seed, time) pairs) -> first source_path with those runs
    read_status = {}
    for rnd in ROUNDS:
        repo = "mlcommons/training_results_" + rnd
        gitdir = os.path.join(MIRROR, "mlcommons+training_results_" + rnd, "repo")
        if not os.path.isdir(gitdir):
            read_status[rnd] = "not fetched"
            print("WARNING: %s not available at %s" % (repo, gitdir), file=sys.stderr)
            continue
        commit = git(gitdir, "rev-parse", "HEAD").strip()
        read_status[rnd] = commit
        tree = {}
        for line in git(gitdir, "ls-tree", "-r", "HEAD").splitlines():
            meta, path = line.split("\t", 1)
            tree[path] = meta.split()[2]
        dirs = {}
        for path in sorted(tree):
            m = RESULT_RE.match(path)
            if m:
                dirs.setdefault(m.groups()[:3], []).append(path)
        for (submitter, system, bench), files in sorted(dirs.items()):
            sysjson = {}
            sj = "%s/systems/%s.json" % (submitter, system)
            if sj in tree:
                try:
                    sysjson = json.loads(git(gitdir, "show", "HEAD:" + sj))
                except ValueError:
                    pass
            nodes = int(sysjson.get("number_of_nodes") or 0)
            per_node = int(sysjson.get("accelerators_per_node") or 0)
            model = sysjson.get("accelerator_model_name", "").strip()
            resdir = "%s/results/%s/%s" % (submitter, system, bench)
            source = "%s:%s" % (repo, resdir)
            scaling = 1.0
            if resdir + "/scaling.json" in tree:
                scaling = json.loads(git(gitdir, "show", "HEAD:%s/scaling.json" % resdir))["scaling_factor"]
            sub_runs, missing = [], 0
            for f in files:
                text = git(gitdir, "show", "HEAD:" + f)
                if not text:
                    missing += 1       # blob absent from the snapshot (files >= 4 MiB are not stored)
                    continue
                r = parse_result(text, bench)
                r.update(round=rnd, benchmark=bench, submitter=submitter, system=system,
                         result_file=os.path.basename(f), source_path="%s:%s" % (repo, f))
                runs.append(r)
                sub_runs.append(r)
            # Same runs re-published under another submitter/system dir or round (same seeds and times)?
            sig = (bench, tuple(sorted((str(r["seed"]), r["time_to_train_ms"]) for r in sub_runs)))
            dup = seen_runs.setdefault(sig, source) if sub_runs else source
            ok = [r for r in sub_runs if r["status"] == "success" and r["time_to_train_ms"] != ""]
            mins = [r["time_to_train_ms"] / 60000.0 for r in ok]
            failed = len(sub_runs) - len(ok)
            oly = olympic(mins, failed) if mins else None

            def med(key):
                vals = [r[key] for r in ok if r[key] != ""]
                return statistics.median(vals) if vals else ""

            def uniq(key):
                vals = sorted({str(num(r[key])) for r in sub_runs if r[key] != ""})
                return ";".join(vals)

            notes = []
            if missing:
                notes.append("%d result files absent from snapshot" % missing)
            if failed:
                notes.append("%d non-success runs" % failed)
            if dup != source:
                notes.append("same runs (seeds and times) as " + dup)
            subs.append({
                "round": rnd, "benchmark": bench, "submitter": submitter, "system": system,
                "accelerator": model, "accelerators": nodes * per_node,
                "nodes": nodes, "runs": len(sub_runs),
                "time_to_train_minutes_olympic": num(oly) if oly is not None else "",
                "time_to_train_minutes_min": num(min(mins)) if mins else "",
                "time_to_train_minutes_max": num(max(mins)) if mins else "",
                "global_batch_size": uniq("global_batch_size"), "seq_len": uniq("seq_len"),
                "samples_trained_median": num(med("samples_trained")), "steps_median": num(med("steps")),
                "source_path": source,
                # extra columns
                "chip": chip_of(model),
                "rcp_scaling_factor": num(scaling),
                "score_minutes_rcp_scaled": num(oly * scaling) if oly is not None else "",
                "tokens_trained_median": num(med("tokens_trained")),
                "n_evals_median": num(med("n_evals")),
                "successful_runs": len(ok), "result_files_listed": len(files),
                "division": sysjson.get("division", ""), "availability": sysjson.get("status", ""),
                "system_name": sysjson.get("system_name", ""), "framework": sysjson.get("framework", ""),
                "lora_rank": uniq("lora_rank"), "gradient_accumulation_steps": uniq("gradient_accumulation_steps"),
                "init_checkpoint_step": uniq("init_checkpoint_step"),
                "eval_samples_logged": uniq("eval_samples_logged"),
                "train_samples_logged": uniq("train_samples_logged"),
                "submission_platform": uniq("submission_platform"),
                "duplicate_of": dup if dup != source else "",
                "commit": commit, "notes": "; ".join(notes),
            })
    run_cols = ["round", "benchmark", "submitter", "system", "result_file", "status", "time_to_train_ms",
                "time_to_train_minutes", "global_batch_size", "seq_len", "seq_len_logged", "samples_trained",
                "tokens_trained", "steps", "n_evals", "final_eval_accuracy", "train_samples_logged",
                "trained_samples_logged", "eval_samples_logged", "gradient_accumulation_steps",
                "init_checkpoint_step", "opt_base_learning_rate", "opt_learning_rate_training_steps",
                "opt_learning_rate_decay_steps", "max_steps_logged", "lora_rank", "lora_alpha", "seed",
                "submission_org", "submission_platform", "source_path"]
    for r in runs:
        r["time_to_train_minutes"] = num(r["time_to_train_ms"] / 60000.0) if r["time_to_train_ms"] != "" else ""
        for k in ("samples_trained", "tokens_trained", "steps"):
            r[k] = num(r[k])
    with open(os.path.join(HERE, "mlperf_llm_runs.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=run_cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)
    with open(os.path.join(HERE, "mlperf_llm.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(subs[0].keys()))
        w.writeheader()
        w.writerows(subs)
    print("rounds read:", read_status, file=sys.stderr)
    print("%d submissions, %d runs" % (len(subs), len(runs)), file=sys.stderr)


if __name__ == "__main__":
    main()
